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

This module knows nothing of the runner: it runs one block's processes,
held, stepped and read concurrently, and hands each sample to the caller.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .agent import events
from .errors import AgentError, TargetError
from .model import BenchSpec
from .proc import ChildFailed

if TYPE_CHECKING:
    from .targets.base import Target

STEP = "step"  # the capability of a target whose agent can be held sample by sample (Target.step)
STEP_TIMEOUT = 30.0  # seconds a step may take, its go to its sample line, before its side is dropped
STRAY_LINES = 8  # lines a step may read besides its sample (blank, or of a type it waits for none of)
HUNG_AFTER = 5.0  # seconds without an answer to a go (a sample takes milliseconds) that make a side hung


@dataclass
class Side:
    """One target's process in a lockstep block."""

    name: str
    target: Target  # one with the "step" capability
    argv: list[str]  # the agent's arguments, --step included (samples: the rounds)
    take: Callable[[dict, float], None]  # each sample line's fields, and when it arrived
    error: str = ""  # why it stopped taking part ('' while it does)
    skipped: str = ""  # the agent's reason, where it skipped the benchmark
    iters: int | None = None
    first: float | None = None  # when its first line arrived
    samples: int = 0  # samples taken
    finished: bool = False  # the agent said done
    overheads: list[float] = field(default_factory=list)  # seconds from each go to its sample line,
    #                                                       the sample's own time less: the go's round trip
    process: int = -1  # the caller's process id and start time, for its record
    started: float = 0.0
    hung: bool = False  # it did not answer a go for HUNG_AFTER seconds or more (error says how long)
    stray: int | None = None  # lines read besides the awaited one in this step (None: not counted)
    _lines: queue.Queue = field(default_factory=queue.Queue)
    _thread: threading.Thread | None = None

    @property
    def live(self) -> bool:
        return not self.error and not self.skipped


class _End:
    """The end of a side's lines: how it ended (an exception, or None)."""

    def __init__(self, exc: BaseException | None):
        self.exc = exc


def _pump(side: Side, lines: Iterator[str]) -> None:
    """A side's lines into its queue, until they end or the side is
    dropped: then no more are read (a side flooding its output costs no
    memory), and the process ends with its lines (closed)."""
    try:
        for line in lines:
            if side.error:
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


