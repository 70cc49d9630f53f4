"""The runner: repeat each benchmark in fresh agent processes until it is
known to the precision asked, or its share of the time budget is spent.

For each benchmark, targets are measured in blocks: one agent process per
target per block, in an order drawn at random for every block (the seed is
recorded with the run).  Host drift then hits every target alike, and which
of two targets ran first in a block is a fair coin -- what the sign-flip
test in stats.py rests on.  Every sample carries its block, so pairing never
depends on the order samples arrived in.  Before the first block, one
process on each target calibrates an iteration count, and every timed
process on every target then uses the baseline's (as pyperf reuses one
within a target): the same work per sample everywhere, since what one
operation costs can depend on how many run back to back (a page-fault
batch's region, say).  Every process
discards its warmup samples.  Each sample is stored as it
arrives.

A workload (suite/workloads.py) is scheduled the same way: one run of its
tool is its "process", the first run on each target is a warmup, and one
run gives a sample of each of its figures (`<workload>.<metric>` rows, a
"job" of several specs measured together; stopping waits for the widest).
"""
from __future__ import annotations

import itertools
import math
import queue
import random
import resource
import statistics
import threading
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Callable, Protocol

from . import analysis, lockstep, plan, stats
from .agent import agent_hash
from .core import (AgentRead, BudgetSpent, Job, agent_argv, calibrate, free_port, grace_s,
                   jobs_of, read_agent, recorded, tool_samples)
from .errors import AgentError, StoreError, TargetError
from .hostproc import TICK
from .hostprobe import switches, syscall_tracepoint, ticks
from .metrics import WORK
from .model import BenchSpec, Sample, Stratum, TargetInfo
from .peers import start_peer
from .plan import RunConfig
from .proc import ChildFailed, controller_cpus, keep_off, kill_group
from .report.units import fmt_duration
from .store import Store
from .suite import workloads
from .suite.workloads import ParseError
from .targets.base import Target


@dataclass
class TargetState:
    """One target's row as the run goes: its timed samples (the live
    judgement of precision reads them with analysis.block_means, as `show`
    reads the stored ones) and how far it has got."""
    samples_taken: list[Sample] = field(default_factory=list)  # timed, in arrival order
    processes: int = 0
    iters: int | None = None
    done: str | None = None          # "skipped" or "error" once finished early; "precision": a candidate
    #                                  whose ratio is precise while others go on (Runner._stop_precise)
    reason: str = ""
    warmed: bool = False             # a workload's warmup run is done on this target
    own_iters: int | None = None     # this target's own calibration: its counted batches use it
    samples: int | None = None       # timed samples per process at the shared count (None: --samples)
    warmup: int | None = None        # and warmup samples (None: --warmup)
    higher_is_better: bool = False   # the row's direction (which of two modes is the fast one)
    _modes: tuple | None = None      # (block count, its stats.modes): modes() fits once per block
    _fits: dict = field(default_factory=dict)  # per block count: the report's strata and half-width

    def take(self, s: Sample) -> None:
        if not s.warmup and not s.counting:
            self.samples_taken.append(s)

    @property
    def values(self) -> list[float]:
        return [s.value for s in self.samples_taken]

    def block_means(self) -> dict[int, float]:
        """Block -> the mean of the process measured in it (analysis.block_means:
        one timed process per target and block, as the runner runs them)."""
        return next(iter(analysis.block_means(self.samples_taken).values()), {})

    def summary(self):
        return stats.summarize(self.values, groups=[s.process for s in self.samples_taken])

    def modes(self, means: dict[int, float]):
        """Two modes among its block means so far (`means`, as block_means
        gave them; stats.modes, as the report fits them), fitted again only
        when a block has been added."""
        if self._modes is None or self._modes[0] != len(means):
            self._modes = (len(means), stats.modes(list(means.values()), higher_is_better=self.higher_is_better))
        return self._modes[1]

    def stratum(self, which: str, base: dict[int, float], mine: dict[int, float],
                base_modes, my_modes) -> Stratum | None:
        """The report's stratum against the baseline (which: stats.SAME,
        analysis.same_mode; stats.FAST, analysis.fast_mode), fitted once per
        block count and asked only once the stop's estimate looks precise
        enough."""
        key = (which, len(mine), len(base))
        if key not in self._fits:
            fit = analysis.same_mode if which == stats.SAME else analysis.fast_mode
            self._fits[key] = fit(base, mine, base_modes, my_modes)
        return self._fits[key]

    def stratum_holds(self, which: str, base: dict[int, float], mine: dict[int, float],
                      base_modes, my_modes) -> bool:
        """Whether the report will have this stratum's ratio against the
        baseline (analysis.mode_test: the pooled modes each side's own, at a
        ratio it finds): what a stop on the stratum must ask before it stops
        the row, or the row would stop on a ratio the report then leaves
        out."""
        got = self.stratum(which, base, mine, base_modes, my_modes)
        return got is not None and math.isfinite(got.ratio)

    def reported(self, base: dict[int, float], mine: dict[int, float], base_modes, my_modes,
                 which: str | None) -> float:
        """The half-width the report will give this candidate's ratio
        (analysis.reported_halfwidth over its `which` stratum, None: no mode
        flag), once per block count: what the stop asks before it ends a
        row its estimate calls precise."""
        key = ("reported", which, len(mine), len(base))
        if key not in self._fits:
            headline = self.stratum(which, base, mine, base_modes, my_modes) if which else None
            self._fits[key] = analysis.reported_halfwidth(base, mine, headline)
        return self._fits[key]


