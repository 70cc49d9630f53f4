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

A round runs the benchmark in every copy, held at a barrier (the engine's
Barrier executor, engine/barrier.py: scale starts no process itself): each
agent starts, sets up, takes the shared iteration count (calibrated once,
on one copy alone), prints "ready" and waits on its channel; once all are
ready, each is sent its go line (Held.go) and every copy takes samples for
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
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial

from .engine.barrier import Barrier, RoundResult
from .engine.blocks import Turn
from .engine.budget import BudgetSpent, Deadline
from .engine.execute import Batch, Lines, ProcessResult, Recorder, Where, calibrate, run_process, run_tool
from .engine.jobs import Job, jobs_of
from .engine.protocol import agent_argv
from .engine.session import Session, TargetPool, run_session
from .errors import AgentError, StoreError, TargetError, UserError
from .hostproc import mem_available_mb
from .model import BenchSpec, Sample, TargetInfo
from .peers import free_port
from .proc import ChildFailed
from .scaling import instance_rates, is_throughput, rate_unit
from .stats import jain, summarize
from .store import Store
from .suite import workloads
from .targets.base import Target

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


# -- the run -------------------------------------------------------------------------
def stage_name(target: str, n: int) -> str:
    return f"{target} x{n}"


class Rounds:
    """A scale run's rounds, one by one: each copy's process a held turn
    of the engine's Barrier (its argv, its lines read and recorded into
    the round's batch), the shared count calibrated on one copy alone,
    and each round said as it ends.  The stages: ScaleRun."""

    cfg: ScaleConfig
    rec: Recorder
    deadline: Deadline
    iters: dict[str, int | None]  # each agent row's count (None: skipped)
    skipped: dict[str, str]
    note: Callable[[str], None]

    def _timeout(self) -> float:
        """A round's (or calibration's) timeout, never past budget + grace."""
        return self.deadline.timeout(self.cfg.timeout)

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

    def _turns(self, job: Job, stage: str, copies: list[Target], r: int, got: _Round) -> list[Turn]:
        """The round's turns: each copy's process, held at the barrier
        (engine.barrier), read and recorded by the engine (execute) into
        the round's batch once the round has ended."""
        argv_of = self._argv_maker(job)
        out = []
        for i, t in enumerate(copies):
            at = Where(stage, job.specs[0].name, r, i, instance=i)
            out.append(Turn(i, t, partial(self._copy, job, t, at, got), partial(argv_of, i, t)))
        return out

    @staticmethod
    def _copy(job: Job, t: Target, at: Where, got: _Round, lines: Lines | None) -> None:
        """One copy's process of the round, read and recorded (held in the
        round's batch); none after a copy that failed or skipped."""
        assert lines is not None, "the barrier's lines"
        if got.stop is not None:
            return
        res = (
            run_tool(t, job, at, got.held, lines)
            if job.workload is not None
            else run_process(t, job.specs[0], at, got.held, lines, check=_timed_sample)
        )
        if res.error or res.read.skipped:
            got.stop = res
        else:
            got.samples += res.samples

    def _samples(self, job: Job, got: _Round) -> list[Sample] | None:
        """The round's samples, every copy's, written only when every copy
        delivered (a copy's failure: AgentError naming it, the rows read so
        far kept); None when the copies skipped the benchmark (its reason
        kept)."""
        if got.stop is None:
            got.held.commit()
            return got.samples
        got.held.commit(samples=False)
        if got.stop.error:
            assert got.stop.where.instance is not None, "a copy"
            raise AgentError(f"instance {got.stop.where.instance + 1}: {got.stop.error}")
        self.skipped[job.specs[0].name] = got.stop.read.skipped
        return None

    def _progress(self, job: Job, n: int, r: int, rates: dict[int, float], res: RoundResult) -> None:
        v = list(rates.values())
        cpu = f"{res.host_cpu_pct:.0f}%" if res.host_cpu_pct is not None else "?"
        self.note(
            f"  N={n} {job.name} round {r + 1}: aggregate {sum(v):.4g} {rate_unit(job.specs[0])}, "
            f"Jain {jain(v):.3f}, host CPU {cpu}, {res.seconds:.1f} s"
        )


class ScaleRun(Rounds):
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
                grow(
                    self.pool,
                    self.make,
                    n,
                    pin=self.cfg.pin,
                    cpus=self.cpus,
                    files=files,
                    label=self.text,
                    note=self.note,
                )
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
            got = self._round(job, stage, copies, r)
            if got is None:  # skipped in the copies
                return None
            samples, res = got
            self.rounds += 1
            for name in names:
                facts["rounds"][name].append(_round_facts(r, res))
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

    def _round(self, job: Job, stage: str, copies: list[Target], r: int) -> tuple[list[Sample], RoundResult] | None:
        """One round through the engine's barrier (engine.barrier.Barrier):
        its samples and how it went; None where the copies skipped.  A
        failure at the hard stop is the budget's (_cut)."""
        barrier = Barrier(job.specs[0], job.workload is not None, self._timeout(), memory=r == 0)
        got = _Round(self.rec.batch())
        try:
            barrier.run(self._turns(job, stage, copies, r, got))
        except TargetError as e:
            self._cut(e, stage, [s.name for s in job.specs])
            raise
        assert barrier.round is not None, "a round run"
        samples = self._samples(job, got)
        return None if samples is None else (samples, barrier.round)


@dataclass
class _Round:
    """What a round's copies gave, held until every one has delivered."""

    held: Batch
    samples: list[Sample] = field(default_factory=list)
    stop: ProcessResult | None = None  # the copy that failed or skipped (the later ones are not read)


def _round_facts(r: int, res: RoundResult) -> dict:
    """What a stage's facts keep of a round: the host's CPU and memory, its time."""
    mem = {"host_mem_mib": [round(m, 1) for m in res.host_mem_mib]} if res.host_mem_mib else {}
    return {"round": r, "host_cpu_pct": res.host_cpu_pct, "seconds": round(res.seconds, 3), **mem}


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
