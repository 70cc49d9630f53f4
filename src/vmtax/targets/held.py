"""A process a target holds: started and then driven from outside, at a
barrier (vmtax scale's rounds released at once) or sample by sample (a
lockstep pair's --step).  Holding gives a Target its run_gated, hold, go,
step and release (a kind that can hold overrides them; the others refuse);
Held is the handle the engine's block executors drive."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from ..errors import TargetError

# The first line of a workload's tool held at the barrier (Target.run_gated):
# it waits for its go line (the agent says so with a "ready" line of its own).
GATE = "@@VMTAX-GATE"


class Holding:
    """A target's held processes: none, unless its kind can hold them."""

    name: str
    kind: ClassVar[str]

    def run_gated(self, argv: list[str], timeout: float, tool: bool = False) -> Iterator[str]:
        """Run the agent (argv with --go) or a workload's tool (tool=True)
        held at a barrier, as run_agent/run_tool do: the agent prints its
        "ready" line once set up and calibrated, a tool's first line is
        GATE; either then waits until go() (vmtax scale's synchronized
        start: N targets released at once)."""
        raise TargetError(f"{self.name}: a {self.kind} target cannot hold a run at a barrier")

    def hold(self, argv: list[str], timeout: float, tool: bool = False) -> Held:
        """The process run_gated starts, as a handle: its lines, and the
        go, step and release that drive it (the engine's block executors
        alone call them: engine/lockstep.py, engine/barrier.py)."""
        return Held(self, self.run_gated(argv, timeout, tool=tool))

    def go(self) -> None:
        """Release the run that run_gated holds at the barrier."""
        raise TargetError(f"{self.name}: nothing is held at a barrier")

    def step(self, warm: bool = False) -> None:
        """One more go line to the agent run_gated holds with --step: it
        takes its next sample (lockstep pairs); warm: after an untimed
        one (the line "warm" first)."""
        raise TargetError(f"{self.name}: a {self.kind} target cannot hold an agent sample by sample")

    def release(self) -> None:
        """End the agent run_gated holds with --step before its last
        sample: a line that is not "go" makes it stop (an error of its
        own), and, where the run has ended already, is ignored."""


class Held:
    """A process a target holds at its barrier (Target.hold): its lines,
    read by one thread, and go() (release it at the barrier), step() (one
    more sample of an agent run with --step, after an untimed one where
    warm) and release() (let it end before its last sample), each the
    target's own (a kind's channel may make them fast)."""

    def __init__(self, target: Holding, lines: Iterator[str]):
        self.target, self.lines = target, lines

    def go(self) -> None:
        self.target.go()

    def step(self, warm: bool = False) -> None:
        self.target.step(warm=warm)

    def release(self) -> None:
        self.target.release()
