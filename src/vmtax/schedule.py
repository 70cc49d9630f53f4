"""compare's scheduler: what runs next, on how much of the budget -- a
pure one.  Fed what the run has measured (each row's block times, its
need to reach the precision, the time the runner read from its clock), it
decides: each row's share in pass 1, the catch-up and pass 2 (cheapest
first, plan.pass2_share), whether a row is begun at all or left out with
the budget that would add it (begin), whether a row's next block is begun
and what it should take (next_block), which blocks carry counting
processes, and which group of a lockstep row's candidates its next block
holds (next_group).  It reads no clock, starts nothing and stores nothing: the
runner (runner.py) reads the clock, runs the blocks it is told to (through
the engine's executors) and tells it what they took.  Its rules, one by
one: plan.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import plan
from .duration import fmt_duration
from .engine.jobs import Job
from .plan import RunConfig

COUNT_EVERY = 4  # a counting process per target every this many blocks (metrics.py)


@dataclass(frozen=True)
class Block:
    """A decision: the row's next block (its number), whether its
    counting processes follow it, and how long it should take (s)."""

    row: str
    number: int
    counting: bool
    expect_s: float


@dataclass(frozen=True)
class LeftOut:
    """A row the budget cannot finish: the seconds its first two blocks
    need, those that were left, and the --max-time that would add it."""

    row: str
    need: float
    left: float
    add: float

    def reason(self) -> str:
        return (
            f"left out: the budget could not finish it (its two blocks need {self.need:.0f} s or "
            f"more, {max(0.0, self.left):.0f} s were left); --max-time {fmt_duration(self.add)} or more "
            "would add it"
        )


@dataclass
class Schedule:
    """The run's schedule as it goes: each row's blocks (their times, and
    its counting processes' last), its time so far, the rows begun (when,
    their floor), what each kind of row (plan.floor_kind) took over its
    floors, and the rows left out."""

    cfg: RunConfig
    rows: int  # the run's rows (jobs)
    block_s: dict[str, list[float]] = field(default_factory=dict)
    count_s: dict[str, float] = field(default_factory=dict)
    spent: dict[str, float] = field(default_factory=dict)
    durations: list[float] = field(default_factory=list)  # each pass's time on a row, in order
    began: dict[str, tuple[float, float]] = field(default_factory=dict)  # a row begun: (when, its two_blocks)
    took: dict[str, list[float]] = field(default_factory=dict)  # per kind: [its rows' two blocks' s, floors]
    left_out: list[LeftOut] = field(default_factory=list)
    numbers: dict[str, int] = field(default_factory=dict)  # each row's blocks begun

    # -- the passes ---------------------------------------------------------------------------
    def first_share(self, index: int, elapsed: float) -> float:
        """Pass 1: row `index`'s even share of what is left of FIRST_PASS
        of the budget (what a row did not use flows to the next)."""
        left = self.cfg.max_time * plan.FIRST_PASS - elapsed
        return max(0.0, left / (self.rows - index))

    def catch_up_share(self, k: int, pending: int, elapsed: float) -> float:
        """The catch-up: the k-th of `pending` rows' share of CATCH_UP of
        the budget, to bring it to --min-processes."""
        return max(0.0, self.cfg.max_time * plan.CATCH_UP - elapsed) / (pending - k)

    @staticmethod
    def cheapest_first(need: dict[int, float]) -> list[int]:
        """Pass 2's order: the rows cheapest to finish first."""
        return sorted(need, key=need.__getitem__)

    def second_share(self, need: float, elapsed: float, rows_left: int, next_s: float, final: bool) -> float | None:
        """Pass 2's share of a row (plan.pass2_share); None where its
        first sweep (final=False) funds no more rows: this one's need, and
        the next ones', more than is left."""
        left = max(0.0, self.cfg.max_time - elapsed)
        share = plan.pass2_share(need, left, rows_left, next_s, even=final)
        return share if final or share else None

    def fund(
        self, need: dict[str, float], next_s: dict[str, float], elapsed: float
    ) -> tuple[list[tuple[str, float]], list[str]]:
        """Pass 2's first sweep as it would go were every row to spend its
        share: [(row, share)] in the order funded, and the rows it leaves
        short for the even shares of the second sweep."""
        funded: list[tuple[str, float]] = []
        order = sorted(need, key=need.__getitem__)
        for k, row in enumerate(order):
            share = self.second_share(need[row], elapsed, len(order) - k, next_s.get(row, 0.0), final=False)
            if share is None:
                return funded, order[k:]
            funded.append((row, share))
            elapsed += share
        return funded, []

    # -- a row's blocks -----------------------------------------------------------------------
    def begin(self, job: Job, going: int, left: float) -> LeftOut | None:
        """Whether a row is begun: its first two blocks (the fewest with a
        ratio) are expected to end within the `left` seconds -- their floor
        (plan.two_blocks, on `going` targets) times what the rows of its
        kind took over theirs so far (start: when it began).  If not, it is
        left out (returned)."""
        floor = plan.two_blocks(job, going, self.cfg)
        took, floors = self.took.get(plan.floor_kind(job), (0.0, 0.0))
        need = floor * max(1.0, took / floors if floors > 0 else 1.0)
        if need <= left:
            self.began[job.name] = (0.0, floor)
            return None
        out = LeftOut(job.name, need, left, plan.budget_to_add(self.cfg.max_time, need, left))
        self.left_out.append(out)
        return out

    def start(self, job: Job, now: float) -> None:
        """When a row begun (begin) began."""
        self.began[job.name] = (now, self.began[job.name][1])

    def learns(self, job: Job) -> bool:
        """Whether the block ending now is the row's second, which took_block learns from (it then reads `now`)."""
        return len(self.block_s.get(job.name, ())) == 1 and job.name in self.began

    def next_block(self, job: Job, now: float, deadline: float, hard_end: float, times: list[float]) -> Block | None:
        """The row's next block, or None where it would end past its
        deadline (a row's first block always runs, and its second unless
        past the budget plus its grace: a row begun gets two, the fewest
        with a ratio).  times: its blocks of the same targets so far
        (lockstep groups differ), else its blocks'."""
        blocks = len(self.block_s.get(job.name, ()))
        expect = self.next_block_s(job, times)
        if blocks > 0 and now + expect > (deadline if blocks >= 2 else hard_end):
            return None
        number = self.numbers.get(job.name, 0)
        self.numbers[job.name] = number + 1
        return Block(job.name, number, self.counts(job, number), expect)

    def next_block_s(self, job: Job, times: list[float]) -> float:
        """How long the row's next block should take: the mean of its last
        three (times, else any of its blocks'), without a workload's warmup
        runs, plus its counting processes where it has them; 0 before its first."""
        took = times or self.block_s.get(job.name)
        if not took:
            return 0.0
        counting = self.count_s.get(job.name, 0.0) if self.counts(job, self.numbers.get(job.name, 0)) else 0.0
        return sum(took[-3:]) / len(took[-3:]) + counting

    def counts(self, job: Job, block: int) -> bool:
        """Whether a block has its counting processes (every COUNT_EVERY-th; an agent row's, one instance)."""
        return block % COUNT_EVERY == 0 and self.cfg.parallel == 1 and job.workload is None

    def took_block(self, job: Job, seconds: float, counting_s: float | None, now: float) -> None:
        """A block has ended: its timed processes took `seconds`, its
        counting ones counting_s (None: none); at a row's second, what its
        two blocks took against their floor joins its kind's."""
        took = self.block_s.setdefault(job.name, [])
        took.append(seconds)
        if counting_s is not None:
            self.count_s[job.name] = counting_s
        if len(took) == 2 and job.name in self.began:
            since, floor = self.began.pop(job.name)
            kind = self.took.setdefault(plan.floor_kind(job), [0.0, 0.0])
            kind[0] += now - since
            kind[1] += floor

    def blocks(self, job: Job) -> int:
        return len(self.block_s.get(job.name, ()))

    def spent_on(self, job: Job, seconds: float) -> None:
        self.durations.append(seconds)
        self.spent[job.name] = self.spent.get(job.name, 0.0) + seconds

    def eta(self, index: int, row_left: float, elapsed: float) -> float:
        return plan.eta(self.durations, self.rows - index - 1, row_left, self.cfg.max_time, elapsed)

    def note(self) -> str:
        """The rows left out, named at the end, with the budget that would add them."""
        add = plan.budget_to_add(self.cfg.max_time, sum(out.need for out in self.left_out), 0.0)
        return (
            f"vmtax: left out by the budget (each row's reason says why): "
            f"{', '.join(out.row for out in self.left_out)}; --max-time {fmt_duration(add)} or more "
            f"would add them"
        )


