"""A run's budget and its hard stop, one implementation for compare and
scale: no block or round is begun that is expected to end past the budget,
and every process still running at budget + grace is stopped (Deadline)."""

from __future__ import annotations

import time
from collections.abc import Callable


def grace_s(max_time: float) -> float:
    """How far past --max-time a run may go at most: 10% of it, at least
    5 s and at most 60 s.  No block or round is begun that is expected to
    end past the budget, and every process still running at budget + grace
    is stopped (its row ends 'budget'), so a slow target or a hung tool
    cannot stretch the run."""
    return min(60.0, max(5.0, 0.1 * max_time))


class BudgetSpent(Exception):
    """The budget and its grace are spent: the run stops where it is."""


class Deadline:
    """The budget of a run that began `spent_before` seconds ago (starting
    its targets counts against it): --max-time from `t0` on the run's clock
    (what is begun is judged on it; a test's clock takes fixed steps), and
    the hard stop at budget + grace, on that clock and on the real one (a
    process's timeout never runs past it)."""

    def __init__(self, max_time: float, clock: Callable[[], float] = time.monotonic, spent_before: float = 0.0):
        self.max_time, self.clock = max_time, clock
        self.t0 = clock() - spent_before
        self.grace = grace_s(max_time)
        self.hard_end = self.t0 + max_time + self.grace
        self.hard_end_real = time.monotonic() - spent_before + max_time + self.grace

    def left(self) -> float:
        """Seconds left of the budget itself (not its grace), on the run's clock."""
        return self.t0 + self.max_time - self.clock()

    def timeout(self, own: float) -> float:
        """A process's timeout: its own, but never past the hard stop."""
        return max(0.1, min(own, self.hard_end_real - time.monotonic()))

    def spent(self) -> bool:
        """Whether the hard stop has come (a process that failed then was
        stopped by it: its failure is the budget's, not the target's)."""
        return time.monotonic() >= self.hard_end_real - 0.05
