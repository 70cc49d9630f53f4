"""The barrier: a block executor for vmtax scale's rounds.  Every turn's
process (an agent with --go, or a workload's tool held by vmtax-shell)
starts held (Target.hold: a handle the engine alone drives), sets up,
says it is ready (protocol.ready) and waits; once every one is, all are
released at once (Held.go) and read to their end, each in a thread of its
own.  Over the round it reads the host's CPU utilisation (/proc/stat,
every CPU) and, right after the release, each target's host memory.
Then each turn's process is read and recorded from the lines it gave
(Turn.run over execute.Lines.read_before), as any other process is."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

from ..errors import TargetError
from ..hostproc import host_cpu_times, pss_mb
from ..model import BenchSpec
from ..proc import ChildFailed
from ..targets.base import Held, Target
from .blocks import Turn
from .execute import Lines
from .protocol import ready

Event = tuple[str, int, BaseException | None]  # ("ready" | "end", the turn's index, how it ended)


@dataclass
class RoundResult:
    lines: list[list[tuple[float, str]]]  # per turn: (arrival time, line), its ready line left out
    reached: list[bool]  # whether each got to the barrier (else: skipped, say)
    host_cpu_pct: float | None
    seconds: float  # from the go to the last process's end
    host_mem_mib: list[float]
    started: float  # wall-clock time of the go


class Barrier:
    """Every turn's process held at the barrier, all released at once
    (run_round); then each turn reads and records its own (Turn.run).
    tool: the turns run a workload's tool; memory: read each target's host
    memory after the release.  After run(), `round` says how it went."""

    def __init__(self, spec: BenchSpec, tool: bool, timeout: float, memory: bool = True):
        self.spec, self.tool, self.timeout, self.memory = spec, tool, timeout, memory
        self.round: RoundResult | None = None

    def run(self, turns: list[Turn]) -> None:
        argv = []
        for turn in turns:
            assert turn.argv is not None, "a held process's turn"
            argv.append(turn.argv())
        self.round = res = run_round([t.target for t in turns], argv, self.spec, self.tool, self.timeout, self.memory)
        for turn, got in zip(turns, res.lines, strict=True):
            turn.run(Lines.read_before(got, res.started))


def run_round(
    targets: list[Target], argv: list[list[str]], spec: BenchSpec, tool: bool, timeout: float, memory: bool = True
) -> RoundResult:
    """Every target runs its argv held at the barrier; once all are ready,
    all are released at once.  TargetError naming the target at the first
    failure of any (the caller stops them all).  memory: read each
    target's host memory just after the release."""
    held = _Held(targets, spec, tool)
    for i in range(len(targets)):
        threading.Thread(target=held.work, args=(i, argv[i], timeout), daemon=True).start()
    deadline = time.monotonic() + timeout
    held.wait(set(range(len(targets))), deadline, "reach the barrier")  # every one ready, or ended (a skip)
    busy0, total0 = host_cpu_times()
    t0, started = time.monotonic(), time.time()
    held.release()
    # while they run; the warmup sample absorbs what reading it costs
    mem = [pss_mb(t.host_pids()) for t in targets] if memory else []
    held.wait(set(range(len(targets))) - held.ended, deadline, "finish its round", until="end")
    seconds = time.monotonic() - t0
    busy1, total1 = host_cpu_times()
    cpu = 100.0 * (busy1 - busy0) / (total1 - total0) if total1 > total0 else None
    return RoundResult(held.lines, held.reached, cpu, seconds, mem, started)


class _Held:
    """A round's processes as their threads read them: each one's lines
    (its ready line aside), whether it reached the barrier, its handle,
    and the events the coordinator waits on."""

    def __init__(self, targets: list[Target], spec: BenchSpec, tool: bool):
        self.targets, self.spec, self.tool = targets, spec, tool
        n = len(targets)
        self.lines: list[list[tuple[float, str]]] = [[] for _ in range(n)]
        self.reached = [False] * n
        self.gates: list[Held | None] = [None] * n  # each process's handle, once started
        self.events: queue.Queue[Event] = queue.Queue()
        self.ended: set[int] = set()

    def work(self, i: int, argv: list[str], timeout: float) -> None:
        """One process, started held and read to its end (a thread's)."""
        error = None
        try:
            handle = self.gates[i] = self.targets[i].hold(argv, timeout, tool=self.tool)
            for line in handle.lines:
                if not self.reached[i] and ready(line, self.spec, self.tool):
                    self.reached[i] = True
                    self.events.put(("ready", i, None))
                else:
                    self.lines[i].append((time.time(), line))
        except BaseException as e:  # told to the coordinator
            error = e
        self.events.put(("end", i, error))

    def wait(self, waiting: set[int], deadline: float, what: str, until: str = "ready") -> None:
        """Until every one waited for is ready (until="ready": or ended) or
        ended; TargetError at the first failure, or past the deadline."""
        while waiting:
            kind, i, error = _next(self.events, deadline, self.targets, what)
            _fail_on(error, i, self.targets)
            if kind == "end":
                self.ended.add(i)
            if kind == "end" or until == "ready":
                waiting.discard(i)

    def release(self) -> None:
        """Every process that reached the barrier and runs still, let go at once."""
        for i, gate in enumerate(self.gates):
            if self.reached[i] and i not in self.ended and gate is not None:
                gate.go()


def _next(events: queue.Queue[Event], deadline: float, targets: list[Target], what: str) -> Event:
    try:
        return events.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        raise TargetError(f"an instance of {targets[0].name} did not {what} in time") from None


def _fail_on(error: BaseException | None, i: int, targets: list[Target]) -> None:
    if error is None:
        return
    what = f"its agent {error}" if isinstance(error, ChildFailed) else error
    raise TargetError(f"instance {i + 1} of {len(targets)} ({targets[i].name}) failed: {what}")
