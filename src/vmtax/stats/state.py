"""Whether a candidate's tax moves with the host's state: its ratio over the
blocks in which the baseline ran slower than its median against those in
which it ran quicker.  Pure.

A lockstep block's sides share the host's state, so the ratio cancels a
state that slows both alike; a target whose own cost grows more than the
baseline's when the host is slow (a TCG guest's emulated instructions when a
busy neighbour shares the core's caches) has a ratio that moves with the
state, and its blocks differ beyond their samples' scatter: the interval
over blocks holds that as well as the noise.  The state is read from the
baseline's odd samples of each block and its ratio taken against its even
ones, so a sample's own noise is not in both.  The halves are cut at the
median, not at the state: where the slow state held more or fewer than half
the blocks, a half holds some of the other's, and the change is understated,
never made up."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from ..model import HostState
from .summary import CONFIDENCE, t_quantile

STATE_MIN_BLOCKS = 8  # blocks a split needs (3 a half at the least)
STATE_BASE_SAMPLES = 4  # the baseline's samples a block needs (two to read its state, two for the ratio)


def host_state(
    base: Mapping[int, Sequence[float]],
    cand: Mapping[int, Sequence[float]],
    higher_is_better: bool = False,
    confidence: float = CONFIDENCE,
) -> HostState | None:
    """The split of a row's blocks by the baseline's level (block -> its
    timed samples in time order, each side); None where fewer than
    STATE_MIN_BLOCKS blocks hold STATE_BASE_SAMPLES of the baseline's and
    one of the candidate's, or the values are not all positive.  The
    change's interval is Welch's over the two halves' block log ratios."""
    blocks = [
        k
        for k in sorted(base.keys() & cand.keys())
        if len(base[k]) >= STATE_BASE_SAMPLES and len(cand[k]) >= 1 and min(*base[k], *cand[k]) > 0
    ]
    if len(blocks) < STATE_MIN_BLOCKS:
        return None
    slower = -1.0 if higher_is_better else 1.0  # a higher level is a slower host
    level, lr = [], []
    for k in blocks:
        b, c = base[k], cand[k]
        level.append(slower * math.log(statistics.fmean(b[1::2])))
        lr.append(math.log(statistics.fmean(c)) - math.log(statistics.fmean(b[0::2])))
    cut = statistics.median(level)
    quick = [x for x, v in zip(lr, level, strict=True) if v < cut]
    slow = [x for x, v in zip(lr, level, strict=True) if v > cut]
    if len(quick) < 3 or len(slow) < 3:
        return None
    vq, vs = statistics.variance(quick) / len(quick), statistics.variance(slow) / len(slow)
    d = statistics.fmean(slow) - statistics.fmean(quick)
    se = math.sqrt(vq + vs)
    if se > 0:
        df = (vq + vs) ** 2 / (vq**2 / (len(quick) - 1) + vs**2 / (len(slow) - 1))
        h = t_quantile(df, confidence) * se
    else:
        h = 0.0
    return HostState(
        blocks=len(quick) + len(slow),
        quick=math.exp(statistics.fmean(quick)),
        slow=math.exp(statistics.fmean(slow)),
        change=math.exp(d),
        change_low=math.exp(d - h),
        change_high=math.exp(d + h),
    )
