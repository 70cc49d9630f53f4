"""The measurement core that `compare` (runner.py) and `scale` (scale.py)
share, one implementation each: what a process measures (Job), how a
target's iteration count is found (calibrate), how long a run may go past
its budget (grace_s), and the run's record from its first row to its
status on every exit path (recorded).  The agent's protocol has one reader,
agent.events."""
from __future__ import annotations

import socket
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from . import __version__
from .agent import events
from .errors import AgentError, StoreError
from .model import BenchSpec
from .proc import signals_held
from .store import Store
from .suite import workloads
from .suite.workloads import Workload


# -- what one process measures ---------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """What one process measures: one micro benchmark, or every figure of
    one workload."""
    specs: tuple[BenchSpec, ...]
    workload: Workload | None = None

    @property
    def name(self) -> str:
        return self.workload.name if self.workload else self.specs[0].name


def jobs_of(specs: list[BenchSpec]) -> list[Job]:
    """Specs grouped into jobs, in the order given (a workload where its
    first figure is)."""
    jobs: list[Job] = []
    grouped: dict[str, list[BenchSpec]] = {}
    for spec in specs:
        w = workloads.of_spec(spec.name) if spec.kind == "workload" else None
        if w is None:
            jobs.append(Job((spec,)))
        elif w.name in grouped:
            grouped[w.name].append(spec)
        else:
            grouped[w.name] = [spec]
            jobs.append(Job((), w))
    return [Job(tuple(grouped[j.workload.name]), j.workload) if j.workload else j for j in jobs]


# -- the budget ------------------------------------------------------------------------
def grace_s(max_time: float) -> float:
    """How far past --max-time a run may go at most: 10% of it, at least
    5 s and at most 60 s.  No block or round is begun that is expected to
    end past the budget, and every process still running at budget + grace
    is stopped (its row ends 'budget'), so a slow target or a hung tool
    cannot stretch the run."""
    return min(60.0, max(5.0, 0.1 * max_time))


class BudgetSpent(Exception):
    """The budget and its grace are spent: the run stops where it is."""


# -- calibration -----------------------------------------------------------------------
CALIBRATION_SAMPLES = 3


@dataclass
class Calibration:
    iters: int | None            # the count the agent calibrated (None: skipped)
    ns_per_iter: float | None    # what one iteration took: the median of the timed samples (None: unknown)
    skipped: str = ""            # the agent's reason, where it skipped the benchmark
    started: float = 0.0         # wall-clock time the process began


def calibration_args(target, spec: BenchSpec, min_time_ms: int) -> list[str]:
    """A calibration process's arguments: CALIBRATION_SAMPLES samples after
    one warmup (a fresh process's first batches are cold: tlb_4k's read
    162, 132, 100, 77 ns here, so a count found on the first batch alone is
    too small)."""
    args = ["run", spec.name, "--samples", str(CALIBRATION_SAMPLES), "--warmup", "1",
            "--min-time-ms", str(min_time_ms)]
    if target.agent_cpu() is not None:
        args += ["--cpu", str(target.agent_cpu())]
    return args + target.agent_extra_args()


def calibrate(target, spec: BenchSpec, min_time_ms: int, timeout: float) -> Calibration:
    """One process on `target` finds the iteration count that makes a
    sample of `spec` last min_time_ms, and what one iteration takes (the
    median of its timed samples, where the unit is a time).  AgentError
    when it calibrated nothing; the target's own errors (TargetError,
    ChildFailed) pass through.  Nothing of it is stored: the caller records
    the process."""
    started, iters, skipped, per_iter = time.time(), None, "", []
    for ev in events(target.run_agent(calibration_args(target, spec, min_time_ms), timeout=timeout), spec):
        if ev.kind == "calibration" and iters is None and ev.instance == 0:
            iters = ev.iters
        elif ev.kind == "sample" and spec.unit == "ns" and not ev.fields["warmup"]:
            f = ev.fields
            per_iter.append(f["value"] * f["ops"] / f["iters"])
        elif ev.kind == "skip":
            skipped = ev.reason
    if skipped:
        return Calibration(None, None, skipped, started)
    if iters is None:
        raise AgentError("the agent calibrated nothing")
    return Calibration(iters, statistics.median(per_iter) if per_iter else None, "", started)


# -- the run's record --------------------------------------------------------------------
def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:4]


def free_port() -> int:
    """A TCP port free on this host's loopback now (a workload's server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recorded(store: Store, kind: str, command: str, config: dict, body: Callable[[str], str],
             failures: tuple[type[Exception], ...] = (StoreError,),
             describe: Callable[[Exception], str] = str,
             closing: Callable[[], None] | None = None) -> tuple[str, str, str]:
    """A run's record from its first row to its status, on every exit
    path: the one session of `compare` and `scale`.  Writes the run's row
    (with stop signals held: a Ctrl-C arriving then is taken just after
    it, so a run is never left half-begun), calls body(run_id) for its
    status, and finishes the run with it: `interrupted` on a Ctrl-C,
    `failed` on an error.  An error of a type in `failures` (the store's,
    by default) is kept as the failure, described by `describe`: the
    samples stored before it are kept and can be reported; any other is
    raised once the run is finished.  A store that cannot record the run
    at all raises its one line.  `closing` (a progress display) is called
    first on every exit.  Returns (run_id, status, failure: '' when
    nothing went wrong)."""
    run_id = new_run_id()
    status, failure, begun = "failed", "", False
    try:
        with signals_held():
            store.new_run(run_id, kind, command, __version__, config)
            begun = True
        status = body(run_id)
    except KeyboardInterrupt:
        status = "interrupted"
    except failures as e:
        if not begun:
            raise  # nothing recorded: the store's one line
        status, failure = "failed", describe(e)
    finally:
        if closing:
            closing()
        try:
            if begun:
                store.finish_run(run_id, status)
        except StoreError as e:
            failure = failure or str(e)
    return run_id, status, failure