# -- which targets: a lockstep row's next group ------------------------------------------------
@dataclass(frozen=True)
class GroupNeed:
    """A lockstep group of a row (plan.step_groups) as the choice of its next block reads it."""

    processes: int  # the fewest timed processes among its candidates
    block_s: float | None  # its last blocks' time, alone with the baseline (None: none yet)
    worst: float  # its candidates' widest interval, a relative half-width (inf: none yet)

    def time_to_goal(self, goal: float) -> float:
        """Seconds more of its blocks it should need to reach `goal` (time_to_goal)."""
        if self.block_s is None:
            return float("inf")
        return plan.time_to_goal(self.processes * self.block_s, self.worst, goal)


def next_group(groups: list[GroupNeed], min_processes: int, goal: float, left: float = math.inf) -> int:
    """Which group of a row's lockstep candidates its next block holds,
    once every candidate has a ratio (left: the row's share of the budget
    still to spend, in s): first, while any has fewer than --min-processes
    processes, the one with the fewest (the groups in turn: each gets an
    interval at all); then one never timed alone; then, of those whose
    precision should cost no more than is left (GroupNeed.time_to_goal:
    its block's time, its blocks so far and its widest interval), the
    cheapest; where none should, the groups in turn again (fewest
    processes first).

    Cheapest first, as pass 2 funds rows: a row's share finishes the
    quick group's ratio (a container's, a block of 0.1 s) and then the
    next one's, where in turns a demo's container took a sixth of its
    rows' time, a guest's blocks of 0.6 s the rest, and both ended at
    ±1.3% where the container's ±1% was a second away.  In turns where
    none can finish: the guest whose ±1% is a minute away still narrows."""
    short = [i for i, g in enumerate(groups) if g.processes < min_processes]
    if short:
        return min(short, key=lambda i: (groups[i].processes, i))
    unknown = [i for i, g in enumerate(groups) if g.block_s is None]
    if unknown:
        return unknown[0]
    need = [g.time_to_goal(goal) for g in groups]
    fits = [i for i, t in enumerate(need) if math.isfinite(t) and t <= left]
    if fits:
        return min(fits, key=lambda i: (need[i], i))
    return min(range(len(groups)), key=lambda i: (groups[i].processes, i))
