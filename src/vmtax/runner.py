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

With --reboot the rows go in rounds instead, the guests booted afresh
between them (rounds.py).  A row's blocks, either way: rowblocks.Blocks.

The scheduler (schedule.py, pure) decides each row's share and whether
its next block runs; the runner executes its decisions; compare's
processes are the blocks' turns (processes.py); the engine (engine/) runs
a block's processes (its executors: blocks.InTurn, lockstep.Lockstep),
reads and records each process (execute), judges the stop (stop, pure)
and owns the session, its targets and its budget (session).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from functools import partial

from . import plan
from .engine import session
from .engine.budget import BudgetSpent, Deadline, grace_s
from .engine.jobs import Job
from .model import BenchSpec
from .plan import RunConfig
from .proc import controller_cpus
from .processes import BOOTS, LOCKSTEP_GO, States, row_states
from .rounds import Rounds
from .rowblocks import Blocks, Progress, go_facts
from .suite import workloads
from .targets.base import Target


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
            go_facts(self.targets, self.procs)

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
        return self._finish(index, job, states, how)


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
            if cfg.reboot:
                reboot, share = (
                    (partial(session.restart_shared, s.pool), session.share)
                    if cfg.shared_boot
                    else (s.pool.restart, None)
                )
                return Rounds(
                    cfg, specs, started, store, s.run_id, progress, deadline=deadline, reboot=reboot, share=share
                ).run()
            return Runner(cfg, specs, started, store, s.run_id, progress, deadline=deadline).run()
        finally:  # what lockstep measured of each target, and its boots (Runner.run, Rounds.run), join its facts
            for position, target in enumerate(targets):
                if target in started and (LOCKSTEP_GO in target.facts() or BOOTS in target.facts()):
                    s.recorder.target(position, target.info())

    config = {
        **asdict(cfg),
        "targets": [t.name for t in targets],
        "benchmarks": [s.name for s in specs],
        "controller_cpus": controller_cpus(cfg.cpu),
        **(notes or {}),
    }
    return session.run_session(store, kind, command, config, measure, closing=progress.close if progress else None)
