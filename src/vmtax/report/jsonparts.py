"""The pieces of vmtax's JSON documents that more than one part of a
document carries: an interval, two modes, a stratum's ratio, the host's
state, metrics' ratios."""

from __future__ import annotations

from ..model import HostState, Interval, Modes, Stratum
from .units import json_number


def interval(iv: Interval | None, point: str, prefixed: bool = False) -> dict:
    """An interval as every JSON document spells one: its point under
    `point`, its ends `ci_low` and `ci_high` -- prefixed with the point's
    name and `_` (`ratio_ci_low`) where `prefixed`: in an object that holds
    other figures with intervals of their own (a comparison's strata, its
    host state).  An unbounded end, or a missing interval's, is null."""
    ends = f"{point}_ci" if prefixed else "ci"
    if iv is None:
        return {point: None, f"{ends}_low": None, f"{ends}_high": None}
    return {point: json_number(iv.point), f"{ends}_low": json_number(iv.low), f"{ends}_high": json_number(iv.high)}


def modes_row(m: Modes | None) -> dict | None:
    """Where a row's process means fell in two modes (stats.modes): each
    mode's mean, the slow one's share, and how clearly two."""
    if m is None:
        return None
    return {
        "fast": json_number(m.fast),
        "slow": json_number(m.slow),
        "slow_share": json_number(m.slow_share),
        "processes": m.units,
        "cut": json_number(m.cut),
        "bic_gain": json_number(m.bic_gain),
        "separation": json_number(m.separation),
    }


def stratum(s: Stratum | None, slow: bool = False) -> dict | None:
    """A ratio over some of a row's blocks (model.Stratum): its figures are
    null where the stratum had too few blocks for an interval."""
    if s is None:
        return None
    return {
        **interval(s.ci, "ratio"),
        "p_value": json_number(s.p_value),
        "blocks": s.blocks,
        "of_blocks": s.of_blocks,
        **({"slow_blocks": s.slow_blocks} if slow else {}),
    }  # same_mode's and slow_mode's: of its blocks


def host_state(h: HostState | None) -> dict | None:
    """A comparison's ratio in the host's quick and slow halves
    (stats.host_state); null where its row had too few blocks to split."""
    if h is None:
        return None
    return {
        "blocks": h.blocks,
        "quick_ratio": json_number(h.quick),
        "slow_ratio": json_number(h.slow),
        **interval(h.ci, "change", prefixed=True),
        "moved": h.moved,
    }


def metric_ratios(metrics: dict[str, Interval]) -> dict:
    """name -> {ratio, ci_low, ci_high} of a comparison's metrics."""
    return {name: interval(iv, "ratio") for name, iv in metrics.items()}
