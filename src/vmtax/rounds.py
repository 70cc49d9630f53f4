"""compare --reboot: every row's blocks in rounds, the guests booted
afresh between rounds, so that no two blocks of a row share a boot.

A guest's boot carries an offset of its own: two guests booted alike can
differ by some percent on one operation for as long as they run, while
the blocks of one boot agree with one another far more closely.  The
interval over one run's blocks then holds everything but that offset,
and an A/A pair of guests can "regress" at a tight gate run after run
(docs/change.md, a gate for guests; results/gate-guests.md).  Booted
afresh for every block of a row, both sides of each block are a boot of
their own: the block's ratio holds both sides' offsets, the blocks are
independent draws of them, and the interval and the sign-flip test over
blocks count the boot as they count the process.

A boot costs seconds, far more than a block (a fraction of one), so a
boot serves a block of every row: a round is one boot of every guest
(Target.boots; the others run on), then one block of each row still
measured, in the order given; the first round uses the boots the session
started.  A row ends when its ratio is precise (as in the runner) or when
the next round would end past the budget; every round after the second
is begun only where its boots and its rows' blocks are expected to end
within it, and the second (the fewest blocks with a ratio) within the
budget's grace.  The boots are told in the targets' facts (BOOTS).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .engine.budget import BudgetSpent, Deadline
from .engine.jobs import Job
from .processes import BOOTS, States, row_states
from .rowblocks import Blocks, go_facts
from .targets.base import Target

Reboot = Callable[[list[Target]], dict[str, str]]  # stop and boot these again: {name: why} of those that did not


def booted(targets: list[Target]) -> list[Target]:
    """The targets --reboot boots afresh for every round: the guests (Target.boots)."""
    return [t for t in targets if t.boots()]


class Rounds(Blocks):
    """compare --reboot's rounds over its rows (the module's docstring),
    each row's blocks measured and judged as Blocks does; reboot: the
    session's (engine.session.TargetPool.restart)."""

    def __init__(self, *args, reboot: Reboot, share: Reboot | None = None, **kw):
        super().__init__(*args, **kw)
        self.reboot = reboot
        self.share = share  # --shared-boot: the first round's guests given one boot's state (engine.session.share)
        self.reboot_s = 0.0  # what the last round's boots took (s)
        self.boots = {t.name: 1 for t in booted(self.targets)}

    def run(self) -> str:
        """Measure every row in rounds; 'complete' or 'interrupted'."""
        try:
            return self._rounds()
        finally:
            go_facts(self.targets, self.procs)
            for target in self.targets:
                if target.name in self.boots:
                    target.facts()[BOOTS] = self.boots[target.name]

    def _rounds(self) -> str:
        self._deadline = self.procs.deadline = self._deadline or Deadline(
            self.cfg.max_time, self.clock, self.spent_before
        )
        by_spec, states = row_states(self.specs, self.targets, self.jobs)
        live = list(range(len(self.jobs)))
        number = 0
        try:
            if self.share is not None:
                self._boot_again(live, states, self.share)
            while live and (number == 0 or self._fits(live, number)):
                if number:
                    self._boot_again(live, states)
                for index in list(live):
                    how = self._one(index, states[index], number)
                    if how is not None:
                        self._finish(index, self.jobs[index], states[index][0], how)
                        live.remove(index)
                number += 1
        except KeyboardInterrupt:
            self._close([self.jobs[i] for i in live], by_spec, "interrupted")
            return "interrupted"
        except BudgetSpent:
            why = f"stopped at the budget plus its grace ({self.deadline.grace:.0f} s)"
            self._close([self.jobs[i] for i in live], by_spec, "budget", why)
            live = []  # recorded: their outcomes say why
        for index in live:
            self._finish(index, self.jobs[index], states[index][0], "budget")
        if self.sched.left_out and self.progress:
            self.progress.note(self.sched.note())
        return "complete"

    def _end(self) -> float:
        """The budget's end on the run's clock."""
        return self.deadline.t0 + self.cfg.max_time

    def _fits(self, live: list[int], number: int) -> bool:
        """Whether round `number` is begun: its boots and each row's next
        block are expected to end within the budget (the second round:
        within its grace)."""
        expect = self.reboot_s + sum(
            self.sched.next_block_s(self.jobs[i], self.groups.times(self.jobs[i])) for i in live
        )
        return self.clock() + expect <= (self._end() if number >= 2 else self.deadline.hard_end)

    def _boot_again(self, live: list[int], states: list[list[States]], how: Reboot | None = None) -> None:
        """Every guest still measured on a row left, booted afresh (how:
        the first round's share of one boot, counted as no boot); one that
        does not boot again ends its rows with why (the baseline: every row)."""
        going = {name for i in live for name, st in states[i][0].items() if st.done is None}
        guests = [t for t in booted(self.targets) if t.name in going]
        self.order.shuffle(guests)  # which boots first (--shared-boot: whose boot) is drawn, as a block's order is
        began = time.monotonic()
        failed = (how or self.reboot)(guests)
        self.reboot_s = time.monotonic() - began
        for t in guests:
            if t.name not in failed and how is None:
                self.boots[t.name] += 1
        for name, why in failed.items():
            said = f"{name} did not boot again: {why}" if how is None else f"{name}: {why}"
            if self.progress:
                self.progress.note(f"vmtax: {said} -- its rows end here")
            ended = self.names if name == self.names[0] else [name]
            for i in live:
                for sts in states[i]:
                    for n in ended:
                        if sts[n].done is None:
                            sts[n].end("error", said[:500])

    def _one(self, index: int, sts: list[States], number: int) -> str | None:
        """Row `index`'s block of round `number` (the first round: the row
        begun and calibrated first); how the row ends, None while it goes on."""
        job, states = self.jobs[index], sts[0]
        if number == 0:
            if not self._begun(job, states):
                return "budget"
            while job.workload is None and any(st.iters is None and st.done is None for st in states.values()):
                self.procs.calibrate(job.specs[0], states)
        if not any(st.done is None for st in states.values()):
            return "budget"  # every target skipped or failed: the outcome says which
        block = self.sched.next_block(job, self.clock(), self._end(), self.deadline.hard_end, self.groups.times(job))
        if block is None:
            return "budget"
        worst = self._block(job, sts, block, self._end())
        self._shown(index, job, states, worst)
        if not any(st.done is None for st in states.values()):
            return "budget"
        if self._enough(states) and worst <= self.cfg.precision:
            return "precision"
        return None

    def _shown(self, index: int, job: Job, states: States, worst: float) -> None:
        if self.progress:
            elapsed = self._elapsed()
            eta = max(0.0, self._end() - self.clock())
            self.progress.update(
                index, len(self.jobs), job=job, states=states, precision_now=worst, elapsed=elapsed, eta=eta
            )