class Progress(Protocol):
    def update(self, index: int, total: int, spec: BenchSpec, states: dict[str, TargetState],
               precision_now: float, elapsed: float, eta: float) -> None: ...
    def finished(self, index: int, total: int, spec: BenchSpec, outcome: dict[str, str]) -> None: ...
    def close(self) -> None: ...
    def note(self, text: str) -> None: ...  # one line of its own (a host not reached)


class StoreRelay:
    """The store, called from the thread that made it whatever thread
    calls: the threads that measure other machines at the same time
    (Runner._in_turn) hand their writes to it, each sample still stored as
    it arrives, and a store that keeps to one thread (SQLite) works."""

    def __init__(self, store: Store):
        self._store, self._home = store, threading.get_ident()
        self._calls: "queue.Queue[tuple]" = queue.Queue()
        self._open = False

    def __getattr__(self, name: str):
        method = getattr(self._store, name)
        if not callable(method):
            return method

        def call(*args, **kw):
            if threading.get_ident() == self._home:
                return method(*args, **kw)
            if not self._open:
                raise StoreError("the run ended: nothing more is stored")
            done, box = threading.Event(), {}
            self._calls.put((method, args, kw, done, box))
            while not done.wait(0.5):
                if not self._open:
                    raise StoreError("the run ended: nothing more is stored")
            if "error" in box:
                raise box["error"]
            return box.get("value")
        return call

    def serve(self, lanes: list[Callable[[], object]]) -> None:
        """Run each lane in a thread of its own, doing their store calls
        here until all have ended; the first error of one is raised here
        once all have ended (a Ctrl-C at once: the lanes' calls fail)."""
        errors: list[BaseException] = []

        def run(lane):
            try:
                lane()
            except BaseException as e:  # handed to the serving thread
                errors.append(e)
        threads = [threading.Thread(target=run, args=(lane,), daemon=True) for lane in lanes]
        self._open = True
        try:
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads) or not self._calls.empty():
                try:
                    method, args, kw, done, box = self._calls.get(timeout=0.05)
                except queue.Empty:
                    continue
                try:
                    box["value"] = method(*args, **kw)
                except Exception as e:
                    box["error"] = e
                done.set()
        finally:
            self._open = False
        if errors:
            raise errors[0]


LOCKSTEP_GO = "lockstep_go_ms"  # a target's fact: a go's round trip in lockstep, beyond the sample (ms)


