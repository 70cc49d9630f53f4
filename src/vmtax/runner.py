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

With --pairing lockstep (engine/lockstep.py), an agent row's block starts the
baseline's and the candidates' processes on this machine together and
pairs their samples a millisecond apart (Processes.lockstep); the
others (another host's) run in turn after them.

The budget: pass 1 gives each benchmark an equal share of
plan.FIRST_PASS of it (time a benchmark does not use flows to the next).
Pass 2 takes the benchmarks that have not reached the precision yet: first
it brings any with fewer than --min-processes processes up to that (a row
with a handful of slow processes has no interval at all), then it funds
them cheapest to finish first, so the budget buys as many rows at the
precision asked as it can: the rows whose need fits what is left, then,
their needs measured again, every row still short, each with its need or
an even share (plan.pass2_share).  A row whose lockstep blocks hold one
group of candidates at a time needs what its cheapest group does
(StepGroups.time_to_goal).  No pass begins a block that would end past its
share (Runner._past); only a row's first two blocks always run, and a row
is begun only where they are expected to end within the budget
(Finishing): the rows the budget cannot finish are left out, in the order
given, each with the budget that would add it.  The time spent before the
runner began (spent_before, or the deadline given: starting the targets)
is the budget's too.

The runner schedules; the engine (engine/) runs and records each process
(execute), runs a block's processes (blocks.InTurn), judges the stop
(stop, pure) and owns the session, its targets and its budget (session).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Protocol

from . import plan
from .duration import fmt_duration
from .engine import session
from .engine.blocks import BlockExecutor, InTurn
from .engine.budget import BudgetSpent, Deadline, grace_s
from .engine.execute import Recorder
from .engine.jobs import Job, jobs_of
from .engine.stop import StopRule, judge, widths
from .engine.writer import StoreWriter, ThreadRelay
from .model import BenchSpec
from .plan import RunConfig
from .proc import controller_cpus
from .processes import LOCKSTEP_GO, Processes, States, StepGroups, TargetState
from .suite import workloads
from .targets.base import Target


class Finishing:
    """Which rows the budget can finish: a row is begun only where its
    first two blocks (the fewest with a ratio) are expected to end within
    the budget -- their floor (plan.two_blocks) times what the rows of its
    kind (plan.floor_kind) measured so far took over theirs -- and the rows
    it cannot are left out, each with the budget that would add it."""

    def __init__(self, cfg: RunConfig, clock: Callable[[], float]):
        self.cfg, self.clock = cfg, clock
        self.began: dict[str, tuple[float, float]] = {}  # a row begun: (when, its two_blocks floor)
        self.took: dict[str, list[float]] = {}  # per plan.floor_kind: [seconds its rows' two blocks took, floors]
        self.left_out: list[tuple[str, float]] = []  # rows the budget could not finish: (name, seconds needed)

    def fits_two(self, job: Job, states: States, deadline: Deadline) -> bool:
        """Whether a row's first two blocks can end within the budget (an
        estimate, low for a row slower than those of its kind before it: a
        compile after a sysbench).  If not, the row is left out, and its
        targets say so and what budget at the least would add it."""
        floor = plan.two_blocks(job, sum(1 for st in states.values() if st.done is None), self.cfg)
        took, floors = self.took.get(plan.floor_kind(job), (0.0, 0.0))
        need = floor * max(1.0, took / floors if floors > 0 else 1.0)
        left = deadline.left()
        if need <= left:
            self.began[job.name] = (self.clock(), floor)
            return True
        add = plan.budget_to_add(self.cfg.max_time, need, left)
        for st in states.values():
            if st.done is None:
                st.end(
                    "budget",
                    f"left out: the budget could not finish it (its two blocks need {need:.0f} s or "
                    f"more, {max(0.0, left):.0f} s were left); --max-time {fmt_duration(add)} or more "
                    "would add it",
                )
        self.left_out.append((job.name, need))
        return False

    def learn(self, job: Job, blocks: int) -> None:
        """After a row's block: at its second, what its two blocks took against their floor."""
        if blocks == 2 and job.name in self.began:
            since, floor = self.began.pop(job.name)
            kind = self.took.setdefault(plan.floor_kind(job), [0.0, 0.0])
            kind[0] += self.clock() - since
            kind[1] += floor

    def note(self) -> str:
        """The rows left out, named at the end, with the budget that would add them."""
        add = plan.budget_to_add(self.cfg.max_time, sum(need for _, need in self.left_out), 0.0)
        return (
            f"vmtax: left out by the budget (each row's reason says why): "
            f"{', '.join(name for name, _ in self.left_out)}; --max-time {fmt_duration(add)} or more "
            f"would add them"
        )


class Progress(Protocol):
    def update(
        self, index: int, total: int, job: Job, states: States, precision_now: float, elapsed: float, eta: float
    ) -> None: ...
    def finished(self, index: int, total: int, job: Job, outcome: dict[str, str]) -> None: ...
    def close(self) -> None: ...
    def note(self, text: str) -> None: ...  # one line of its own (a host not reached)


class Runner:
    COUNT_EVERY = 4  # a counting process per target every this many blocks (metrics.py)

    def __init__(
        self,
        cfg: RunConfig,
        specs: list[BenchSpec],
        targets: list[Target],
        store: StoreWriter,
        run_id: str,
        progress: Progress | None = None,
        clock: Callable[[], float] = time.monotonic,
        spent_before: float = 0.0,
        deadline: Deadline | None = None,
        executor: Callable[[Job], BlockExecutor] | None = None,
    ):
        self.cfg, self.specs, self.targets = cfg, specs, targets
        self.jobs = jobs_of(specs)
        self.relay = ThreadRelay(store)
        self.rec, self.progress, self.clock = Recorder(self.relay, run_id), progress, clock
        self.rule, self.names = StopRule.of(cfg), [t.name for t in targets]
        self.order = random.Random(cfg.seed)
        self._deadline, self.spent_before = deadline, spent_before  # the budget gone before (starting targets)
        self.procs = Processes(cfg, targets, self.rec, clock)
        self.groups = StepGroups(self.procs)
        self._blocks: dict[str, int] = {}
        self._recorded: set[tuple[str, str]] = set()
        self._spent: dict[str, float] = {}
        self._block_s: dict[str, list[float]] = {}  # each job's blocks: their timed processes
        self._count_s: dict[str, float] = {}  # and its last counting processes
        self.rows = Finishing(cfg, clock)
        self.executor = executor or (lambda job: InTurn(self.relay, together=job.workload is None))

    @property
    def deadline(self) -> Deadline:
        """The run's budget: the one given, or made when the run begins."""
        assert self._deadline is not None, "the run has begun"
        return self._deadline

    # -- the passes ---------------------------------------------------------------------------
    def run(self) -> str:
        """Measure every benchmark in the passes the module's docstring
        describes; returns 'complete' or 'interrupted'.  What lockstep
        measured of each target's go joins its facts (LOCKSTEP_GO)."""
        try:
            return self._run()
        finally:
            for target in self.targets:
                took = self.procs.step_latency.get(target.name)
                if took:  # the median time a go took to its sample line, beyond the sample itself
                    target.facts()[LOCKSTEP_GO] = round(statistics.median(took) * 1e3, 3)

    def _run(self) -> str:
        self._deadline = self.procs.deadline = self._deadline or Deadline(
            self.cfg.max_time, self.clock, self.spent_before
        )
        t0 = self._t0 = self.deadline.t0
        self._durations: list[float] = []
        by_spec, states = self._states()
        pending: list[int] = []
        self._current: Job | None = None
        try:
            for index, job in enumerate(self.jobs):
                self._current = job
                pass1_left = self.cfg.max_time * plan.FIRST_PASS - (self.clock() - t0)
                if self._timed(index, job, states[index], max(0.0, pass1_left / (len(self.jobs) - index))) is None:
                    pending.append(index)
            for k, index in enumerate(pending):  # first, every row gets an interval at all
                job = self._current = self.jobs[index]
                left = max(0.0, self.cfg.max_time * plan.CATCH_UP - (self.clock() - t0))
                self._measure(index, job, states[index], self.clock() + left / (len(pending) - k), until_enough=True)
            self._pass2(pending, states)
        except KeyboardInterrupt:
            current = [self._current] if self._current else []
            self._close(current + [self.jobs[i] for i in pending], by_spec, "interrupted")
            return "interrupted"
        except BudgetSpent:
            current = [self._current] if self._current else []
            later = self.jobs[self.jobs.index(current[0]) + 1 :] if current else []
            self._close(
                current + [self.jobs[i] for i in pending] + later,
                by_spec,
                "budget",
                f"stopped at the budget plus its grace ({self.deadline.grace:.0f} s)",
            )
        if self.rows.left_out and self.progress:
            self.progress.note(self.rows.note())
        return "complete"

    def _pass2(self, pending: list[int], states: list[list[States]]) -> None:
        """Pass 2's funding, cheapest first (run): the rows whose need fits
        what is left (those finished leave `pending`), then every row still
        short, each with its need or an even share (plan.pass2_share)."""
        for final in (False, True):
            need = {i: self._time_to_goal(self.jobs[i], states[i]) for i in pending}
            for k, index in enumerate(sorted(pending, key=need.__getitem__)):
                job = self._current = self.jobs[index]
                left = max(0.0, self.cfg.max_time - (self.clock() - self._t0))
                share = plan.pass2_share(need[index], left, len(need) - k, self._next_block_s(job), even=final)
                if not final and not share:
                    break  # this row's need, and the next ones', more than is left
                if self._timed(index, job, states[index], share, final=final) is not None and not final:
                    pending.remove(index)

    def _states(self) -> tuple[dict[str, States], list[list[States]]]:
        """Each row's targets' states, by row and by job (a workload whose
        tool is missing: skipped everywhere, with why)."""
        by_spec = {
            spec.name: {t.name: TargetState(higher_is_better=spec.direction == "higher") for t in self.targets}
            for spec in self.specs
        }
        states = [[by_spec[s.name] for s in job.specs] for job in self.jobs]
        for job, sts in zip(self.jobs, states, strict=True):
            why = job.workload.missing() if job.workload else ""
            for st in (st for per in sts for st in per.values()) if why else ():
                st.end("skipped", why)
        return by_spec, states

    def _close(self, jobs: list[Job], by_spec: dict[str, States], how: str, reason: str = "") -> None:
        """Every row of these jobs not recorded yet ends `how` (a target
        that failed or was skipped keeps its own outcome)."""
        for name in dict.fromkeys(s.name for job in jobs for s in job.specs):
            for target, st in by_spec[name].items():
                if (target, name) not in self._recorded:
                    self.rec.outcome(target, name, st.done or how, st.reason if st.done else reason)
                    self._recorded.add((target, name))

    def _time_to_goal(self, job: Job, sts: list[States]) -> float:
        """Seconds more this benchmark would need to reach the precision (plan.time_to_goal):
        its time so far, and the widest interval over its figures (what decides its stop);
        a row whose lockstep blocks hold one group at a time: the time its cheapest group
        needs (StepGroups.time_to_goal), what its next share buys first."""
        cheapest = self.groups.time_to_goal(job, sts[0], len(self._block_s.get(job.name, ())))
        if cheapest is not None:
            return cheapest
        worst = max(max(self._widths(states).values(), default=0.0) for states in sts)
        return plan.time_to_goal(self._spent.get(job.name, 0.0), worst, self.cfg.precision)

    def _widths(self, states: States) -> dict[str, float]:
        return widths(self.rule, self.names, {n: st.side() for n, st in states.items()})

    def _timed(self, index: int, job: Job, sts: list[States], share: float, final: bool = False) -> dict | None:
        """Measure until precision (recorded, returned) or budget (None)."""
        started = self.clock()
        how = self._measure(index, job, sts, started + share)
        spent = self.clock() - started
        self._durations.append(spent)
        self._spent[job.name] = self._spent.get(job.name, 0.0) + spent
        states = sts[0]  # a job's figures share their processes, skips and errors
        if how == "budget" and not final and any(st.done is None for st in states.values()):
            if self.progress:
                self.progress.finished(index, len(self.jobs), job, so_far([self._widths(s) for s in sts], sts[0]))
            return None
        outcome = {n: (st.done, st.reason) if st.done else (how, "") for n, st in states.items()}
        for spec in job.specs:
            for name, (stopped, reason) in outcome.items():
                self.rec.outcome(name, spec.name, stopped, reason)
                self._recorded.add((name, spec.name))
        if self.progress:
            self.progress.finished(index, len(self.jobs), job, {k: v[0] for k, v in outcome.items()})
        return outcome

    # -- the blocks -----------------------------------------------------------------------------
    def _measure(self, index: int, job: Job, sts: list[States], deadline: float, until_enough: bool = False) -> str:
        """Block after block, each in a random order; 'precision' or 'budget'
        (until_enough: or 'budget' as soon as every target has the minimum
        number of processes; with it, nothing is run once they have)."""
        states = sts[0]
        if until_enough and self._enough(states):
            return "budget"
        if not self._block_s.get(job.name) and not self.rows.fits_two(job, states, self.deadline):
            return "budget"
        while job.workload is None and any(st.iters is None and st.done is None for st in states.values()):
            self.procs.calibrate(job.specs[0], states)
        while True:
            if self._past(job, deadline):  # a row's first block always runs; no other ends past the deadline
                return "budget"
            worst = self._block(job, sts, deadline)
            if self.progress:
                elapsed = self.clock() - self._t0
                self.progress.update(
                    index,
                    len(self.jobs),
                    job,
                    states,
                    worst,
                    elapsed,
                    plan.eta(
                        self._durations, len(self.jobs) - index - 1, deadline - self.clock(), self.cfg.max_time, elapsed
                    ),
                )
            if not any(st.done is None for st in states.values()):
                return "budget"  # every target skipped or failed: the outcome says which
            if self._enough(states) and worst <= self.cfg.precision:
                return "precision"
            if (self.clock() >= deadline and len(self._block_s[job.name]) >= 2) or (
                until_enough and self._enough(states)
            ):
                return "budget"  # a row begun gets two blocks, the fewest with a ratio (_past)

    def _block(self, job: Job, sts: list[States], deadline: float) -> float:
        """One block: each target's process in an order drawn at random --
        those that can in lockstep first (Processes.lockstep, engine.lockstep: all of
        them, or after a row's first blocks the baseline and one group of
        candidates, StepGroups), the others by the job's executor
        (InTurn, unless the runner was given another) -- then every
        COUNT_EVERY-th block each target's counting process; the
        candidates now precise stop (stop.judge).  The widest interval
        still deciding."""
        block = self._blocks.get(job.name, 0)
        self._blocks[job.name] = block + 1
        warm_s = self.procs.warm_s
        began, warm = self.clock(), warm_s.get(job.name, 0.0)
        order = list(self.targets)
        self.order.shuffle(order)
        stepped = self.procs.stepped(job, sts[0])
        group = self.groups.pick(job, sts[0], stepped, block, deadline - self.clock())
        if group:
            run, turns = self.procs.lockstep(job, sts[0], block, group, self.order)
            run.run(turns)
        self.executor(job).run(self.procs.turns(job, sts, block, [t for t in order if t not in stepped]))
        timed = self.clock()
        if self._counts(job, block):
            InTurn(self.relay).run(self.procs.turns(job, sts, block, order, counting=True))
            self._count_s[job.name] = self.clock() - timed
        took = self._block_s.setdefault(job.name, [])
        took.append(timed - began - (warm_s.get(job.name, 0.0) - warm))  # what the next one takes
        self.groups.took(job, group, took[-1])
        self.rows.learn(job, len(took))
        got = judge(self.rule, self.names, [{n: st.side() for n, st in s.items()} for s in sts])
        for name in got.precise:
            for s in sts:
                s[name].done = "precision"
        self.groups.expect(job, sts[0], block + 1, got.widths, deadline - self.clock())
        return got.worst

    def _past(self, job: Job, deadline: float) -> bool:
        """Whether this job's next block would end past the deadline: then it
        is not begun (a compile under TCG makes blocks of minutes; the budget
        is the user's, and what it leaves flows to the rows still to come).
        False before the job's first block, and its second unless that
        would end past the budget plus its grace: a row begun gets two (the
        fewest with a ratio; Finishing.fits_two begins only a row they should fit)."""
        blocks = len(self._block_s.get(job.name, ()))
        return blocks > 0 and self.clock() + self._next_block_s(job) > (
            deadline if blocks >= 2 else self.deadline.hard_end
        )

    def _next_block_s(self, job: Job) -> float:
        """How long this job's next block should take: the mean of its last
        three blocks of the same targets (lockstep groups differ: StepGroups;
        else of any), without a workload's warmup runs, plus its counting
        processes where the next block has them; 0 before its first."""
        took = self.groups.times(job) or self._block_s.get(job.name)
        if not took:
            return 0.0
        return sum(took[-3:]) / len(took[-3:]) + (
            self._count_s.get(job.name, 0.0) if self._counts(job, self._blocks.get(job.name, 0)) else 0.0
        )

    def _counts(self, job: Job, block: int) -> bool:
        """Whether this block has its counting processes (every COUNT_EVERY-th)."""
        return block % self.COUNT_EVERY == 0 and self.cfg.parallel == 1 and job.workload is None

    def _enough(self, states: States) -> bool:
        return all(st.processes >= self.cfg.min_processes for st in states.values() if st.done is None)


def so_far(per: list[dict[str, float]], states: States) -> dict[str, str]:
    """What pass 1 says of a row going on to pass 2 (per: each of its
    figures' intervals, Runner._widths): the candidates already precise,
    the others' widest interval so far."""
    widest = {n: max(w.get(n, 0.0) for w in per) for n in per[0]}
    return {
        n: "precision"
        if st.done == "precision"
        else f"±{widest[n] * 100:.1f}% so far, more in pass 2"
        if math.isfinite(widest[n])
        else "more in pass 2"
        for n, st in states.items()
        if st.done == "precision" or n in widest
    }


def run_session(
    kind: str,
    command: str,
    cfg: RunConfig,
    specs: list[BenchSpec],
    targets: list[Target],
    store,
    progress: Progress | None = None,
    notes: dict | None = None,
    began: float | None = None,
) -> tuple[str, str, str]:
    """compare's (and run's) session (engine.session): record the run,
    start the targets one by one with vmtax kept off their CPU, measure,
    and stop everything on every exit path.  A remote candidate (another
    host) that cannot be reached is recorded with every benchmark failed,
    and the others are measured.  Returns (run_id, status, failure):
    failure is what went wrong with the store mid-run ('' when nothing
    did) -- the samples stored before it are kept and can be reported.
    The budget runs from `began` (time.monotonic(): when the command began;
    else now): starting the targets is part of it."""
    began = time.monotonic() if began is None else began

    def measure(s: session.Session) -> str:
        s.pool.start_by = began + cfg.max_time + grace_s(cfg.max_time)  # a target's start ends by the hard stop
        s.pool.add(targets, [cfg.cpu] * len(targets), workloads.provision(specs, by=began + cfg.max_time))
        started = session.start_each(s, targets, progress.note if progress else None)
        s.recorder.benchmarks(specs)
        for name, why in s.failed.items():
            for spec in specs:
                s.recorder.outcome(name, spec.name, "error", why)
        try:
            deadline = s.begin(cfg.max_time, spent_before=time.monotonic() - began)
            return Runner(cfg, specs, started, store, s.run_id, progress, deadline=deadline).run()
        finally:  # what lockstep measured of each target (Runner.run) joins its facts
            for position, target in enumerate(targets):
                if target in started and LOCKSTEP_GO in target.facts():
                    s.recorder.target(position, target.info())

    config = {
        **asdict(cfg),
        "targets": [t.name for t in targets],
        "benchmarks": [s.name for s in specs],
        "controller_cpus": controller_cpus(cfg.cpu),
        **(notes or {}),
    }
    return session.run_session(store, kind, command, config, measure, closing=progress.close if progress else None)
