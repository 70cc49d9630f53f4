"""Lockstep pairs: the samples of a block's processes, a millisecond apart.

The host's own noise moves within milliseconds: two samples of one
operation 1 ms apart differ far less than two 100 ms apart (`vmtax doctor`
measures it: noise_by_distance).  So a lockstep block starts the
baseline's and every candidate's fresh agent process together (`--step`:
each holds before every sample until it gets a go line), then runs rounds:
in each, every process takes its turn, in an order drawn at random, back
to back: one sample (a quick one beside far slower ones several, in a
row: plan.step_visits).  The baseline's sample and a candidate's of one round are then
milliseconds apart and share the host's state, and the block's ratio of
means (analysis.block_means, as for any block) holds what both sides met
alike only once.  Every side is treated alike (round_order), so that an
A/A pair stays exchangeable, as the sign-flip test over blocks asks.  The
interval stays over blocks of fresh processes (what differs between
processes still counts).

Every timed sample comes right after an untimed one (the agent's "warm"
line, sent with its go).  After another process's turn the caches and TLB
are cold, and a sample timed then cost up to 24% more than one after its
own (tlb_4k, mmap, fork_exec on the cloud host; tlb_2m up to 50%): without
the warm batch a side of eight visits a round read warmer than a side of
one, whatever the tax (an A/A twin given two visits beside its baseline's
one read tlb_4k 7.6% quicker, within an interval of +-0.5%; a warm batch of
a quarter of a sample still left it 8% apart).  And after its own sample
and the go's round trip, the CPU idle meanwhile, a sample cost more again
where that trip was long: a container's segv 1.15-1.35 times its first
sample of a turn, a TCG guest's stat 1.10, UML's 1.07, the bare machine's
none (tools/turns.py --positions).  Warmed, every timed sample follows its
own process's work, back to back, as in a block of processes run in turn.

Lockstep is a block executor (blocks.BlockExecutor): it starts each
turn's agent held (Target.hold: a handle the engine alone drives), steps
the processes round by round, reading each with the one reader
(protocol.AgentReader), and when the block has ended hands each turn the
lines its process gave, with when each arrived and how it ended
(execute.Lines.read_before): the turn's process is then read and
recorded as any other (execute.run_process).  It knows nothing of the
runner.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..errors import AgentError, TargetError
from ..model import BenchSpec
from ..proc import ChildFailed
from ..targets.base import Held, Target
from .blocks import Turn
from .execute import Hung, Lines
from .protocol import AgentRead, AgentReader, Event

STEP = "step"  # the capability of a target whose agent can be held sample by sample (Target.step)
STEP_TIMEOUT = 30.0  # seconds a step may take, its go to its sample line, before its side is dropped
STRAY_LINES = 8  # lines a step may read besides its sample (blank, or of a type it waits for none of)
HUNG_AFTER = 5.0  # seconds without an answer to a go (a sample takes milliseconds) that make a side hung


@dataclass
class Side:
    """One target's process in a lockstep block: the lines read of it
    (each with when it arrived), what its reader made of them, and why it
    stopped taking part (error: None while it does)."""

    name: str
    target: Target  # one with the "step" capability
    argv: list[str]  # the agent's arguments, --step included (samples: the rounds)
    reader: AgentReader
    error: BaseException | None = None
    started: float = 0.0  # when its process was started (wall clock)
    got: list[tuple[float, str]] = field(default_factory=list)  # the lines read, each with its arrival
    samples: int = 0  # samples taken
    overheads: list[float] = field(default_factory=list)  # seconds from each go to its sample line,
    #                                                       the sample's own time less: the go's round trip
    hung: bool = False  # it did not answer a go for HUNG_AFTER seconds or more (error says how long)
    stray: int | None = None  # lines read besides the awaited one in this step (None: not counted)
    held: Held | None = None
    _lines: queue.Queue[str | _End] = field(default_factory=queue.Queue)
    _thread: threading.Thread | None = None

    @property
    def read(self) -> AgentRead:
        return self.reader.read

    @property
    def why(self) -> str:
        """Its error as its process's row says it ('' while none)."""
        e = self.error
        return "" if e is None else f"agent {e}" if isinstance(e, ChildFailed) else str(e)

    @property
    def live(self) -> bool:
        return self.error is None and not self.read.skipped

    def lines(self) -> Lines:
        """What its process gave, for its turn to read and record: the
        lines read, then its error (an exception at their end; none: it
        did its part, though let go before its last sample)."""
        return Lines.read_before(self.got, self.started, self.error, judged=True)


