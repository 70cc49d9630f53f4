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
arrives (a lockstep block's once the block has ended).

A workload (suite/workloads.py) is scheduled the same way: one run of its
tool is its "process", the first run on each target is a warmup, and one
run gives a sample of each of its figures (`<workload>.<metric>` rows, a
"job" of several specs measured together; stopping waits for the widest).

With --pairing lockstep, an agent row's block starts the baseline's and
the candidates' processes on this machine together and pairs their
samples a millisecond apart (Processes.lockstep, run by the engine's
Lockstep executor); the others (another host's) run in turn after them.

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
share (Schedule.next_block); only a row's first two blocks always run, and
a row is begun only where they are expected to end within the budget
(Schedule.begin): the rows the budget cannot finish are left out, in the
order given, each with the budget that would add it.  The time spent before the
runner began (spent_before, or the deadline given: starting the targets)
is the budget's too.

The scheduler (schedule.py, pure) decides each row's share and whether
its next block runs; the runner executes its decisions; compare's
processes are the blocks' turns (processes.py); the engine (engine/) runs
a block's processes (its executors: blocks.InTurn, lockstep.Lockstep),
reads and records each process (execute), judges the stop (stop, pure)
and owns the session, its targets and its budget (session).
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
from .processes import LOCKSTEP_GO, Processes, States, StepGroups, row_states
from .schedule import COUNT_EVERY, Block, Schedule
from .suite import workloads
from .targets.base import Target


class Progress(Protocol):
    def update(
        self, index: int, total: int, job: Job, states: States, precision_now: float, elapsed: float, eta: float
    ) -> None: ...
    def finished(self, index: int, total: int, job: Job, outcome: dict[str, str]) -> None: ...
    def close(self) -> None: ...
    def note(self, text: str) -> None: ...  # one line of its own (a host not reached)


class Blocks:
    """A row measured block after block (_measure), each block's
    processes run by the engine's executors (Processes' turns), whether
    the next one runs as the schedule decides (schedule.Schedule); the
    passes over the rows: Runner."""

    COUNT_EVERY = COUNT_EVERY

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
        self.sched = Schedule(cfg, len(self.jobs))
        self._recorded: set[tuple[str, str]] = set()
        self.executor = executor or (lambda job: InTurn(self.relay, together=job.workload is None))

    @property
    def deadline(self) -> Deadline:
        """The run's budget: the one given, or made when the run begins."""
        assert self._deadline is not None, "the run has begun"
        return self._deadline

    # -- the blocks (whether the next one runs: Schedule.next_block) ---------------------------
    def _measure(self, index: int, job: Job, sts: list[States], deadline: float, until_enough: bool = False) -> str:
        """Block after block, each in a random order; 'precision' or 'budget'
        (until_enough: or 'budget' as soon as every target has the minimum
        number of processes; with it, nothing is run once they have)."""
        states = sts[0]
        if (until_enough and self._enough(states)) or not self._begun(job, states):
            return "budget"
        while job.workload is None and any(st.iters is None and st.done is None for st in states.values()):
            self.procs.calibrate(job.specs[0], states)
        while True:
            now = self.clock() if self.sched.blocks(job) else 0.0  # a row's first block runs whenever
            block = self.sched.next_block(job, now, deadline, self.deadline.hard_end, self.groups.times(job))
            if block is None:  # a row's first block always runs; no other ends past the deadline
                return "budget"
            worst = self._block(job, sts, block, deadline)
            if self.progress:
                elapsed = self._elapsed()
                eta = self.sched.eta(index, deadline - self.clock(), elapsed)
                self.progress.update(
                    index, len(self.jobs), job=job, states=states, precision_now=worst, elapsed=elapsed, eta=eta
                )
            if not any(st.done is None for st in states.values()):
                return "budget"  # every target skipped or failed: the outcome says which
            if self._enough(states) and worst <= self.cfg.precision:
                return "precision"
            if (self.clock() >= deadline and self.sched.blocks(job) >= 2) or (until_enough and self._enough(states)):
                return "budget"  # a row begun gets two blocks, the fewest with a ratio (Schedule.next_block)

    def _begun(self, job: Job, states: States) -> bool:
        """Whether the row is (or was) begun: Schedule.begin; a row left
        out ends on the budget, saying what budget would add it."""
        if self.sched.blocks(job):
            return True
        out = self.sched.begin(job, sum(1 for st in states.values() if st.done is None), self.deadline.left())
        if out is None:
            self.sched.start(job, self.clock())
            return True
        for st in states.values():
            if st.done is None:
                st.end("budget", out.reason())
        return False

    def _block(self, job: Job, sts: list[States], block: Block, deadline: float) -> float:
        """One block: each target's process in an order drawn at random --
        those that can in lockstep first (Processes.lockstep, its executor
        engine.lockstep: all of them, or after a row's first blocks the
        baseline and one group of candidates, StepGroups), the others by
        the job's executor (InTurn, unless the runner was given another)
        -- then, where the schedule says, each target's counting process;
        the candidates now precise stop (stop.judge).  The widest
        interval still deciding."""
        warm_s = self.procs.warm_s
        began, warm = self.clock(), warm_s.get(job.name, 0.0)
        order = list(self.targets)
        self.order.shuffle(order)
        stepped = self.procs.stepped(job, sts[0])
        group = self.groups.pick(job, sts[0], stepped, block.number, deadline - self.clock())
        if group:
            run, turns = self.procs.lockstep(job, sts[0], block.number, group, self.order)
            run.run(turns)
        self.executor(job).run(self.procs.turns(job, sts, block.number, [t for t in order if t not in stepped]))
        timed = self.clock()
        counted = None
        if block.counting:
            InTurn(self.relay).run(self.procs.turns(job, sts, block.number, order, counting=True))
            counted = self.clock() - timed
        took = timed - began - (warm_s.get(job.name, 0.0) - warm)  # what the next one takes
        self.groups.took(job, group, took)
        self.sched.took_block(job, took, counted, self.clock() if self.sched.learns(job) else 0.0)
        return self._judge(job, sts, block.number, deadline)

    def _judge(self, job: Job, sts: list[States], block: int, deadline: float) -> float:
        """After a block: the candidates now precise stop (stop.judge), and
        the targets of the row's next block are chosen; the widest interval."""
        got = judge(self.rule, self.names, [{n: st.side() for n, st in s.items()} for s in sts])
        for name in got.precise:
            for s in sts:
                s[name].done = "precision"
        self.groups.expect(job, sts[0], block + 1, got.widths, deadline - self.clock())
        return got.worst

    def _enough(self, states: States) -> bool:
        return all(st.processes >= self.cfg.min_processes for st in states.values() if st.done is None)

    def _elapsed(self) -> float:
        return self.clock() - self.deadline.t0

    def _widths(self, states: States) -> dict[str, float]:
        return widths(self.rule, self.names, {n: st.side() for n, st in states.items()})


class Runner(Blocks):
    """compare's passes over its rows (the module's docstring), each row's blocks measured by Blocks."""

    # -- the passes (their shares: schedule.Schedule) -----------------------------------------
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
        by_spec, states = row_states(self.specs, self.targets, self.jobs)
        pending: list[int] = []
        self._current: Job | None = None
        try:
            for index, job in enumerate(self.jobs):
                self._current = job
                if self._timed(index, job, states[index], self.sched.first_share(index, self._elapsed())) is None:
                    pending.append(index)
            for k, index in enumerate(pending):  # first, every row gets an interval at all
                job = self._current = self.jobs[index]
                until = self.sched.catch_up_share(k, len(pending), self._elapsed())
                self._measure(index, job, states[index], self.clock() + until, until_enough=True)
            self._pass2(pending, states)
        except KeyboardInterrupt:
            self._close(self._unfinished(pending, later=False), by_spec, "interrupted")
            return "interrupted"
        except BudgetSpent:
            why = f"stopped at the budget plus its grace ({self.deadline.grace:.0f} s)"
            self._close(self._unfinished(pending, later=True), by_spec, "budget", why)
        if self.sched.left_out and self.progress:
            self.progress.note(self.sched.note())
        return "complete"

    def _unfinished(self, pending: list[int], later: bool) -> list[Job]:
        """The rows a stop leaves unfinished: the current one, those pending pass 2 (later: and those after it)."""
        current = [self._current] if self._current else []
        after = self.jobs[self.jobs.index(current[0]) + 1 :] if current and later else []
        return current + [self.jobs[i] for i in pending] + after

    def _pass2(self, pending: list[int], states: list[list[States]]) -> None:
        """Pass 2's funding, cheapest first (Schedule.second_share): the
        rows whose need fits what is left (those finished leave
        `pending`), then every row still short, each with its need or an
        even share."""
        for final in (False, True):
            need = {i: self._time_to_goal(self.jobs[i], states[i]) for i in pending}
            for k, index in enumerate(self.sched.cheapest_first(need)):
                job = self._current = self.jobs[index]
                next_s = self.sched.next_block_s(job, self.groups.times(job))
                share = self.sched.second_share(need[index], self._elapsed(), len(need) - k, next_s, final)
                if share is None:
                    break  # this row's need, and the next ones', more than is left
                if self._timed(index, job, states[index], share, final=final) is not None and not final:
                    pending.remove(index)

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
        cheapest = self.groups.time_to_goal(job, sts[0], self.sched.blocks(job))
        if cheapest is not None:
            return cheapest
        worst = max(max(self._widths(states).values(), default=0.0) for states in sts)
        return plan.time_to_goal(self.sched.spent.get(job.name, 0.0), worst, self.cfg.precision)

    def _timed(self, index: int, job: Job, sts: list[States], share: float, final: bool = False) -> dict | None:
        """Measure until precision (recorded, returned) or budget (None)."""
        started = self.clock()
        how = self._measure(index, job, sts, started + share)
        self.sched.spent_on(job, self.clock() - started)
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


def so_far(per: list[dict[str, float]], states: States) -> dict[str, str]:
    """What pass 1 says of a row going on to pass 2 (per: each of its
    figures' intervals, Blocks._widths): the candidates already precise,
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
