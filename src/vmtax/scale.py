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
from dataclasses import asdict, dataclass, replace
from typing import Callable

from .agent import agent_hash, parse_line
from .core import (BudgetSpent, Job, agent_argv, calibrate, free_port, grace_s, jobs_of, read_agent, recorded,
                   tool_samples)
from .errors import AgentError, StoreError, TargetError, UserError
from .hostproc import host_cpu_times, mem_available_mb, pss_mb
from .model import BenchSpec, Sample, TargetInfo
from .proc import ChildFailed
from .scaling import instance_rates, is_throughput, rate_unit
from .stats import jain, summarize
from .store import Store
from .suite import workloads
from .targets.base import GATE, Target

RESERVE_MB = 256.0  # of MemAvailable kept for the host and vmtax itself


@dataclass(frozen=True)
class ScaleConfig:
    instances: tuple[int, ...]       # the instance counts, ascending
    round_time: float = 2.0          # seconds of timed samples per round (a tool: rounded up)
    min_rounds: int = 3              # rounds per stage and benchmark, at least
    max_rounds: int = 10             # and at most
    precision: float = 0.05          # stop when the aggregate's CI half-width is within this
    max_time: float = 600.0          # seconds for the whole run (min_rounds always run)
    min_time_ms: int = 10            # calibration goal of one sample, on one copy alone
    warmup: int = 1                  # samples each agent discards after the start
    pin: str = "none"                # none | spread (round-robin over the host CPUs)
    timeout: float = 300.0           # one round, from launch to the last line


def host_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def pinning_text(pin: str, n: int, cpus: list[int]) -> str:
    """What the output says about where the instances ran."""
    if pin == "none":
        return f"unpinned: the host's scheduler places every instance on its {len(cpus)} CPUs"
    counts = [sum(1 for i in range(n) if i % len(cpus) == k) for k in range(len(cpus))]
    share = ", ".join(f"CPU {c}: {k}" for c, k in zip(cpus, counts) if k)
    return (f"pinned round-robin: instance i on host CPU i mod {len(cpus)} (a guest's vCPU "
            f"threads; its emulator threads on the other CPUs; at N={n}: {share})")


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
        raise UserError(f"--instances {n}: {n} x {proto.name} need about {n * each / 1024:.1f} GiB "
                        f"({each:.0f} MiB each: its memory and its host processes'), but the host has "
                        f"{available / 1024:.1f} GiB available (MemAvailable, less {RESERVE_MB:.0f} MiB kept): "
                        f"{fits} fit; ask for fewer instances, or give the guest less mem=")


def check_jobs(specs: list[BenchSpec]) -> list[Job]:
    """The jobs a scale run can measure; UserError for one it cannot."""
    jobs = jobs_of(specs)
    for job in jobs:
        w = job.workload
        if w is not None and (w.peer or w.needs_disk):
            raise UserError(f"vmtax scale runs {w.name} in no copy: it needs "
                            f"{'a peer on the host' if w.peer else 'a disk'}; give a workload that runs alone")
        if w is not None and w.missing():
            raise UserError(f"{w.name} cannot run here: {w.missing()}")
        for spec in job.specs:
            if not is_throughput(spec):
                raise UserError(f"{spec.name} reports a {spec.unit} where lower is better, not a rate: "
                                f"vmtax scale sums throughputs (an agent row, or a workload's rate)")
    return jobs