class Runner:
    def __init__(self, cfg: RunConfig, specs: list[BenchSpec], targets: list[Target],
                 store: Store, run_id: str, progress: Progress | None = None,
                 clock: Callable[[], float] = time.monotonic, spent_before: float = 0.0):
        self.cfg, self.specs, self.targets = cfg, specs, targets
        self.spent_before = spent_before  # seconds of the budget gone before the runner began (starting targets)
        self.jobs = jobs_of(specs)
        self.store, self.run_id, self.progress, self.clock = StoreRelay(store), run_id, progress, clock
        self.order = random.Random(cfg.seed)
        self._processes = itertools.count()  # drawn from by each machine's thread
        self._blocks: dict[str, int] = {}
        self._recorded: set[tuple[str, str]] = set()
        self._spent: dict[str, float] = {}
        self._block_s: dict[str, list[float]] = {}  # each job's blocks: their timed processes
        self._count_s: dict[str, float] = {}  # and its last counting processes
        self._step_latency: dict[str, list[float]] = {}  # lockstep: each target's go-to-sample overheads, s
        self._steps: dict[str, plan.StepSizes] = {}
        self._per_iter: dict[str, dict[str, float | None]] = {}  # each agent row's ns an iteration, per target  # each agent row's lockstep sizes (after calibration)
        self._warm_s: dict[str, float] = {}   # a workload's warmup runs (first block only), all told:
        # summed without a lock, as a workload's targets run one at a time (_in_turn, together=False)
        self._began: dict[str, tuple[float, float]] = {}  # a row begun: (when, its two_blocks floor)
        self._took: dict[str, list[float]] = {}  # per plan.floor_kind: [seconds its rows' two blocks took, floors]
        self._left_out: list[tuple[str, float]] = []  # rows the budget could not finish: (name, seconds needed)

    # -- the main loop ------------------------------------------------------------
    COUNT_EVERY = 4   # a counting process per target every this many blocks (metrics.py)

    def run(self) -> str:
        """Measure every benchmark; returns 'complete' or 'interrupted'.

        Pass 1 gives each benchmark an equal share of 60% of the budget
        (time a benchmark does not use flows to the next).  Pass 2 takes the
        benchmarks that have not reached the precision yet: first it brings
        any with fewer than --min-processes processes up to that (a row with
        a handful of slow processes has no interval at all), then it funds
        them cheapest to finish first, so the budget buys as many rows at
        the precision asked as it can.  No pass begins a block that would
        end past its share (_past); only a row's first two blocks always
        run, and a row is begun only where they are expected to end within
        the budget (_fits_two): the rows the budget cannot finish are left
        out, in the order given, each with the budget that would add it.
        The time spent before the runner began (spent_before: starting the
        targets) is the budget's too."""
        try:
            return self._run()
        finally:
            for target in self.targets:
                took = self._step_latency.get(target.name)
                if took:  # the median time a go took to its sample line, beyond the sample itself
                    target.facts()[LOCKSTEP_GO] = round(statistics.median(took) * 1e3, 3)

    def _run(self) -> str:
        t0 = self.clock() - self.spent_before
        self._t0, self._durations = t0, []
        # the hard stop, on this clock (what is begun) and on the real one (process timeouts)
        self._hard_end = t0 + self.cfg.max_time + grace_s(self.cfg.max_time)
        self._hard_end_real = time.monotonic() - self.spent_before + self.cfg.max_time + grace_s(self.cfg.max_time)
        by_spec = {spec.name: {t.name: TargetState(higher_is_better=spec.direction == "higher")
                               for t in self.targets} for spec in self.specs}
        states = [[by_spec[s.name] for s in job.specs] for job in self.jobs]
        for job, sts in zip(self.jobs, states):
            why = job.workload.missing() if job.workload else ""
            for st in (st for per in sts for st in per.values()) if why else ():
                st.done, st.reason = "skipped", why
        pending: list[int] = []
        current: Job | None = None
        try:
            for index, job in enumerate(self.jobs):
                current = job
                left = len(self.jobs) - index
                pass1_left = self.cfg.max_time * plan.FIRST_PASS - (self.clock() - t0)
                share = max(0.0, pass1_left / left)
                outcome = self._timed(index, job, states[index], share)
                if outcome is None:
                    pending.append(index)
            for k, index in enumerate(pending):  # first, every row gets an interval at all
                job = current = self.jobs[index]
                left = max(0.0, self.cfg.max_time * plan.CATCH_UP - (self.clock() - t0))
                self._measure(index, job, states[index], self.clock() + left / (len(pending) - k),
                              until_enough=True)
            need = {i: self._time_to_goal(self.jobs[i], states[i]) for i in pending}
            pending.sort(key=need.get)
            for k, index in enumerate(pending):
                job = current = self.jobs[index]
                left = max(0.0, self.cfg.max_time - (self.clock() - t0))
                self._timed(index, job, states[index], plan.pass2_share(
                    need[index], left, len(pending) - k, self._next_block_s(job)), final=True)
        except KeyboardInterrupt:
            self._close(([current] if current else []) + [self.jobs[i] for i in pending], by_spec, "interrupted")
            return "interrupted"
        except BudgetSpent:
            later = self.jobs[self.jobs.index(current) + 1:] if current else []
            self._close(([current] if current else []) + [self.jobs[i] for i in pending] + later, by_spec,
                        "budget", f"stopped at the budget plus its grace ({grace_s(self.cfg.max_time):.0f} s)")
        if self._left_out and self.progress:
            add = plan.budget_to_add(self.cfg.max_time, sum(need for _, need in self._left_out), 0.0)
            self.progress.note(f"vmtax: left out by the budget (each row's reason says why): "
                               f"{', '.join(name for name, _ in self._left_out)}; --max-time {fmt_duration(add)} "
                               f"or more would add them")
        return "complete"

    def _close(self, jobs: list[Job], by_spec: dict[str, dict[str, TargetState]], how: str,
               reason: str = "") -> None:
        """Every row of these jobs not recorded yet ends `how` (a target
        that failed or was skipped keeps its own outcome)."""
        for name in dict.fromkeys(s.name for job in jobs for s in job.specs):
            for target, st in by_spec[name].items():
                if (target, name) not in self._recorded:
                    self.store.set_outcome(self.run_id, target, name, st.done or how,
                                           st.reason if st.done else reason)
                    self._recorded.add((target, name))

    def _time_to_goal(self, job: Job, sts: list[dict[str, TargetState]]) -> float:
        """Seconds more this benchmark would need to reach the precision (plan.time_to_goal)."""
        return plan.time_to_goal(self._spent.get(job.name, 0.0), self._worst(sts), self.cfg.precision)

    def _worst(self, sts: list[dict[str, TargetState]]) -> float:
        """The widest interval over a job's figures: what decides its stop."""
        return max(self.worst_precision(states) for states in sts)

    def _timed(self, index: int, job: Job, sts: list[dict[str, TargetState]], share: float,
               final: bool = False) -> dict | None:
        """Measure until precision (recorded, returned) or budget (None)."""
        started = self.clock()
        how = self._measure(index, job, sts, started + share)
        spent = self.clock() - started
        self._durations.append(spent)
        self._spent[job.name] = self._spent.get(job.name, 0.0) + spent
        states = sts[0]  # a job's figures share their processes, skips and errors
        if how == "budget" and not final and any(st.done is None for st in states.values()):
            if self.progress:
                per = [self.precision_by_target(s) for s in sts]  # sts[0] is states
                widest = {n: max(w.get(n, 0.0) for w in per) for n in per[0]}
                self.progress.finished(index, len(self.jobs), job, {
                    n: "precision" if st.done == "precision" else  # a candidate already there
                    f"±{widest[n] * 100:.1f}% so far, more in pass 2" if math.isfinite(widest[n]) else "more in pass 2"
                    for n, st in states.items() if st.done == "precision" or n in widest})
            return None
        outcome = self._outcome(states, how)
        self._record(index, job, outcome)
        return outcome

    def _record(self, index: int, job: Job, outcome: dict[str, tuple[str, str]]) -> None:
        for spec in job.specs:
            for name, (how, reason) in outcome.items():
                self.store.set_outcome(self.run_id, name, spec.name, how, reason)
                self._recorded.add((name, spec.name))
        if self.progress:
            self.progress.finished(index, len(self.jobs), job, {k: v[0] for k, v in outcome.items()})

    def _measure(self, index: int, job: Job, sts: list[dict[str, TargetState]],
                 deadline: float, until_enough: bool = False) -> str:
        """Block after block, each in a random order; 'precision' or 'budget'
        (until_enough: or 'budget' as soon as every target has the minimum
        number of processes; with it, nothing is run once they have)."""
        states = sts[0]
        if until_enough and self._enough(states):
            return "budget"
        if not self._block_s.get(job.name) and not self._fits_two(job, states):
            return "budget"
        while job.workload is None and any(st.iters is None and st.done is None for st in states.values()):
            self._calibrate(job.specs[0], states)
        while True:
            if self._past(job, deadline):  # a row's first block always runs; no other ends past the deadline
                return "budget"
            block = self._blocks.get(job.name, 0)
            self._blocks[job.name] = block + 1
            began, warm = self.clock(), self._warm_s.get(job.name, 0.0)
            order = list(self.targets)
            self.order.shuffle(order)
            def timed_process(slot: int, target: Target) -> None:
                if states[target.name].done is None:
                    self._one_process(target, job, [s[target.name] for s in sts], block, slot)

            def counting_process(slot: int, target: Target) -> None:
                if states[target.name].done is None and target.counters == "on":
                    self._one_process(target, job, [states[target.name]], block, len(order) + slot,
                                      counting=True)
            stepped = self._stepped(job, order, states)
            if stepped:
                self._lockstep_block(job, states, block, stepped)
            self._in_turn([t for t in order if t not in stepped], timed_process, together=job.workload is None)
            timed = self.clock()
            if self._counts(job, block):
                self._in_turn(order, counting_process)
                self._count_s[job.name] = self.clock() - timed
            took = self._block_s.setdefault(job.name, [])
            took.append(timed - began - (self._warm_s.get(job.name, 0.0) - warm))  # what the next one takes
            if len(took) == 2 and job.name in self._began:  # what its two blocks took against their floor
                since, floor = self._began.pop(job.name)
                kind = self._took.setdefault(plan.floor_kind(job), [0.0, 0.0])
                kind[0] += self.clock() - since
                kind[1] += floor
            worst = self._stop_precise(sts)
            active = [t.name for t in self.targets if states[t.name].done is None]
            if self.progress:
                elapsed = self.clock() - self._t0
                self.progress.update(index, len(self.jobs), job, states, worst, elapsed,
                                     self._eta(index, deadline, elapsed))
            if not active:
                return "budget"  # every target skipped or failed: _outcome says which
            if self._enough(states) and worst <= self.cfg.precision:
                return "precision"
            if (self.clock() >= deadline and len(took) >= 2) or (until_enough and self._enough(states)):
                return "budget"  # a row begun gets two blocks, the fewest with a ratio (_past)

    def _stop_precise(self, sts: list[dict[str, TargetState]]) -> float:
        """The widest interval over the job's figures that still decides
        (_worst), once the candidates already precise have stopped.

        With more than one candidate, each stops at the first block its
        own ratio to the baseline is as precise as asked on every figure of
        the job (precision_by_target), both sides with --min-processes
        processes; the baseline goes on for the others.  A candidate's stop
        then rests on its own pairs with the baseline: with the row's stop
        (until 2026-11-27) it also waited on the others' ratios, which read
        the baseline's side of each block alone, so which of a candidate's
        two processes of a block the baseline's was could decide when it
        stopped (an A/A pair's sign-flip test holds only where its stop is
        blind to that); and a candidate precise early ran on, block after
        block, until the slowest was (results/precision.md, 2026-11-27)."""
        states = sts[0]
        base = self.targets[0].name
        widths = [self.precision_by_target(s) for s in sts]  # each candidate's on its own: one call a block
        if (len(self.targets) >= 3 and states[base].done is None
                and states[base].processes >= self.cfg.min_processes):
            for name in widths[0]:
                if (states[name].processes >= self.cfg.min_processes
                        and max(w.get(name, math.inf) for w in widths) <= self.cfg.precision):
                    for s in sts:
                        s[name].done = "precision"
        return max((w for s, per in zip(sts, widths) for n, w in per.items() if s[n].done is None), default=0.0)

    def _fits_two(self, job: Job, states: dict[str, TargetState]) -> bool:
        """Whether a row's first two blocks (the fewest with a ratio) can end
        within the budget: their floor (plan.two_blocks) times what the rows
        of its kind measured so far took over theirs: an estimate, low
        for a row slower than those (a compile after a sysbench).  If not,
        the row is left out, and its targets say so and what budget at the
        least would add it."""
        floor = plan.two_blocks(job, sum(1 for st in states.values() if st.done is None), self.cfg)
        took, floors = self._took.get(plan.floor_kind(job), (0.0, 0.0))
        need = floor * max(1.0, took / floors if floors > 0 else 1.0)
        left = self._t0 + self.cfg.max_time - self.clock()
        if need <= left:
            self._began[job.name] = (self.clock(), floor)
            return True
        add = plan.budget_to_add(self.cfg.max_time, need, left)
        for st in states.values():
            if st.done is None:
                st.done, st.reason = "budget", (
                    f"left out: the budget could not finish it (its two blocks need {need:.0f} s or more, "
                    f"{max(0.0, left):.0f} s were left); --max-time {fmt_duration(add)} or more would add it")
        self._left_out.append((job.name, need))
        return False

    def _timeout(self, own: float) -> float:
        """A process's timeout: its own, but never past the hard stop."""
        return max(0.1, min(own, self._hard_end_real - time.monotonic()))

    def _spent_all(self) -> bool:
        """Whether the hard stop has come (a process that failed then was stopped by it)."""
        return time.monotonic() >= self._hard_end_real - 0.05

    def _past(self, job: Job, deadline: float) -> bool:
        """Whether this job's next block would end past the deadline: then it
        is not begun (a compile under TCG makes blocks of minutes; the budget
        is the user's, and what it leaves flows to the rows still to come).
        False before the job's first block, and its second unless that
        would end past the budget plus its grace: a row begun gets two (the
        fewest with a ratio; _fits_two begins only a row they should fit)."""
        blocks = len(self._block_s.get(job.name, ()))
        return blocks > 0 and self.clock() + self._next_block_s(job) > (deadline if blocks >= 2 else self._hard_end)

    def _next_block_s(self, job: Job) -> float:
        """How long this job's next block should take: its last three
        blocks' mean (without a workload's warmup runs), plus its counting
        processes where the next block has them; 0 before its first."""
        took = self._block_s.get(job.name)
        if not took:
            return 0.0
        return sum(took[-3:]) / len(took[-3:]) + (self._count_s.get(job.name, 0.0)
                                                  if self._counts(job, self._blocks.get(job.name, 0)) else 0.0)

    def _in_turn(self, order: list[Target], one: Callable[[int, Target], object],
                 together: bool = True) -> None:
        """one(slot, target) for every target of a block, in the order
        drawn.  Targets on different machines (Target.machine: other hosts
        over ssh) do not share CPUs, so each machine's run at the same time
        as the others', in a thread of its own; on one machine, one at a
        time.  With every target on this machine, as without a fleet, it
        is a plain loop; so it is for a workload (together=False: the host
        CPU a local tool used is read from this process's reaped children,
        which the other machines' ssh clients would join)."""
        lanes: dict[str, list[tuple[int, Target]]] = {}
        for slot, target in enumerate(order):
            lanes.setdefault(target.host_machine(), []).append((slot, target))
        if len(lanes) == 1 or not together:
            for slot, target in enumerate(order):
                one(slot, target)
            return
        self.store.serve([lambda lane=lane: [one(slot, target) for slot, target in lane]
                          for lane in lanes.values()])

    def _counts(self, job: Job, block: int) -> bool:
        """Whether this block has its counting processes (every COUNT_EVERY-th)."""
        return block % self.COUNT_EVERY == 0 and self.cfg.parallel == 1 and job.workload is None

    def _enough(self, states: dict[str, TargetState]) -> bool:
        return all(st.processes >= self.cfg.min_processes for st in states.values() if st.done is None)

    def _eta(self, index: int, deadline: float, elapsed: float) -> float:
        """This benchmark's time left, plus the mean duration so far for each
        one still to come, never past the budget."""
        per = sum(self._durations) / len(self._durations) if self._durations else elapsed + 1
        left = len(self.jobs) - index - 1
        guess = max(0.0, deadline - self.clock()) + per * left
        return max(0.0, min(self.cfg.max_time - elapsed, guess))

    def _outcome(self, states: dict[str, TargetState], how: str) -> dict[str, tuple[str, str]]:
        return {n: (st.done, st.reason) if st.done else (how, "") for n, st in states.items()}

    def precision_by_target(self, states: dict[str, TargetState]) -> dict[str, float]:
        """The relative CI half-width that decides stopping, per active
        target: each candidate's ratio to the baseline when comparing (the
        baseline has none of its own), else each target's mean.  A
        candidate's is the stop's estimate (_estimate) until that reaches
        the precision, then the wider of it and the interval the report
        will give (TargetState.reported), so a row stops only when both
        say it is precise."""
        base = self.targets[0].name
        active = [t.name for t in self.targets if states[t.name].done is None]
        if len(self.targets) > 1 and states[base].done is None:
            out = {}
            bb = states[base].block_means()
            bm = states[base].modes(bb)
            which = stats.SAME if self.cfg.same_mode else stats.FAST if self.cfg.fast_mode else None
            for n in active:
                if n == base:
                    continue
                cb = states[n].block_means()
                cm = states[n].modes(cb)
                out[n] = self._estimate(states[n], bb, cb, bm, cm)
                if out[n] <= self.cfg.precision:
                    out[n] = max(out[n], states[n].reported(bb, cb, bm, cm, which))
            return out
        return {n: states[n].summary().ci_rel if len(states[n].values) >= 2 else float("inf")
                for n in active}

    def _estimate(self, st: TargetState, bb: dict[int, float], cb: dict[int, float], bm, cm) -> float:
        """The stop's estimate of a candidate's half-width (stats.stop_halfwidth:
        blind to which side of a block is ahead): over the stratum its mode
        flag asks where both sides have two modes and the report will have
        it (TargetState.stratum_holds), else over every block."""
        if self.cfg.same_mode:  # judged over the blocks in one mode where a side has two (analysis.stop_blocks)
            got = analysis.stop_blocks(bb, cb, bm, cm, same=True)
            if got is not None:
                fast, slow = got
                keep = fast + slow
                w = (float("inf") if len(keep) < self.cfg.min_processes else stats.stop_halfwidth_strata(
                    [cb[k] for k in keep], [bb[k] for k in keep], [0] * len(fast) + [1] * len(slow)))
                if w > self.cfg.precision or st.stratum_holds(stats.SAME, bb, cb, bm, cm):
                    return w
        if self.cfg.fast_mode:  # judged in the fast mode where a side has two (analysis.stop_blocks)
            got = analysis.stop_blocks(bb, cb, bm, cm, same=False)
            keep = got[0] if got is not None else None
            if keep is not None and len(keep) < self.cfg.min_processes:
                return float("inf")  # the stratum needs --min-processes blocks, as a row does
            if keep is not None:
                w = stats.stop_halfwidth(*stats.paired({k: cb[k] for k in keep}, {k: bb[k] for k in keep}))
                if w > self.cfg.precision or st.stratum_holds(stats.FAST, bb, cb, bm, cm):
                    return w
        # all blocks: no stratum asked or found, or one the report will not have (stratum_holds)
        return stats.stop_halfwidth(*stats.paired(cb, bb))

    def worst_precision(self, states: dict[str, TargetState]) -> float:
        """The widest of precision_by_target: the figure that decides stopping."""
        return max(self.precision_by_target(states).values(), default=0.0)

    # -- one agent process --------------------------------------------------------
    def agent_args(self, target: Target, spec: BenchSpec, st: TargetState,
                   counting: bool = False) -> list[str]:
        """A timed process's arguments; or a counting process's: a warmup,
        then one batch with counters on, no timed sample (counting costs
        time; see agent/main.c)."""
        c = self.cfg
        # the shared calibration: no need for the agent's own probe.  A counted
        # batch lasts this target's own --min-time-ms instead: its counts, not
        # its time, are kept, and the host probe needs a batch long against
        # the settle pause and the idle rate it subtracts
        iters = st.own_iters if counting and st.own_iters else st.iters
        if counting:
            # the bare machine's agent counts its own syscalls: the host's
            trace = syscall_tracepoint()[0] if target.mirror_host else None
            return agent_argv(target, spec, warmup=max(c.warmup, 1), min_time_ms=c.min_time_ms, iters=iters,
                              count_settle_ms=target.count_settle_ms, parallel=c.parallel, tracepoint=trace)
        return agent_argv(target, spec, samples=st.samples if st.samples is not None else c.samples_per_process,
                          warmup=st.warmup if st.warmup is not None else c.warmup, min_time_ms=c.min_time_ms,
                          iters=iters, parallel=c.parallel)

    def _calibrate(self, spec: BenchSpec, states: dict[str, TargetState]) -> None:
        """One process on each target finds the iteration count that makes
        its sample last --min-time-ms; every target's timed processes then
        use one shared count (from the baseline's; else the first target's
        still going): the same work per sample everywhere, since what one
        operation costs can depend on how many run back to back (with counts
        of their own, A/A pairs differed by up to 46%:
        results/validity-own-calibration.md).  Each target's own count is
        kept for its counted batches.  These processes' samples are not
        kept: they ran outside any block.  The shared count and each
        target's samples per process: plan.sizes."""
        found = {}
        for target in self.targets:
            st = states[target.name]
            if st.done is None and st.iters is None:
                found[target.name] = self._calibrate_on(target, spec, st)
        for name, (n, _) in found.items():
            states[name].own_iters = n
        first = next((t.name for t in self.targets if found.get(t.name, (None, None))[0] is not None), None)
        if first is None:
            return
        shared, per = plan.sizes(first, found, self.cfg)
        self._steps[spec.name] = plan.step_sizes(first, found, self.cfg)
        self._per_iter[spec.name] = {name: ns for name, (_, ns) in found.items()}
        for name, (samples, warmup) in per.items():
            states[name].samples, states[name].warmup = samples, warmup
        for st in states.values():
            st.iters = shared

    def _calibrate_on(self, target: Target, spec: BenchSpec,
                      st: TargetState) -> tuple[int | None, float | None]:
        """The count this target's agent calibrated, and what one iteration
        of it took in ns (core.calibrate); None where unknown."""
        process = next(self._processes)
        started, got = time.time(), None
        try:
            got = calibrate(target, spec, self.cfg.min_time_ms, self._timeout(self.cfg.agent_timeout))
            started = got.started
            if got.skipped:
                st.done, st.reason = "skipped", got.skipped
        except (AgentError, TargetError, ChildFailed) as e:
            if self._spent_all():
                raise BudgetSpent from None
            st.done, st.reason = "error", f"agent {e}" if isinstance(e, ChildFailed) else str(e)
        self.store.add_process(self.run_id, process, target.name, spec.name, -1, 0, started, None, time.time(),
                               {"error": "error", "skipped": "skipped"}.get(st.done, "calibration"))
        return (got.iters, got.ns_per_iter) if got is not None and st.done is None else (None, None)

    def _one_process(self, target: Target, job: Job, sts: list[TargetState], block: int,
                     slot: int = 0, counting: bool = False) -> None:
        if job.workload is not None:
            return self._tool_runs(target, job, sts, block, slot)
        spec, st = job.specs[0], sts[0]
        process = next(self._processes)
        started, got = time.time(), AgentRead()

        def take(f: dict, t: float) -> None:
            s = Sample(benchmark=spec.name, target=target.name, process=process, block=block, t=t, **f)
            self.store.add_sample(self.run_id, s)
            st.take(s)
        try:
            lines = target.run_agent(self.agent_args(target, spec, st, counting),
                                     timeout=self._timeout(self.cfg.agent_timeout))
            try:
                read_agent(target, lines, spec, take, target.host_probe if counting else None, into=got)
            finally:  # what the agent said holds even if the process is cut short after it (Ctrl-C, budget)
                if got.skipped:
                    st.done, st.reason = "skipped", got.skipped
                elif st.iters is None:
                    st.iters = got.iters
            if not got.finished and st.done is None:
                raise AgentError("the agent stopped without finishing")
        except (AgentError, TargetError, ChildFailed) as e:
            if self._spent_all():
                raise BudgetSpent from None
            st.done, st.reason = "error", f"agent {e}" if isinstance(e, ChildFailed) else str(e)
        if not counting:
            st.processes += 1
        self.store.add_process(self.run_id, process, target.name, spec.name, block, slot, started, got.first,
                               time.time(), {"error": "error", "skipped": "skipped"}.get(st.done, "ok"))

    # -- lockstep pairs (lockstep.py) ---------------------------------------------
    def _stepped(self, job: Job, order: list[Target], states: dict[str, TargetState]) -> list[Target]:
        """The targets of this block that run in lockstep: with --pairing
        lockstep, an agent row's baseline and the candidates still going
        that can hold an agent sample by sample on this machine (an ssh
        host runs its processes in turn, after them); [] where fewer than
        two can."""
        base = self.targets[0]
        if (self.cfg.pairing != "lockstep" or job.workload is not None or self.cfg.parallel != 1
                or job.specs[0].name not in self._steps):
            return []
        can = [t for t in self.targets if states[t.name].done is None and lockstep.STEP in t.capabilities
               and t.host_machine() == ""]
        return can if base in can and len(can) >= 2 else []

    def _lockstep_block(self, job: Job, states: dict[str, TargetState], block: int,
                        targets: list[Target]) -> None:
        """One block of these targets' processes in lockstep (lockstep.run_block):
        the baseline's first, each recorded as a process of its own."""
        spec, size = job.specs[0], self._steps[job.specs[0].name]
        size = plan.step_rounds(size, [size.iters * (self._per_iter[spec.name].get(t.name) or 0.0) / 1e6
                                       for t in targets], [self._go_ms(t) for t in targets], self.cfg)
        pairs = len(targets) - 1
        sides = []
        for slot, target in enumerate(targets):
            st, process = states[target.name], next(self._processes)
            times = pairs if slot == 0 else 1  # the baseline's sample is in every pair of a round

            def take(f: dict, t: float, target=target, st=st, process=process) -> None:
                s = Sample(benchmark=spec.name, target=target.name, process=process, block=block, t=t, **f)
                self.store.add_sample(self.run_id, s)
                st.take(s)
            argv = agent_argv(target, spec, samples=(size.rounds - size.warmup) * times,
                              warmup=size.warmup * times, iters=size.iters) + ["--step"] + self._preroll()
            side = lockstep.Side(target.name, target, argv, take)
            side.process, side.started = process, time.time()
            sides.append(side)
        lockstep.run_block(sides, spec, size.rounds, self.order,
                           step_timeout=lambda: self._timeout(lockstep.STEP_TIMEOUT),
                           timeout=self._timeout(self.cfg.agent_timeout))
        if any(s.error for s in sides) and self._spent_all():
            raise BudgetSpent
        for slot, (target, side) in enumerate(zip(targets, sides)):
            st = states[target.name]
            if side.skipped:
                st.done, st.reason = "skipped", side.skipped
            elif side.error:
                st.done, st.reason = "error", side.error[:500]
            st.processes += 1
            self._step_latency.setdefault(target.name, []).extend(side.overheads)
            self.store.add_process(self.run_id, side.process, target.name, spec.name, block, slot, side.started,
                                   side.first, time.time(), {"error": "error", "skipped": "skipped"}.get(st.done, "ok"))

    def _go_ms(self, target: Target) -> float:
        """A go's round trip to this target so far (its last block's median), in ms."""
        took = self._step_latency.get(target.name)
        return statistics.median(took[-50:]) * 1e3 if took else plan.STEP_GO_MS

    def _preroll(self) -> list[str]:
        return ["--preroll-pct", str(lockstep.PREROLL_PCT)] if lockstep.PREROLL_PCT else []

    def _tool_runs(self, target: Target, job: Job, sts: list[TargetState], block: int, slot: int) -> None:
        """One run of a workload's tool (after a warmup run, the first time
        on this target): a sample of each of its figures."""
        if job.workload.needs_disk and not target.on_disk():
            for st in sts:
                st.done, st.reason = "skipped", (
                    f"{job.workload.name} needs direct I/O and {target.name}'s scratch directory is a tmpfs: "
                    "give it a disk (qemu:disk=virtio; local:dir=/var/tmp)")
            return
        peer_at = target.peer_address() if job.workload.peer else None
        if job.workload.peer and peer_at is None:
            for st in sts:
                st.done, st.reason = "skipped", (
                    f"{job.workload.name} needs a peer on the host and {target.name} has no network to it: "
                    "give it a NIC (qemu:nic=virtio)")
            return
        for warmup in ([] if sts[0].warmed else [True]) + [False]:
            began = self.clock()
            process = next(self._processes)
            started, first, error = time.time(), None, ""
            w = job.workload
            port = free_port()
            argv = w.argv(target.scratch_dir() or "/tmp", self.cfg.tool_seconds, port, peer_at or "127.0.0.1")
            peer = None
            try:
                out = []
                if w.peer:
                    peer = start_peer(w, port, target.host_cpu, *target.peer_listen())
                cost0, t0 = host_cost(target), time.monotonic()
                for line in target.run_tool(argv, timeout=self._timeout(w.timeout)):
                    first = first or time.time()
                    out.append(line)
                cost1, t1 = host_cost(target), time.monotonic()
                peer_s = sum(ticks([peer.pid])) / TICK if peer is not None else None
                values = w.parse("\n".join(out))
                samples = tool_samples(job, values, target.name, process, block, time.time(), target.host_cpu,
                                       warmup)
                cost = per_unit(target, w.work, values, cost0, cost1, t1 - t0, peer_s)
                for smp in samples:
                    smp.metrics.update(cost)
            except ParseError as e:
                error = f"{w.name}: {e}"
            except (AgentError, TargetError) as e:
                error = str(e)
            except ChildFailed as e:
                error = f"{w.name} {e}"
            finally:
                if peer is not None:
                    kill_group(peer)
            if error and self._spent_all():
                raise BudgetSpent
            if not error:
                for st, s in zip(sts, samples):
                    self.store.add_sample(self.run_id, s)
                    st.take(s)
            if warmup:
                self._warm_s[job.name] = self._warm_s.get(job.name, 0.0) + self.clock() - began
            for st in sts:
                st.warmed = True
                if error:
                    st.done, st.reason = "error", error[:500]
                elif not warmup:
                    st.processes += 1
            self.store.add_process(self.run_id, process, target.name, job.specs[0].name, block, slot, started,
                                   first, time.time(), "error" if error else "ok")
            if error:
                return


