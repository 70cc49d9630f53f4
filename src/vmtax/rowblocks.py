"""A row measured block after block (Blocks): the block's processes run by
the engine's executors, whether the next one runs as the schedule decides,
the candidates now precise stopped, and each row's outcome recorded.  Two
schedules of rows use it: the runner's passes (runner.py) and --reboot's
rounds (rounds.py)."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Protocol

from .engine.blocks import BlockExecutor, InTurn
from .engine.budget import Deadline
from .engine.execute import Recorder
from .engine.jobs import Job, jobs_of
from .engine.stop import StopRule, judge, widths
from .engine.writer import StoreWriter, ThreadRelay
from .model import BenchSpec
from .plan import RunConfig
from .processes import LOCKSTEP_GO, Processes, States, StepGroups
from .schedule import COUNT_EVERY, Block, Schedule
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
        baseline and one group of candidates, StepGroups; --block-processes
        K: K such processes of each, one after another), the others by
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
        for part in range(self.cfg.block_processes if group else 0):  # --block-processes: pairs one after another
            group = [t for t in group if sts[0][t.name].done is None]
            if group[:1] != [self.targets[0]] or len(group) < 2:
                break  # the baseline, or every candidate, ended (a failure: its outcome says why)
            run, turns = self.procs.lockstep(job, sts[0], block.number, group, self.order, part)
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

    def _finish(self, index: int, job: Job, states: States, how: str) -> dict:
        """A row ends `how` ('precision' or 'budget'): each target's
        outcome recorded (one that stopped early keeps its own)."""
        outcome = {n: (st.done, st.reason) if st.done else (how, "") for n, st in states.items()}
        for spec in job.specs:
            for name, (stopped, reason) in outcome.items():
                self.rec.outcome(name, spec.name, stopped, reason)
                self._recorded.add((name, spec.name))
        if self.progress:
            self.progress.finished(index, len(self.jobs), job, {k: v[0] for k, v in outcome.items()})
        return outcome

    def _close(self, jobs: list[Job], by_spec: dict[str, States], how: str, reason: str = "") -> None:
        """Every row of these jobs not recorded yet ends `how` (close_rows)."""
        close_rows(self.rec, self._recorded, jobs, by_spec, how, reason)

    def _enough(self, states: States) -> bool:
        return all(st.processes >= self.cfg.min_processes for st in states.values() if st.done is None)

    def _elapsed(self) -> float:
        return self.clock() - self.deadline.t0

    def _widths(self, states: States) -> dict[str, float]:
        return widths(self.rule, self.names, {n: st.side() for n, st in states.items()})


def close_rows(
    rec: Recorder, recorded: set[tuple[str, str]], jobs: list[Job], by_spec: dict[str, States], how: str, reason: str
) -> None:
    """Every row of these jobs not recorded yet (recorded: (target,
    benchmark) pairs, added to) ends `how` (a target that failed or was
    skipped keeps its own outcome)."""
    for name in dict.fromkeys(s.name for job in jobs for s in job.specs):
        for target, st in by_spec[name].items():
            if (target, name) not in recorded:
                rec.outcome(target, name, st.done or how, st.reason if st.done else reason)
                recorded.add((target, name))


def go_facts(targets: list[Target], procs: Processes) -> None:
    """What lockstep measured of each target's go joins its facts
    (LOCKSTEP_GO): the median time a go took to its sample line, beyond the sample itself."""
    for target in targets:
        took = procs.step_latency.get(target.name)
        if took:
            target.facts()[LOCKSTEP_GO] = round(statistics.median(took) * 1e3, 3)