class _End:
    """The end of a side's lines: how it ended (an exception, or None)."""

    def __init__(self, exc: BaseException | None):
        self.exc = exc


class Lockstep:
    """A block executor: the turns' agent processes held together and
        stepped in rounds (run_block), then each turn's process read and
        recorded from the lines it gave (Turn.run).  Every turn carries its
        argv (--step and its samples included); visits: each turn's samples
        a round.  overheads (latency, where given): each target's go-to-sample
    times, its blocks' appended."""

    def __init__(
        self,
        spec: BenchSpec,
        rounds: int,
        rng: random.Random,
        step_timeout: Callable[[], float],
        timeout: float,
        visits: list[int] | None = None,
        latency: dict[str, list[float]] | None = None,
    ):
        self.spec, self.rounds, self.rng, self.visits = spec, rounds, rng, visits
        self.step_timeout, self.timeout = step_timeout, timeout
        self.overheads = latency if latency is not None else {}

    def run(self, turns: list[Turn]) -> None:
        sides = []
        for turn in turns:
            assert turn.argv is not None, "an agent process's turn"
            sides.append(Side(turn.target.name, turn.target, turn.argv(), AgentReader(self.spec)))
        try:
            run_block(sides, self.spec, self.rounds, self.rng, self.step_timeout, self.timeout, visits=self.visits)
        except KeyboardInterrupt:  # what was measured is kept: every side's lines so far, then the interrupt
            self._record(turns, sides)
            raise
        self._record(turns, sides)

    def _record(self, turns: list[Turn], sides: list[Side]) -> None:
        for turn, side in zip(turns, sides, strict=True):
            self.overheads.setdefault(side.name, []).extend(side.overheads)
            turn.run(side.lines())


def _pump(side: Side, lines: Iterator[str]) -> None:
    """A side's lines into its queue, until they end or the side is
    dropped: then no more are read (a side flooding its output costs no
    memory), and the process ends with its lines (closed)."""
    try:
        for line in lines:
            if side.error is not None:
                break
            side._lines.put(line)
        side._lines.put(_End(None))
    except BaseException as e:  # handed to the stepping thread
        side._lines.put(_End(e))
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # a channel's drain that failed: its target says so at its next command
                pass