def host_cost(target: Target) -> dict[str, float] | None:
    """What the target has cost the host so far, read without a counter (a
    perf counter on QEMU's threads would tax the very run it measures): CPU
    seconds, user and system, of its host processes and the children they
    reaped (/proc ticks), and their threads' context switches; for the bare
    machine, of the tools it has run and reaped."""
    if target.mirror_host:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {"user": r.ru_utime, "sys": r.ru_stime, "switches": float(r.ru_nvcsw + r.ru_nivcsw)}
    probe = target.host_probe
    if probe is None:
        return None
    probe.refresh()
    user, system = ticks(probe.pids)
    return {"user": user / TICK, "sys": system / TICK, "switches": float(switches(probe.pids))}


def per_unit(target: Target, work: str, values: dict[str, float], before: dict[str, float] | None,
             after: dict[str, float] | None, seconds: float, peer_s: float | None) -> dict[str, float]:
    """One tool run's host cost per unit of its work (metrics.WORK: per GB
    moved, per 1000 transactions), less the target's idle rate over it:
    seed 003's figures of merit.  {} when the tool counted no work."""
    w = WORK.get(work)
    done = values.get(w.key) if w else None
    if not done or done <= 0 or before is None or after is None:
        return {}
    units = done / w.size
    idle = target.host_probe.idle if target.host_probe is not None else {}
    du, ds = after["user"] - before["user"], after["sys"] - before["sys"]
    busy = max(0.0, du + ds - idle.get("host_cpu_ns", 0.0) / 1e9 * seconds)
    share = du / (du + ds) if du + ds > 0 else 0.0
    out = {"host_cpu_per_unit": busy * w.cpu_scale / units,
           "host_cpu_user_per_unit": busy * share * w.cpu_scale / units,
           "host_cpu_sys_per_unit": busy * (1 - share) * w.cpu_scale / units,
           "host_context_switches_per_unit": max(0.0, after["switches"] - before["switches"]
                                                 - idle.get("host_context_switches", 0.0) * seconds) / units}
    if peer_s is not None:
        out["peer_cpu_per_unit"] = peer_s * w.cpu_scale / units
    return out