# -- the pool of copies ------------------------------------------------------------
class Pool:
    """The copies of one target, grown stage by stage; close() stops them all."""

    def __init__(self, label: str, make: Callable[[int], Target], files: tuple, pin: str, cpus: list[int],
                 note: Callable[[str], None]):
        self.label, self.make, self.files, self.pin, self.cpus, self.note = label, make, files, pin, cpus, note
        self.targets: list[Target] = []

    def grow(self, n: int) -> None:
        """Start copies until there are n, in parallel (the very first
        alone where its start settles something the others reuse)."""
        start = len(self.targets)
        if n <= start:
            return
        fresh = []
        for i in range(start, n):
            t = self.make(i)
            t.pin(self.cpus[i % len(self.cpus)] if self.pin == "spread" else None)
            t.provide(self.files)
            fresh.append(t)
        self.targets += fresh  # before any starts: close() stops whatever did
        t0 = time.monotonic()
        alone = start == 0 and fresh[0].settles_at_start()
        if alone:
            self._start_one(0, fresh.pop(0))
        parallel = [t for t in fresh if "parallel_start" in t.capabilities]
        for t in fresh:
            if "parallel_start" not in t.capabilities:
                self._start_one(self.targets.index(t), t)
        for t in parallel:
            try:
                t.begin_start()
            except TargetError as e:
                raise TargetError(f"instance {self.targets.index(t) + 1} of {n} did not start: {e}") from None
        done: "queue.Queue[tuple[int, BaseException | None]]" = queue.Queue()

        def finish(i: int, t: Target) -> None:
            error = None
            try:
                t.end_start()
            except BaseException as e:  # told to this thread
                error = e
            done.put((i, error))
        for t in parallel:
            threading.Thread(target=finish, args=(self.targets.index(t), t), daemon=True).start()
        for _ in parallel:  # the first failure ends the wait: close() stops the others mid-boot
            i, error = _get(done)
            if error is not None:
                raise TargetError(f"instance {i + 1} of {n} ({self.targets[i].name}) did not boot: {error}")
        how = f"{len(parallel)} in parallel" + (", after the first alone" if alone else "")
        self.note(f"{n - start} instance(s) of {self.label} started in {time.monotonic() - t0:.1f} s"
                  + (f" ({how})" if len(parallel) > 1 else ""))

    def _start_one(self, i: int, t: Target) -> None:
        try:
            t.start()
        except TargetError as e:
            raise TargetError(f"instance {i + 1} ({t.name}) did not start: {e}") from None

    def close(self) -> None:
        """Stop every copy, in parallel (a container's removal takes a
        while); a second Ctrl-C does not cut it short."""
        threads = [threading.Thread(target=_stop_quietly, args=(t,), daemon=True) for t in self.targets]
        for th in threads:
            th.start()
        for th in threads:
            while th.is_alive():
                try:
                    th.join(0.5)
                except KeyboardInterrupt:
                    continue
        self.targets = []


def _get(q: queue.Queue):
    """The next item, waiting in short steps (a Ctrl-C is taken at once)."""
    while True:
        try:
            return q.get(timeout=0.5)
        except queue.Empty:
            continue


def _stop_quietly(t: Target) -> None:
    try:
        t.stop()
    except Exception:  # noqa: BLE001 - the others must still be stopped
        pass


# -- one round ---------------------------------------------------------------------
@dataclass
class RoundResult:
    lines: list[list[tuple[float, str]]]  # per instance: (arrival time, line) after its ready line
    reached: list[bool]                   # whether each got to the barrier (else: skipped, say)
    host_cpu_pct: float | None
    seconds: float                        # from the go to the last instance's end
    host_mem_mib: list[float]
    started: float                        # wall-clock time of the go


def run_round(targets: list[Target], argv_of: Callable[[int, Target], list[str]], tool: bool,
              timeout: float, memory: bool = True) -> RoundResult:
    """Every target runs its argv held at the barrier; once all are ready,
    all are released at once.  TargetError naming the instance at the
    first failure of any (the caller stops them all).  memory: read each
    target's host memory just after the start."""
    n = len(targets)
    lines: list[list[tuple[float, str]]] = [[] for _ in range(n)]
    reached = [False] * n
    events: "queue.Queue[tuple[str, int, BaseException | None]]" = queue.Queue()

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
    if isinstance(error, ChildFailed):
        error = f"its agent {error}"
    raise TargetError(f"instance {i + 1} of {len(targets)} ({targets[i].name}) failed: {error}")


# -- the run -------------------------------------------------------------------------
def stage_name(target: str, n: int) -> str:
    return f"{target} x{n}"


