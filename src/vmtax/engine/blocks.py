"""How a block's processes are run: the runner (runner.py) schedules
blocks and draws each one's order; a BlockExecutor runs the block's turns.
Each turn carries its agent's arguments, and its run() reads and records
its process (execute.run_process) from the Lines the executor gives it
(None: it opens its own).  Three executors: InTurn (here: one process at
a time on each machine, in the order drawn, machines at once), Lockstep
(lockstep.py: every side's process held at once, their samples
alternated) and Barrier (barrier.py: scale's copies released together)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from ..targets.base import Target
from .execute import Lines
from .writer import ThreadRelay


@dataclass(frozen=True)
class Turn:
    """One process of a block: its slot in the order drawn, its target, and
    run(lines) measuring it -- with the lines given, or (None) opening its
    own.  argv(): the agent process's arguments (None: a tool's runs, which
    open their own)."""

    slot: int
    target: Target
    run: Callable[[Lines | None], None]
    argv: Callable[[], list[str]] | None = None


class BlockExecutor(Protocol):
    def run(self, turns: list[Turn]) -> None: ...


class InTurn:
    """Each turn in the order drawn.  Targets on different machines
    (Target.host_machine: other hosts over ssh) do not share CPUs, so each
    machine's turns run at the same time as the others', in a thread of
    its own, their writes handed to this thread (ThreadRelay); on one
    machine, one at a time.  With every target on this machine it is a
    plain loop; so it is for a workload (together=False: the host CPU a
    local tool used is read from this process's reaped children, which the
    other machines' ssh clients would join)."""

    def __init__(self, relay: ThreadRelay | None, together: bool = True):
        self.relay, self.together = relay, together

    def run(self, turns: list[Turn]) -> None:
        lanes: dict[str, list[Turn]] = {}
        for turn in turns:
            lanes.setdefault(turn.target.host_machine(), []).append(turn)
        if len(lanes) == 1 or not self.together or self.relay is None:
            for turn in turns:
                turn.run(None)
            return
        self.relay.serve([partial(_run_all, lane) for lane in lanes.values()])


def _run_all(turns: list[Turn]) -> None:
    """One machine's turns, one at a time (a lane of InTurn.run)."""
    for turn in turns:
        turn.run(None)