def run_session(kind: str, command: str, cfg: RunConfig, specs: list[BenchSpec],
                targets: list[Target], store: Store, progress: Progress | None = None,
                notes: dict | None = None, began: float | None = None) -> tuple[str, str, str]:
    """Start the targets, record the run (core.recorded), measure, and tear
    everything down on every exit path.  A remote candidate (another host)
    that cannot be reached is recorded with every benchmark failed, and the
    others are measured.  Returns (run_id, status, failure): failure is
    what went wrong with the store mid-run ('' when nothing did) -- the
    samples stored before it are kept and can be reported.  The budget
    runs from `began` (time.monotonic(): when the command began; else now):
    starting the targets is part of it."""
    began = time.monotonic() if began is None else began

    def measure(run_id: str) -> str:
        with ExitStack() as stack:
            stack.enter_context(keep_off(cfg.cpu))  # vmtax off the targets' CPU, from their start
            files = workloads.provision(specs)
            started, failed = [], {}
            for position, target in enumerate(targets):
                target.pin(cfg.cpu)
                target.provide(files)
                try:
                    stack.enter_context(target)
                    info = target.info()
                except TargetError as e:
                    if not target.remote or position == 0:
                        raise
                    # another host that cannot be reached: the others are still measured
                    failed[target.name] = str(e)
                    info = TargetInfo(name=target.name, kind=target.kind,
                                      facts={**target.own_facts(), "start_error": str(e)[:500]})
                    if progress:
                        progress.note(f"vmtax: {e} -- measuring the others")
                else:
                    started.append(target)
                store.add_target(run_id, position, info, agent_hash())
            store.add_benchmarks(run_id, specs)
            for name, why in failed.items():
                for spec in specs:
                    store.set_outcome(run_id, name, spec.name, "error", why)
            try:
                return Runner(cfg, specs, started, store, run_id, progress,
                              spent_before=time.monotonic() - began).run()
            finally:  # what lockstep measured of each target (Runner.run) joins its facts
                for position, target in enumerate(targets):
                    if target in started and LOCKSTEP_GO in target.facts():
                        store.add_target(run_id, position, target.info(), agent_hash())

    config = {**asdict(cfg), "targets": [t.name for t in targets], "benchmarks": [s.name for s in specs],
              "controller_cpus": controller_cpus(cfg.cpu), **(notes or {})}
    return recorded(store, kind, command, config, measure, closing=progress.close if progress else None)