def _next_event(side: Side, deadline: float) -> Event | None:
    """The next protocol event of one side (its reader checks each line),
    None at the end of its lines; TimeoutError past the deadline."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:  # lines still coming past it (a flood) do not hold the step
            raise TimeoutError
        try:
            item = side._lines.get(timeout=left)
        except queue.Empty:
            raise TimeoutError from None
        if isinstance(item, _End):
            if item.exc is not None:
                raise item.exc
            return None
        side.got.append((time.time(), item))
        ev = side.reader.feed(item)
        if ev is not None and ev.kind in ("sample", "done", "skip"):
            return ev
        _stray(side, item)
        if ev is not None:
            return ev


def _stray(side: Side, line: str) -> None:
    """Count a line a step read besides its answer: AgentError past STRAY_LINES."""
    if side.stray is None:
        return
    side.stray += 1
    if side.stray > STRAY_LINES:
        raise AgentError(f"more than {STRAY_LINES} lines after a go that are no sample (one: {line[:60]!r})")


def _wait_for(side: Side, kinds: tuple[str, ...], deadline: float) -> Event | None:
    """Read one side until an event of these kinds; None where the side
    ended, skipped or failed first (its error or skip then says why)."""
    began = time.monotonic()
    try:
        while True:
            ev = _next_event(side, deadline)
            if ev is None:
                if not side.read.skipped and side.error is None:
                    side.error = AgentError("the agent stopped without finishing")
                return None
            if ev.kind == "done" and "done" not in kinds:
                side.error = side.error or AgentError("the agent stopped before its last sample")
                return None
            if ev.kind in kinds:
                return ev
            if side.read.skipped:
                return None
    except TimeoutError:
        waited = time.monotonic() - began
        hung = "sample" in kinds and waited >= HUNG_AFTER  # a start (calibrating) may take long
        what = "its go" if "sample" in kinds else "its start" if "ready" in kinds else "its end"
        why = f"{side.name} did not answer {what} within {waited:.1f} s"
        side.error, side.hung = (Hung(why) if hung else TargetError(why)), hung
    except (AgentError, TargetError, ChildFailed) as e:
        side.error = e
    return None


def round_order(rng: random.Random, sides: list[int], visits: dict[int, int] | None = None) -> list[int]:
    """One round: every side's turn (its visits' samples, back to back:
    plan.step_visits), the turns in an order drawn at random.  Every side
    is treated alike, the baseline too: with the baseline in a pair with
    each candidate in turn, it took two samples a round for two
    candidates, and on rows that keep a working set warm its more
    frequent samples found caches warmer (results/lockstep-cloud.md).
    Sides alike get as many visits as each other."""
    turns = list(sides)
    rng.shuffle(turns)
    return [i for i in turns for _ in range((visits or {}).get(i, 1))]


def _start(sides: list[Side], rng: random.Random, timeout: float) -> None:
    """Every side's process started held (in an order drawn at random, as
    each round is), its lines pumped into its queue by a thread."""
    for s in rng.sample(sides, len(sides)):
        s.started = time.time()
        try:
            s.held = s.target.hold(s.argv, timeout=timeout)
        except (TargetError, AgentError) as e:
            s.error = e
            continue
        s._thread = threading.Thread(target=_pump, args=(s, s.held.lines), daemon=True)
        s._thread.start()


def run_block(
    sides: list[Side],
    spec: BenchSpec,
    rounds: int,
    rng: random.Random,
    step_timeout: Callable[[], float],
    timeout: float,
    visits: list[int] | None = None,
) -> None:
    """One lockstep block: sides[0] the baseline, the others candidates,
    each an agent process started with --step and `rounds` samples (times
    its visits a round, where given), warmups included.  Starts every
    process at once (in an order drawn at random), waits until each is
    ready, then steps them round by round (round_order).  A side that
    fails, skips or falls silent stops taking part (its error or skip says
    why) and the others go on.
    `timeout` bounds each process from its start to its end, as a process
    run in turn is bounded (a target gone silent is given up then).
    Every process has ended, or been let go, when this returns: a side
    that does not end when let go is waited for 10 s at most, never past
    `timeout` (its process is stopped there)."""
    end = time.monotonic() + timeout
    _start(sides, rng, timeout)
    each = dict(enumerate(visits or [1] * len(sides)))
    try:
        ready = time.monotonic() + timeout
        for s in sides:
            if s.live:
                _wait_for(s, ("ready",), ready)  # None: its error or skip says why
        for _ in range(rounds):
            if not sides[0].live or not any(s.live for s in sides[1:]):
                break  # no baseline, or no candidate: no pair left
            for i in round_order(rng, [i for i, s in enumerate(sides) if s.live], each):
                if sides[i].live:
                    _step(sides[i], step_timeout())
        for i, s in enumerate(sides):  # a side that took all its samples ends of itself
            if s.live and s.samples == rounds * each[i]:
                _wait_for(s, ("done",), time.monotonic() + step_timeout())
    finally:  # the others, held at a go that will not come, are let go
        for s in sides:
            _close(s, end)


def _step(side: Side, timeout: float) -> None:
    """A warm line and a go line to a side, then its sample.  Its
    overhead: the round trip, less twice the sample's time (the untimed
    one and the timed one)."""
    went = time.monotonic()
    assert side.held is not None, "a side started"
    try:
        side.held.step(warm=True)
    except TargetError as e:
        side.error = e
        return
    side.stray = 0
    try:
        ev = _wait_for(side, ("sample",), went + timeout)
    finally:
        side.stray = None
    if ev is None:
        return
    sample_s = ev.fields["value"] * ev.fields["ops"] / 1e9
    side.overheads.append(max(0.0, time.monotonic() - went - 2 * sample_s))
    side.samples += 1


def _close(side: Side, end: float) -> None:
    """Let a side's process end: its lines are read to their end (a
    process still held is let go by its target: Held.release), for 10 s
    at most and never past `end`."""
    t = side._thread
    if t is None or side.held is None:
        return
    if t.is_alive():
        try:
            side.held.release()
        except TargetError:
            pass
        t.join(timeout=max(0.0, min(10.0, end - time.monotonic())))
    side._thread = None
