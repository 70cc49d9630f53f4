"""The measurement core that `compare` (runner.py) and `scale` (scale.py)
share, one implementation each: what a process measures (Job), an agent
process's arguments (agent_argv) and what its lines give (read_agent: the
samples, with the target's host cost on a counted batch), a tool run's
samples (tool_samples), how a target's iteration count is found
(calibrate), how long a run may go past its budget (grace_s), and the run's
record from its first row to its status on every exit path (recorded).
The agent's protocol has one reader, agent.events, which read_agent
wraps for compare, scale and doctor."""
from __future__ import annotations

import socket
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable

from . import __version__
from .agent import events
from .errors import AgentError, StoreError
from .model import BenchSpec, Sample
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


# -- one process -----------------------------------------------------------------------
def agent_argv(target, spec: BenchSpec, *, warmup: int, samples: int | None = None,
               min_time_ms: int | None = None, iters: int | None = None, duration_ms: int | None = None,
               count_settle_ms: int | None = None, parallel: int = 1, tracepoint: int | None = None,
               go: bool = False) -> list[str]:
    """One agent process's arguments on `target`, for every process of
    compare, scale and doctor: `samples` timed samples after `warmup` (a
    counting process, count_settle_ms given: no timed sample, one batch
    with counters on),
    batches of --min-time-ms at the agent's own count or of `iters` given
    (then no sample is cut short), tiled for duration_ms (scale's rounds),
    on the target's agent CPU, `parallel` instances, held at the barrier
    until released (go)."""
    args = ["run", spec.name]
    if count_settle_ms is not None:
        args += ["--samples", "0", "--count", "1", "--count-settle-ms", str(count_settle_ms)]
    elif samples is not None:
        args += ["--samples", str(samples)]
    args += ["--warmup", str(warmup)]
    if min_time_ms is not None:
        args += ["--min-time-ms", str(min_time_ms)]
    if iters:
        args += ["--iters", str(iters), "--max-sample-ms", "0"]
    if duration_ms is not None:
        args += ["--duration-ms", str(duration_ms)]
    if target.agent_cpu() is not None:
        args += ["--cpu", str(target.agent_cpu())]
    if parallel > 1:
        args += ["--parallel", str(parallel)]
    if tracepoint is not None:
        args += ["--tracepoint-id", str(tracepoint)]
    return args + target.agent_extra_args() + (["--go"] if go else [])


@dataclass
class AgentRead:
    """What one agent process said, its samples aside (they go to the caller's take())."""
    iters: int | None = None     # the count it calibrated (instance 0's)
    skipped: str = ""            # its reason, where it skipped the benchmark
    finished: bool = False       # it said 'done'
    first: float | None = None   # when its first line arrived
    timed: int = 0               # its timed samples


def read_agent(target, lines: Iterable[str], spec: BenchSpec, take: Callable[[dict, float], None],
               probe=None, when: Callable[[], float] = time.time, into: AgentRead | None = None) -> AgentRead:
    """Every line of one agent process on `target` (agent.events checks
    them): take(fields, t) for each sample as it comes, t when it arrived
    (when()).  A counted batch's sample carries what it cost the host per
    operation beside the agent's own counts: the bare machine's are its
    agent's own, mirrored under the host's names (mirror_host); another
    target's are read by its host probe (given: enabled when the agent says
    it is counting, read at each counted sample).  AgentError for anything
    a real agent would not say (what was read before it is in `into`,
    where given); the caller decides what a process that did not finish
    means."""
    got = into if into is not None else AgentRead()
    mark = None  # the probe's reading when the counted batch began
    try:
        for ev in events(lines, spec):
            t = when()
            got.first = got.first or t
            if ev.kind == "counting" and probe is not None:
                probe.enable()
                mark = (probe.read(), time.monotonic())
            elif ev.kind == "sample":
                f = dict(ev.fields)
                if f["counting"]:
                    host = {}
                    if target.mirror_host:
                        host = mirror(f["metrics"])
                    elif probe is not None and mark is not None:
                        now = (probe.read(), time.monotonic())
                        host = probe.per_op(mark[0], now[0], now[1] - mark[1], f["ops"])
                        mark = now
                    f["metrics"] = {**f["metrics"], **host}
                elif not f["warmup"]:
                    got.timed += 1
                take(f, t)
            elif ev.kind == "calibration" and got.iters is None and ev.instance == 0:
                got.iters = ev.iters
            elif ev.kind == "skip":
                got.skipped = ev.reason
            elif ev.kind == "done":
                got.finished = True
    finally:
        if probe is not None:
            probe.disable()
    return got


def mirror(m: dict[str, float]) -> dict[str, float]:
    """The bare machine's host cost is its agent's own: the same counts,
    under the host's names, so that it sits beside a guest's in `explain`."""
    out = {}
    if "task_clock_ns" in m or "cpu_user_ns" in m:
        out["host_cpu_ns"] = m.get("task_clock_ns", m.get("cpu_user_ns", 0.0) + m.get("cpu_sys_ns", 0.0))
    for own, host in (("cpu_user_ns", "host_cpu_user_ns"), ("cpu_sys_ns", "host_cpu_sys_ns"),
                      ("context_switches", "host_context_switches"), ("syscalls", "host_syscalls")):
        if own in m:
            out[host] = m[own]
    return out


def tool_samples(job: Job, values: dict[str, float], target: str, process: int, block: int, t: float,
                 cpu: int | None, warmup: bool = False, instance: int = 0) -> list[Sample]:
    """One run of a workload's tool, its figures parsed (values): a sample
    of each of the job's rows.  AgentError naming the figure that is not a
    positive number."""
    out = []
    for spec in job.specs:
        try:
            v = workloads.figure(spec, values)
        except workloads.ParseError as e:
            raise AgentError(str(e)) from None
        out.append(Sample(benchmark=spec.name, target=target, value=v, unit=spec.unit, process=process, seq=0,
                          instance=instance, warmup=warmup, iters=1, ops=1.0, block=block, t=t,
                          cpu=cpu if cpu is not None else -1))
    return out


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
    return agent_argv(target, spec, samples=CALIBRATION_SAMPLES, warmup=1, min_time_ms=min_time_ms)


def calibrate(target, spec: BenchSpec, min_time_ms: int, timeout: float) -> Calibration:
    """One process on `target` finds the iteration count that makes a
    sample of `spec` last min_time_ms, and what one iteration takes (the
    median of its timed samples, where the unit is a time).  AgentError
    when it calibrated nothing; the target's own errors (TargetError,
    ChildFailed) pass through.  Nothing of it is stored: the caller records
    the process."""
    started, per_iter = time.time(), []

    def take(f: dict, _t: float) -> None:
        if spec.unit == "ns" and not f["warmup"]:
            per_iter.append(f["value"] * f["ops"] / f["iters"])
    got = read_agent(target, target.run_agent(calibration_args(target, spec, min_time_ms), timeout=timeout),
                     spec, take)
    if got.skipped:
        return Calibration(None, None, got.skipped, started)
    if got.iters is None:
        raise AgentError("the agent calibrated nothing")
    return Calibration(got.iters, statistics.median(per_iter) if per_iter else None, "", started)


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
