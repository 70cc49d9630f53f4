"""Whether a candidate's tax moves with the host's state: its ratio over the
blocks in which the host ran slow against those in which it ran quick, the
host's state read from the baseline's processes in the blocks just before
and after.  Pure.

A lockstep block's sides share the host's state, so the ratio cancels a
state that slows both alike; a target whose own cost grows more than the
baseline's when the host is slow (a TCG guest's emulated instructions when a
busy neighbour shares the core's caches) has a ratio that moves with the
state, and its blocks differ beyond their samples' scatter: the interval
over blocks holds that as well as the noise.

The state of a block is read from the baseline's level in the row's
neighbouring blocks (STATE_NEIGHBOURS each side, in the order they ran:
the runner numbers a row's blocks so), never from the block's own
processes: a process's own offset would be in its level and in its ratio
both, and would make a change of nothing (a fresh process that ran slow
reads as a slow host and lowers its block's ratio).  Other processes' offsets
and noise are independent of the block's, so with a tax the state leaves
alone the halves differ only by chance.  A host state that lasts less than
a block or two is seen less, which costs power, never the error rate."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import stats as sst

from ..model import HostState, Interval
from .summary import CONFIDENCE, t_quantile, welch_df

STATE_MIN_BLOCKS = 8  # a row's blocks a split needs (3 a half at the least)
STATE_NEIGHBOURS = 1  # the baseline's blocks each side of a block that read its state
STATE_CHANCE = 0.001  # a candidate's rows together: the p below which its tax is said to move


def _level(xs: Sequence[float]) -> float | None:
    """The log of a block's mean; None where a value is not finite and positive."""
    if not xs or not all(math.isfinite(x) and x > 0 for x in xs):
        return None
    return math.log(statistics.fmean(xs))


def _blocks(
    base: Mapping[int, Sequence[float]], cand: Mapping[int, Sequence[float]], slower: float
) -> tuple[list[float], list[float]]:
    """Each block's log ratio and the host's state around it (the baseline's
    mean log level in its neighbouring blocks, times `slower`: higher is a
    slower host), over the blocks with both sides and a neighbour."""
    levels = {k: lv for k in sorted(base) if (lv := _level(base[k])) is not None}
    order = list(levels)
    at = {k: i for i, k in enumerate(order)}
    lr, state = [], []
    for k in sorted(cand.keys() & levels.keys()):
        c = _level(cand[k])
        i = at[k]
        near = range(max(0, i - STATE_NEIGHBOURS), min(len(order), i + STATE_NEIGHBOURS + 1))
        around = [levels[order[j]] for j in near if j != i]
        if c is None or not around:
            continue
        lr.append(c - levels[k])
        state.append(slower * statistics.fmean(around))
    return lr, state


def host_state(
    base: Mapping[int, Sequence[float]],
    cand: Mapping[int, Sequence[float]],
    higher_is_better: bool = False,
    confidence: float = CONFIDENCE,
) -> HostState | None:
    """A row's blocks (block -> its timed samples, each side) split at the
    median of the host's state (the mean log level of the baseline in the
    neighbouring blocks; for a throughput, a lower one is a slower host),
    the ratio of means in each half, and the slow half's over the quick
    half's with Welch's interval over their blocks' log ratios.  Blocks at
    the median itself count in neither half.  None where fewer than
    STATE_MIN_BLOCKS blocks have both sides and a neighbour, or a half has
    fewer than 3."""
    lr, state = _blocks(base, cand, -1.0 if higher_is_better else 1.0)
    if len(lr) < STATE_MIN_BLOCKS:
        return None
    cut = statistics.median(state)
    quick = [x for x, s in zip(lr, state, strict=True) if s < cut]
    slow = [x for x, s in zip(lr, state, strict=True) if s > cut]
    if len(quick) < 3 or len(slow) < 3:
        return None
    sq, ss = statistics.variance(quick) / len(quick), statistics.variance(slow) / len(slow)
    d = statistics.fmean(slow) - statistics.fmean(quick)
    se = math.sqrt(sq + ss)
    df = welch_df(sq, len(quick), ss, len(slow))
    h = t_quantile(df, confidence) * se
    return HostState(
        blocks=len(quick) + len(slow),
        quick=math.exp(statistics.fmean(quick)),
        slow=math.exp(statistics.fmean(slow)),
        ci=Interval(math.exp(d), math.exp(d - h), math.exp(d + h), confidence),
        z=_as_normal(d / se, df) if se > 0 else 0.0,
    )


def _as_normal(t: float, df: float) -> float:
    """The standard normal quantile at Student's t's tail probability (so a
    few blocks' t, heavy in its tails, adds to stats.tax_moves as a z would)."""
    return max(-40.0, min(40.0, float(sst.norm.isf(sst.t.sf(t, df)))))


def tax_moves(rows: Sequence[tuple[HostState, bool]]) -> float:
    """Two-sided p that a candidate's tax, over its rows (each's HostState
    and whether its benchmark is a throughput), does not move with the
    host's state: Stouffer's z over the rows' z, each signed as a tax (a
    throughput's ratio falls where its tax grows).  The rows of one run
    share the host's states, so their z are not quite independent; how often
    the machine against itself falls below STATE_CHANCE is measured in
    results/precision.md."""
    if not rows:
        return 1.0
    z = sum(-h.z if higher else h.z for h, higher in rows) / math.sqrt(len(rows))
    return float(2 * sst.norm.sf(abs(z)))


@dataclass(frozen=True)
class TaxMoves:
    """A candidate's rows together (tax_summary): how many rows' tax was
    higher and lower in the host's slow half (each at the 5% level), each
    row's change of tax, their median and tax_moves's p."""

    up: int
    down: int
    changes: list[float]
    median: float
    p_value: float


def tax_summary(rows: Sequence[tuple[HostState, bool]]) -> TaxMoves:
    """What the board's line and tools/turns.py say of a candidate's rows
    (each's HostState and whether its benchmark is a throughput)."""
    changes = [tax_change(h, higher) for h, higher in rows]
    moved = [x for (h, _), x in zip(rows, changes, strict=True) if h.moved]
    return TaxMoves(
        up=sum(1 for x in moved if x > 1),
        down=sum(1 for x in moved if x < 1),
        changes=changes,
        median=math.exp(statistics.median(math.log(x) for x in changes)) if changes else 1.0,
        p_value=tax_moves(rows),
    )


def tax_change(h: HostState, higher_is_better: bool) -> float:
    """The slow half's tax over the quick half's: the change of the ratio,
    inverted for a throughput (whose ratio falls as its tax grows)."""
    return 1 / h.change if higher_is_better else h.change
