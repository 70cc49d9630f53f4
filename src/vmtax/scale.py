"""vmtax scale: N copies of one target at once (seed 004's PI test in 1, 8
and 17 guests; seed 000's 16 instances): consolidation, overcommit and
fairness.  The figures are computed in scaling.py, from the store.

Stages are the instance counts asked, smallest first.  The pool of copies
grows from stage to stage: new copies boot in parallel from one cached
image (a guest's kernel and initramfs, a container's root) -- launched
from this thread, whose death kills them (PR_SET_PDEATHSIG), and waited
for in threads; where a start settles something by trying it (qemu's
accel=auto probing KVM), the very first copy starts alone -- and a stage
of N uses the first N.  Every copy is stopped on every exit path: a copy that does not
boot or dies mid-round, a Ctrl-C, a failure of the store.

A round runs the benchmark in every copy, held at a barrier: each agent
starts, sets up, takes the shared iteration count (calibrated once, on one
copy alone), prints "ready" and waits on its channel; once all are ready,
vmtax sends each its go line (Target.go) and every copy takes samples for
the round time (the agent's --duration-ms: the same stretch of time for
all, fast or slow).  A workload's tool is held by vmtax-shell the same way
(WAIT) before it starts.  Rounds repeat until the aggregate's 95% interval
is within --precision, from --rounds up to --max-rounds, within the stage's
share of --max-time.  Over each round vmtax reads the host's CPU
utilisation (/proc/stat, every CPU: other work on the host shows there
too) and, right after the start, each copy's host memory.

Stored as a run of kind "scale": each stage is a target `TARGET xN`; its
samples carry their instance and round (block); its facts (`scale`) the
instance count, vCPUs, host CPUs, pinning and the per-round host figures.
"""

from __future__ import annotations

import math
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from .agent import parse_line
from .engine.budget import BudgetSpent
from .engine.execute import Lines, Where, calibrate, run_process, run_tool
from .engine.jobs import Job, jobs_of
from .engine.protocol import agent_argv
from .engine.session import Session, TargetPool, run_session
from .errors import AgentError, StoreError, TargetError, UserError
from .hostproc import host_cpu_times, mem_available_mb, pss_mb
from .model import BenchSpec, Sample, TargetInfo
from .peers import free_port
from .proc import ChildFailed
from .scaling import instance_rates, is_throughput, rate_unit
from .stats import jain, summarize
from .store import Store
from .suite import workloads
from .targets.base import GATE, Target

RESERVE_MB = 256.0  # of MemAvailable kept for the host and vmtax itself


@dataclass(frozen=True)
class ScaleConfig:
    instances: tuple[int, ...]  # the instance counts, ascending
    round_time: float = 2.0  # seconds of timed samples per round (a tool: rounded up)
    min_rounds: int = 3  # rounds per stage and benchmark, at least
    max_rounds: int = 10  # and at most
    precision: float = 0.05  # stop when the aggregate's CI half-width is within this
    max_time: float = 600.0  # seconds for the whole run (min_rounds always run)
    min_time_ms: int = 10  # calibration goal of one sample, on one copy alone
    warmup: int = 1  # samples each agent discards after the start
    pin: str = "none"  # none | spread (round-robin over the host CPUs)
    timeout: float = 300.0  # one round, from launch to the last line


def host_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def pinning_text(pin: str, n: int, cpus: list[int]) -> str:
    """What the output says about where the instances ran."""
    if pin == "none":
        return f"unpinned: the host's scheduler places every instance on its {len(cpus)} CPUs"
    counts = [sum(1 for i in range(n) if i % len(cpus) == k) for k in range(len(cpus))]
    share = ", ".join(f"CPU {c}: {k}" for c, k in zip(cpus, counts, strict=True) if k)
    return (
        f"pinned round-robin: instance i on host CPU i mod {len(cpus)} (a guest's vCPU "
        f"threads; its emulator threads on the other CPUs; at N={n}: {share})"
    )