class ScaleRun:
    def __init__(self, text: str, make: Callable[[int], Target], cfg: ScaleConfig, specs: list[BenchSpec],
                 store: Store, run_id: str, note: Callable[[str], None]):
        self.text, self.make, self.cfg, self.specs = text, make, cfg, specs
        self.jobs = jobs_of(specs)  # checked by check_jobs before the run was recorded
        self.store, self.run_id, self.note = store, run_id, note
        self.cpus = host_cpus()
        self.iters: dict[str, int] = {}
        self.skipped: dict[str, str] = {}
        self._process = 0
        self.rounds = 0  # rounds measured and stored, every stage's
        self.t0 = time.monotonic()
        self.hard_end = self.t0 + cfg.max_time + grace_s(cfg.max_time)  # see core.grace_s

    def run(self) -> None:
        pool = Pool(self.text, self.make, workloads.provision(self.specs), self.cfg.pin, self.cpus, self.note)
        try:
            items = len(self.cfg.instances) * len(self.jobs)
            for position, n in enumerate(self.cfg.instances):
                pool.grow(n)
                stage = stage_name(self.text, n)
                copies = pool.targets[:n]
                facts = {"n": n, "vcpus": sum(t.vcpus() for t in copies), "host_cpus": len(self.cpus),
                         "pinning": pinning_text(self.cfg.pin, n, self.cpus),
                         "instances": [t.name for t in copies], "rounds": {}}
                self._store_stage(position, stage, copies, facts)
                for job in self.jobs:
                    left = max(0.0, self.cfg.max_time - (time.monotonic() - self.t0))
                    share = left / items
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
        finally:
            pool.close()

    def _timeout(self) -> float:
        """A round's (or calibration's) timeout, never past budget + grace."""
        return max(0.1, min(self.cfg.timeout, self.hard_end - time.monotonic()))

    def _cut(self, e: Exception, stage: str, names: list[str]) -> None:
        """A failure at the hard stop is the budget's, not the target's:
        the rows end 'budget' and the run stops (BudgetSpent)."""
        if time.monotonic() < self.hard_end - 0.05:
            return
        why = f"stopped at --max-time plus its grace ({grace_s(self.cfg.max_time):.0f} s): {e}"
        for name in names:
            self.store.set_outcome(self.run_id, stage, name, "budget", why[:500])
        raise BudgetSpent(why) from None

    def _store_stage(self, position: int, stage: str, copies: list[Target], facts: dict) -> None:
        first = copies[0].info()  # its facts: the agent's --env, once; the others' own figures
        boots = [t.boot_s for t in copies if t.boot_s is not None]
        idle = [t.idle_cpu for t in copies if t.idle_cpu is not None]
        over = [t.mem_overhead for t in copies if t.mem_overhead is not None]
        info = TargetInfo(name=stage, kind=first.kind, accel=first.accel, facts={**first.facts, "scale": facts},
                          boot_s=max(boots) if boots else None,            # the slowest of the parallel boots
                          idle_cpu_pct=sum(idle) if idle else None,          # all N idle together
                          mem_overhead_mb=sum(over) / len(over) if over else None)
        self.store.add_target(self.run_id, position, info, agent_hash())

    def _measure(self, job: Job, stage: str, copies: list[Target], facts: dict, deadline: float) -> None:
        names = [s.name for s in job.specs]
        if any(name in self.skipped for name in names):
            for name in names:
                self.store.set_outcome(self.run_id, stage, name, "skipped", self.skipped.get(name, ""))
            return
        tool = job.workload is not None
        if not tool and job.name not in self.iters:
            try:
                self.iters[job.name] = self._calibrate(copies[0], job.specs[0], stage)
            except (TargetError, AgentError) as e:
                self._cut(e, stage, names)
                raise
            if job.name in self.skipped:
                self.store.set_outcome(self.run_id, stage, job.name, "skipped", self.skipped[job.name])
                return
        aggregates, took, how, why = [], [], "budget", f"--max-rounds {self.cfg.max_rounds}"
        for name in names:
            facts["rounds"][name] = []
        for r in range(self.cfg.max_rounds):
            try:
                res = run_round(copies, self._argv_maker(job), tool, self._timeout(), memory=r == 0)
            except TargetError as e:
                self._cut(e, stage, names)
                raise
            samples = self._samples(job, stage, copies, r, res)
            if samples is None:  # skipped in the copies
                for name in names:
                    self.store.set_outcome(self.run_id, stage, name, "skipped", self.skipped.get(name, ""))
                return
            for s in samples:
                self.store.add_sample(self.run_id, s)
            self.rounds += 1
            for name in names:
                facts["rounds"][name].append({"round": r, "host_cpu_pct": res.host_cpu_pct,
                                              "seconds": round(res.seconds, 3),
                                              **({"host_mem_mib": [round(m, 1) for m in res.host_mem_mib]}
                                                 if res.host_mem_mib else {})})
            rates = instance_rates(samples, job.specs[0])
            aggregates.append(sum(rates.values()))
            took.append(res.seconds)
            self._progress(job, len(copies), r, rates, res)
            if r + 1 < self.cfg.min_rounds:
                continue
            if _ci_rel(aggregates) <= self.cfg.precision:
                how = "precision"
                break
            if time.monotonic() + max(took) + 1.0 > deadline:
                why = "its share of --max-time"
                break
        for name in names:
            self.store.set_outcome(self.run_id, stage, name, how, why if how == "budget" else "")

    def _argv_maker(self, job: Job) -> Callable[[int, Target], list[str]]:
        c = self.cfg
        if job.workload is not None:
            w, seconds = job.workload, max(1, math.ceil(c.round_time))
            return lambda i, t: w.argv(t.scratch_dir() or "/tmp", seconds, free_port())
        iters = self.iters[job.name]
        return lambda i, t: agent_argv(t, job.specs[0], iters=iters, warmup=c.warmup,
                                       duration_ms=max(1, round(c.round_time * 1000)), go=True)

    def _calibrate(self, target: Target, spec: BenchSpec, stage: str) -> int | None:
        """One copy alone finds the iteration count every process then uses
        (the same work per sample at every N): core.calibrate, as compare's."""
        started = time.time()
        try:
            got = calibrate(target, spec, self.cfg.min_time_ms, self._timeout())
        except ChildFailed as e:
            raise TargetError(f"{target.name}: calibrating {spec.name}: agent {e}") from None
        except AgentError as e:
            raise AgentError(f"{target.name}: {spec.name}: {e}") from None
        if got.skipped:
            self.skipped[spec.name] = got.skipped
        self.store.add_process(self.run_id, self._next_process(), stage, spec.name, -1, 0, started, None,
                               time.time(), "skipped" if got.skipped else "calibration")
        return got.iters

    def _next_process(self) -> int:
        self._process += 1
        return self._process - 1

    def _samples(self, job: Job, stage: str, copies: list[Target], r: int, res: RoundResult) -> list[Sample] | None:
        """The round's samples, every copy's, checked; None when the copies
        skipped the benchmark (its reason kept)."""
        out = []
        for i, t in enumerate(copies):
            process = self._next_process()
            got = (self._tool_samples(job, stage, i, t, process, r, res.lines[i]) if job.workload
                   else self._agent_samples(job.specs[0], stage, i, t, process, r, res.lines[i]))
            if got is None:
                return None
            self.store.add_process(self.run_id, process, stage, job.specs[0].name, r, i, res.started,
                                   res.lines[i][0][0] if res.lines[i] else None,
                                   res.lines[i][-1][0] if res.lines[i] else time.time(), "ok")
            out += got
        return out

    def _agent_samples(self, spec: BenchSpec, stage: str, i: int, copy: Target, process: int, r: int,
                       lines: list[tuple[float, str]]) -> list[Sample] | None:
        out = []
        arrived = iter(t for t, line in lines if line.strip())
        try:
            got = read_agent(copy, (line for _, line in lines), spec,
                             lambda f, t: out.append(Sample(benchmark=spec.name, target=stage, process=process,
                                                            block=r, t=t, **{**f, "instance": i})),
                             when=lambda: next(arrived))
        except AgentError as e:
            raise AgentError(f"instance {i + 1}: {e}") from None
        if got.skipped:
            self.skipped[spec.name] = got.skipped
            return None
        if not got.finished or not got.timed:
            raise AgentError(f"instance {i + 1}: the agent stopped without a timed sample")
        return out

    def _tool_samples(self, job: Job, stage: str, i: int, t: Target, process: int, r: int,
                      lines: list[tuple[float, str]]) -> list[Sample]:
        w = job.workload
        try:
            return tool_samples(job, w.parse("\n".join(line for _, line in lines)), stage, process, r,
                                lines[-1][0] if lines else time.time(), t.host_cpu, instance=i)
        except workloads.ParseError as e:
            raise AgentError(f"instance {i + 1}: {w.name}: {e}") from None
        except AgentError as e:
            raise AgentError(f"instance {i + 1}: {e}") from None

    def _progress(self, job: Job, n: int, r: int, rates: dict[int, float], res: RoundResult) -> None:
        v = list(rates.values())
        cpu = f"{res.host_cpu_pct:.0f}%" if res.host_cpu_pct is not None else "?"
        self.note(f"  N={n} {job.name} round {r + 1}: aggregate {sum(v):.4g} {rate_unit(job.specs[0])}, "
                  f"Jain {jain(v):.3f}, host CPU {cpu}, {res.seconds:.1f} s")


def _ci_rel(values: list[float]) -> float:
    return summarize(values).ci_rel if len(values) >= 2 else float("inf")


def run_scale(text: str, make: Callable[[int], Target], cfg: ScaleConfig, specs: list[BenchSpec],
              store: Store, command: str, note: Callable[[str], None]) -> tuple[str, str, str]:
    """Record the run (core.recorded, as compare's), measure every stage,
    stop every copy on every exit path.  Returns (run_id, status, failure):
    status complete, failed or interrupted; failure what went wrong ('' when
    nothing did).  What was measured before a failure or a Ctrl-C is kept."""
    cpus = host_cpus()
    config = {**asdict(replace(cfg, instances=list(cfg.instances))), "target": text,
              "benchmarks": [s.name for s in specs], "host_cpus": len(cpus),
              "pinning": pinning_text(cfg.pin, max(cfg.instances), cpus)}

    def measure(run_id: str) -> str:
        scale = ScaleRun(text, make, cfg, specs, store, run_id, note)
        store.add_benchmarks(run_id, specs)
        scale.run()
        return "complete"
    return recorded(store, "scale", command, config, measure, failures=(TargetError, AgentError, StoreError),
                    describe=lambda e: f"{e}; every instance was stopped")