def _next_event(side: Side, spec: BenchSpec, deadline: float):
    """The next protocol event of one side (agent.events checks each line),
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
        evs = list(events([item], spec))
        side.first = side.first or time.time()
        if evs and evs[0].kind in ("sample", "done", "skip"):
            return evs[0]
        _stray(side, item)
        if evs:
            return evs[0]


def _stray(side: Side, line: str) -> None:
    """Count a line a step read besides its answer: AgentError past STRAY_LINES."""
    if side.stray is None:
        return
    side.stray += 1
    if side.stray > STRAY_LINES:
        raise AgentError(f"more than {STRAY_LINES} lines after a go that are no sample (one: {line[:60]!r})")


def _fail(side: Side, e: BaseException) -> None:
    side.error = f"agent {e}" if isinstance(e, ChildFailed) else str(e) or type(e).__name__


def _wait_for(side: Side, spec: BenchSpec, kinds: tuple[str, ...], deadline: float):
    """Read one side until an event of these kinds; None where the side
    ended, skipped or failed first (its error or skip then says why)."""
    began = time.monotonic()
    try:
        while True:
            ev = _next_event(side, spec, deadline)
            if ev is None:
                if not side.skipped:
                    side.error = side.error or "the agent stopped without finishing"
                return None
            if ev.kind == "calibration" and side.iters is None and ev.instance == 0:
                side.iters = ev.iters
            elif ev.kind == "skip":
                side.skipped = ev.reason
            elif ev.kind == "done":
                side.finished = True
                if "done" not in kinds:
                    side.error = side.error or "the agent stopped before its last sample"
                    return None
            if ev.kind in kinds:
                return ev
            if side.skipped:
                return None
    except TimeoutError:
        waited = time.monotonic() - began
        side.hung = "sample" in kinds and waited >= HUNG_AFTER  # a start (calibrating) may take long
        what = "its go" if "sample" in kinds else "its start" if "ready" in kinds else "its end"
        side.error = f"{side.name} did not answer {what} within {waited:.1f} s"
    except (AgentError, TargetError, ChildFailed) as e:
        _fail(side, e)
    return None


def round_order(rng: random.Random, sides: list[int], visits: dict[int, int] | None = None) -> list[int]:
    """One round: every side's turn (its visits' samples, back to back:
    plan.step_visits), the turns in an order drawn at random.  Every side
    is treated alike, the baseline too: with the baseline in a pair with
    each candidate in turn, it took two samples a round for two
    candidates, and on rows that keep a working set warm (tlb_4k,
    page_fault, ctx_16p) its more frequent samples found caches warmer: an
    A/A candidate read 1.31-1.37 times the baseline on tlb_4k and tlb_2m
    (results/lockstep-cloud.md).  Sides alike get as many visits as each
    other."""
    turns = list(sides)
    rng.shuffle(turns)
    return [i for i in turns for _ in range((visits or {}).get(i, 1))]


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
    ready, then steps them round by round (round_order), each sample
    handed to its side's take() while the next one runs (a store's write
    is not in the time between a sample and the next go).  A side that
    fails, skips or falls silent stops taking part (its error or skip says
    why) and the others go on.
    `timeout` bounds each process from its start to its end, as a process
    run in turn is bounded (a target gone silent is given up then).
    Every process has ended, or been let go, when this returns: a side
    that does not end when let go is waited for 10 s at most, never past
    `timeout` (its process is stopped there)."""
    end = time.monotonic() + timeout
    for s in rng.sample(sides, len(sides)):  # started in an order drawn at random, as each round is
        try:
            lines = s.target.run_gated(s.argv, timeout=timeout)
        except (TargetError, AgentError) as e:
            _fail(s, e)
            continue
        s._thread = threading.Thread(target=_pump, args=(s, lines), daemon=True)
        s._thread.start()
    each = dict(enumerate(visits or [1] * len(sides)))
    taken: list[tuple[Side, dict, float]] = []  # samples come in, not yet handed to take()
    try:
        ready = time.monotonic() + timeout
        for s in sides:
            if s.live and _wait_for(s, spec, ("ready",), ready) is None:
                pass  # its error or skip says why
        for _ in range(rounds):
            if not sides[0].live or not any(s.live for s in sides[1:]):
                break  # no baseline, or no candidate: no pair left
            for i in round_order(rng, [i for i, s in enumerate(sides) if s.live], each):
                if sides[i].live:
                    _step(sides[i], spec, step_timeout(), taken)
        _hand(taken)
        for i, s in enumerate(sides):  # a side that took all its samples ends of itself
            if s.live and s.samples == rounds * each[i]:
                _wait_for(s, spec, ("done",), time.monotonic() + step_timeout())
    finally:  # the others, held at a go that will not come, are let go
        try:
            _hand(taken)
        finally:
            for s in sides:
                _close(s, end)


def _hand(taken: list[tuple[Side, dict, float]]) -> None:
    """Each sample come in to its side's take(), in the order they came."""
    while taken:
        side, f, t = taken.pop(0)
        side.take(f, t)


def _step(side: Side, spec: BenchSpec, timeout: float, taken: list[tuple[Side, dict, float]]) -> None:
    """A warm line and a go line to a side, then its sample (put in taken).
    The samples come in before it are handed to take() (stored) while it
    runs, not between a sample and the next go.  Its overhead: the round
    trip, less twice the sample's time (the untimed one and the timed
    one)."""
    went = time.monotonic()
    try:
        side.target.step(warm=True)
    except TargetError as e:
        _fail(side, e)
        return
    _hand(taken)
    side.stray = 0
    try:
        ev = _wait_for(side, spec, ("sample",), went + timeout)
    finally:
        side.stray = None
    if ev is None:
        return
    f = dict(ev.fields)
    sample_s = f["value"] * f["ops"] / 1e9
    side.overheads.append(max(0.0, time.monotonic() - went - 2 * sample_s))
    side.samples += 1
    taken.append((side, f, time.time()))


def _close(side: Side, end: float) -> None:
    """Let a side's process end: its lines are read to their end (a
    process still held is let go by its target: Target.release), for 10 s
    at most and never past `end`."""
    t = side._thread
    if t is None:
        return
    if t.is_alive():
        try:
            side.target.release()
        except TargetError:
            pass
        t.join(timeout=max(0.0, min(10.0, end - time.monotonic())))
    side._thread = None