def check_memory(proto: Target, n: int, available: float | None = None) -> None:
    """UserError, before anything starts, when n copies of proto would not
    fit in the host's available memory (MemAvailable less RESERVE_MB)."""
    available = mem_available_mb() if available is None else available
    if available is None:
        return
    each = proto.memory_need_mb()
    room = available - RESERVE_MB
    if n * each > room:
        fits = max(0, int(room // each))
        raise UserError(
            f"--instances {n}: {n} x {proto.name} need about {n * each / 1024:.1f} GiB "
            f"({each:.0f} MiB each: its memory and its host processes'), but the host has "
            f"{available / 1024:.1f} GiB available (MemAvailable, less {RESERVE_MB:.0f} MiB kept): "
            f"{fits} fit; ask for fewer instances, or give the guest less mem="
        )


def check_jobs(specs: list[BenchSpec]) -> list[Job]:
    """The jobs a scale run can measure; UserError for one it cannot."""
    jobs = jobs_of(specs)
    for job in jobs:
        w = job.workload
        if w is not None and (w.peer or w.needs_disk):
            raise UserError(
                f"vmtax scale runs {w.name} in no copy: it needs "
                f"{'a peer on the host' if w.peer else 'a disk'}; give a workload that runs alone"
            )
        if w is not None and w.missing():
            raise UserError(f"{w.name} cannot run here: {w.missing()}")
        for spec in job.specs:
            if not is_throughput(spec):
                raise UserError(
                    f"{spec.name} reports a {spec.unit} where lower is better, not a rate: "
                    f"vmtax scale sums throughputs (an agent row, or a workload's rate)"
                )
    return jobs


# -- the pool of copies ------------------------------------------------------------
def grow(
    pool: TargetPool,
    make: Callable[[int], Target],
    n: int,
    pin: str,
    cpus: list[int],
    files: tuple,
    label: str,
    note: Callable[[str], None],
) -> None:
    """Start copies until the session's pool has n (TargetPool.start_all:
    in parallel, the very first alone where its start settles something
    the others reuse), pinned round-robin over the host CPUs with --pin
    spread (vmtax then keeps off the CPUs they are on, where others are
    left); say how long they took."""
    start = len(pool.targets)
    if n <= start:
        return
    fresh = [make(i) for i in range(start, n)]
    pool.add(fresh, [cpus[i % len(cpus)] if pin == "spread" else None for i in range(start, n)], files)
    got = pool.start_all(fresh, lambda i: f"instance {i + 1} of {n}")
    how = f"{got.parallel} in parallel" + (", after the first alone" if got.alone else "")
    note(
        f"{n - start} instance(s) of {label} started in {got.seconds:.1f} s" + (f" ({how})" if got.parallel > 1 else "")
    )


# -- one round ---------------------------------------------------------------------
@dataclass
class RoundResult:
    lines: list[list[tuple[float, str]]]  # per instance: (arrival time, line) after its ready line
    reached: list[bool]  # whether each got to the barrier (else: skipped, say)
    host_cpu_pct: float | None
    seconds: float  # from the go to the last instance's end
    host_mem_mib: list[float]
    started: float  # wall-clock time of the go


def run_round(
    targets: list[Target], argv_of: Callable[[int, Target], list[str]], tool: bool, timeout: float, memory: bool = True
) -> RoundResult:
    """Every target runs its argv held at the barrier; once all are ready,
    all are released at once.  TargetError naming the instance at the
    first failure of any (the caller stops them all).  memory: read each
    target's host memory just after the start."""
    n = len(targets)
    lines: list[list[tuple[float, str]]] = [[] for _ in range(n)]
    reached = [False] * n
    events: queue.Queue[tuple[str, int, BaseException | None]] = queue.Queue()

    def work(i: int) -> None:
        error = None
        try:
            for line in targets[i].run_gated(argv_of(i, targets[i]), timeout, tool=tool):
                if not reached[i] and _is_ready(line, tool):
                    reached[i] = True
                    events.put(("ready", i, None))
                else:
                    lines[i].append((time.time(), line))
        except BaseException as e:  # told to the coordinator
            error = e
        events.put(("end", i, error))

    for i in range(n):
        threading.Thread(target=work, args=(i,), daemon=True).start()
    deadline = time.monotonic() + timeout
    waiting, ended = set(range(n)), set()
    while waiting:  # the barrier: every instance ready (or ended without reaching it: a skip)
        kind, i, error = _next_event(events, deadline, targets, "reach the barrier")
        _fail_on(error, i, targets)
        waiting.discard(i)
        if kind == "end":
            ended.add(i)
    busy0, total0 = host_cpu_times()
    t0, started = time.monotonic(), time.time()
    for i, t in enumerate(targets):
        if reached[i] and i not in ended:
            t.go()
    # while they run; the warmup sample absorbs what reading it costs
    mem = [pss_mb(t.host_pids()) for t in targets] if memory else []
    while len(ended) < n:
        kind, i, error = _next_event(events, deadline, targets, "finish its round")
        _fail_on(error, i, targets)
        if kind == "end":
            ended.add(i)
    seconds = time.monotonic() - t0
    busy1, total1 = host_cpu_times()
    cpu = 100.0 * (busy1 - busy0) / (total1 - total0) if total1 > total0 else None
    return RoundResult(lines, reached, cpu, seconds, mem, started)


def _is_ready(line: str, tool: bool) -> bool:
    if tool:
        return line.strip() == GATE
    if '"ready"' not in line:
        return False
    try:
        return parse_line(line).get("type") == "ready"
    except AgentError:
        return False


def _next_event(events: queue.Queue, deadline: float, targets: list[Target], what: str):
    try:
        return events.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        raise TargetError(f"an instance of {targets[0].name} did not {what} in time") from None


def _fail_on(error: BaseException | None, i: int, targets: list[Target]) -> None:
    if error is None:
        return
    what = f"its agent {error}" if isinstance(error, ChildFailed) else error
    raise TargetError(f"instance {i + 1} of {len(targets)} ({targets[i].name}) failed: {what}")


# -- the run -------------------------------------------------------------------------
def stage_name(target: str, n: int) -> str:
    return f"{target} x{n}"


class ScaleRun:
    """The stages of a scale run in one session (engine.session): its copies
    started in the session's pool, every process read and recorded by the
    engine (execute), rounds until the aggregate is precise."""

    def __init__(
        self,
        text: str,
        make: Callable[[int], Target],
        cfg: ScaleConfig,
        specs: list[BenchSpec],
        session: Session,
        note: Callable[[str], None],
    ):
        self.text, self.make, self.cfg, self.specs = text, make, cfg, specs
        self.jobs = jobs_of(specs)  # checked by check_jobs before the run was recorded
        self.pool, self.rec, self.note = session.pool, session.recorder, note
        self.cpus = host_cpus()
        self.iters: dict[str, int | None] = {}  # each agent row's count (None: skipped)
        self.skipped: dict[str, str] = {}
        self.rounds = 0  # rounds measured and stored, every stage's
        self.deadline = session.begin(cfg.max_time)
        self.pool.start_by = self.deadline.hard_end_real  # a copy's boot ends by the hard stop

    def run(self) -> None:
        files = workloads.provision(self.specs, by=self.deadline.hard_end_real - self.deadline.grace)
        try:
            items = len(self.cfg.instances) * len(self.jobs)
            for position, n in enumerate(self.cfg.instances):
                grow(self.pool, self.make, n, self.cfg.pin, self.cpus, files, self.text, self.note)
                stage = stage_name(self.text, n)
                copies = self.pool.targets[:n]
                facts = {
                    "n": n,
                    "vcpus": sum(t.vcpus() for t in copies),
                    "host_cpus": len(self.cpus),
                    "pinning": pinning_text(self.cfg.pin, n, self.cpus),
                    "instances": [t.name for t in copies],
                    "rounds": {},
                }
                self._store_stage(position, stage, copies, facts)
                for job in self.jobs:
                    share = max(0.0, self.cfg.max_time - (time.monotonic() - self.deadline.t0)) / items
                    items -= 1
                    try:
                        self._measure(job, stage, copies, facts, time.monotonic() + share)
                    except BudgetSpent:
                        self._store_stage(position, stage, copies, facts)  # its rounds so far
                        raise
                    self._store_stage(position, stage, copies, facts)
        except BudgetSpent as e:
            if not self.rounds:  # nothing measured: the run failed, it is not complete
                raise TargetError(f"{e}; no round was measured") from None
            self.note(f"vmtax: {e}")

    def _timeout(self) -> float:
        """A round's (or calibration's) timeout, never past budget + grace."""
        return self.deadline.timeout(self.cfg.timeout)

    def _cut(self, e: Exception, stage: str, names: list[str]) -> None:
        """A failure at the hard stop is the budget's, not the target's:
        the rows end 'budget' and the run stops (BudgetSpent)."""
        if not self.deadline.spent():
            return
        why = f"stopped at --max-time plus its grace ({self.deadline.grace:.0f} s): {e}"
        for name in names:
            self.rec.outcome(stage, name, "budget", why[:500])
        raise BudgetSpent(why) from None

    def _store_stage(self, position: int, stage: str, copies: list[Target], facts: dict) -> None:
        first = copies[0].info()  # its facts: the agent's --env, once; the others' own figures
        boots = [t.boot_s for t in copies if t.boot_s is not None]
        idle = [t.idle_cpu for t in copies if t.idle_cpu is not None]
        over = [t.mem_overhead for t in copies if t.mem_overhead is not None]
        info = TargetInfo(
            name=stage,
            kind=first.kind,
            accel=first.accel,
            facts={**first.facts, "scale": facts},
            boot_s=max(boots) if boots else None,  # the slowest of the parallel boots
            idle_cpu_pct=sum(idle) if idle else None,  # all N idle together
            mem_overhead_mb=sum(over) / len(over) if over else None,
        )
        self.rec.target(position, info)

    def _measure(self, job: Job, stage: str, copies: list[Target], facts: dict, deadline: float) -> None:
        names = [s.name for s in job.specs]
        if job.workload is None and job.name not in self.iters and not any(n in self.skipped for n in names):
            try:
                self.iters[job.name] = self._calibrate(copies[0], job.specs[0], stage)
            except (TargetError, AgentError) as e:
                self._cut(e, stage, names)
                raise
        stopped = None if any(n in self.skipped for n in names) else self._rounds(job, stage, copies, facts, deadline)
        for name in names:
            how, why = stopped or ("skipped", self.skipped.get(name, ""))
            self.rec.outcome(stage, name, how, why)

    def _rounds(
        self, job: Job, stage: str, copies: list[Target], facts: dict, deadline: float
    ) -> tuple[str, str] | None:
        """Rounds until the aggregate is precise ('precision', ''), or
        --max-rounds or the job's share of the budget is reached ('budget',
        why); None where the copies skipped the benchmark."""
        names = [s.name for s in job.specs]
        aggregates, took = [], []
        for name in names:
            facts["rounds"][name] = []
        for r in range(self.cfg.max_rounds):
            try:
                res = run_round(copies, self._argv_maker(job), job.workload is not None, self._timeout(), memory=r == 0)
            except TargetError as e:
                self._cut(e, stage, names)
                raise
            samples = self._samples(job, stage, copies, r, res)
            if samples is None:  # skipped in the copies
                return None
            self.rounds += 1
            for name in names:
                facts["rounds"][name].append(
                    {
                        "round": r,
                        "host_cpu_pct": res.host_cpu_pct,
                        "seconds": round(res.seconds, 3),
                        **({"host_mem_mib": [round(m, 1) for m in res.host_mem_mib]} if res.host_mem_mib else {}),
                    }
                )
            rates = instance_rates(samples, job.specs[0])
            aggregates.append(sum(rates.values()))
            took.append(res.seconds)
            self._progress(job, len(copies), r, rates, res)
            if r + 1 < self.cfg.min_rounds:
                continue
            if _ci_rel(aggregates) <= self.cfg.precision:
                return "precision", ""
            if time.monotonic() + max(took) + 1.0 > deadline:
                return "budget", "its share of --max-time"
        return "budget", f"--max-rounds {self.cfg.max_rounds}"

    def _argv_maker(self, job: Job) -> Callable[[int, Target], list[str]]:
        c = self.cfg
        if job.workload is not None:
            w, seconds = job.workload, max(1, math.ceil(c.round_time))
            return lambda i, t: w.argv(t.scratch_dir() or "/tmp", seconds, free_port())
        iters = self.iters[job.name]
        return lambda i, t: agent_argv(
            t, job.specs[0], iters=iters, warmup=c.warmup, duration_ms=max(1, round(c.round_time * 1000)), go=True
        )

    def _calibrate(self, target: Target, spec: BenchSpec, stage: str) -> int | None:
        """One copy alone finds the iteration count every process then uses
        (the same work per sample at every N): execute.calibrate, as
        compare's.  Its row is kept only when it calibrated (a failure ends
        the run)."""
        held = self.rec.batch()
        got = calibrate(target, spec, Where(stage, spec.name), held, self.cfg.min_time_ms, self._timeout())
        e = got.result.failure
        if isinstance(e, ChildFailed):
            raise TargetError(f"{target.name}: calibrating {spec.name}: agent {e}") from None
        if isinstance(e, AgentError):
            raise AgentError(f"{target.name}: {spec.name}: {e}") from None
        if e is not None:
            raise e
        if got.result.read.skipped:
            self.skipped[spec.name] = got.result.read.skipped
        held.commit()
        return got.iters

    def _samples(self, job: Job, stage: str, copies: list[Target], r: int, res: RoundResult) -> list[Sample] | None:
        """The round's samples, every copy's, read and recorded by the
        engine (execute); written only when every copy delivered (a copy's
        failure: AgentError naming it, the rows read so far kept); None
        when the copies skipped the benchmark (its reason kept)."""
        held, out = self.rec.batch(), []
        for i, t in enumerate(copies):
            lines = Lines.read_before(res.lines[i], res.started)
            at = Where(stage, job.specs[0].name, r, i, instance=i)
            got = (
                run_tool(t, job, at, held, lines)
                if job.workload is not None
                else run_process(t, job.specs[0], at, held, lines, check=_timed_sample)
            )
            if got.error or got.read.skipped:
                held.commit(samples=False)
                if got.error:
                    raise AgentError(f"instance {i + 1}: {got.error}")
                self.skipped[job.specs[0].name] = got.read.skipped
                return None
            out += got.samples
        held.commit()
        return out

    def _progress(self, job: Job, n: int, r: int, rates: dict[int, float], res: RoundResult) -> None:
        v = list(rates.values())
        cpu = f"{res.host_cpu_pct:.0f}%" if res.host_cpu_pct is not None else "?"
        self.note(
            f"  N={n} {job.name} round {r + 1}: aggregate {sum(v):.4g} {rate_unit(job.specs[0])}, "
            f"Jain {jain(v):.3f}, host CPU {cpu}, {res.seconds:.1f} s"
        )


def _timed_sample(read) -> str:
    """A copy's check: it finished with a timed sample (or skipped the benchmark)."""
    return "" if read.skipped or (read.finished and read.timed) else "the agent stopped without a timed sample"


def _ci_rel(values: list[float]) -> float:
    return summarize(values).ci_rel if len(values) >= 2 else float("inf")


def run_scale(
    text: str,
    make: Callable[[int], Target],
    cfg: ScaleConfig,
    specs: list[BenchSpec],
    store: Store,
    command: str,
    note: Callable[[str], None],
) -> tuple[str, str, str]:
    """Record the run and measure every stage in one session
    (engine.session, as compare's): every copy stopped and vmtax's CPUs
    given back on every exit path.  Returns (run_id, status, failure):
    status complete, failed or interrupted; failure what went wrong ('' when
    nothing did).  What was measured before a failure or a Ctrl-C is kept."""
    cpus = host_cpus()
    config = {
        **asdict(cfg),
        "instances": list(cfg.instances),
        "target": text,
        "benchmarks": [s.name for s in specs],
        "host_cpus": len(cpus),
        "pinning": pinning_text(cfg.pin, max(cfg.instances), cpus),
    }

    def measure(s: Session) -> str:
        scale = ScaleRun(text, make, cfg, specs, s, note)
        s.recorder.benchmarks(specs)
        scale.run()
        return "complete"

    return run_session(
        store,
        "scale",
        command,
        config,
        measure,
        failures=(TargetError, AgentError, StoreError),
        describe=lambda e: f"{e}; every instance was stopped",
    )
