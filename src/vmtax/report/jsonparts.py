"""The pieces of vmtax's JSON documents that more than one part of a
document carries: two modes, a stratum's ratio, the host's state, metrics'
ratios."""

from __future__ import annotations

from ..model import HostState, Modes, Stratum
from .units import json_number


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
        "ratio": json_number(s.ratio),
        "ci_low": json_number(s.ci_low),
        "ci_high": json_number(s.ci_high),
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
        "change": json_number(h.change),
        "change_ci_low": json_number(h.change_low),
        "change_ci_high": json_number(h.change_high),
        "moved": h.moved,
    }


def metric_ratios(metrics: dict) -> dict:
    """name -> {ratio, ci_low, ci_high} of a comparison's metrics."""
    return {
        name: {"ratio": json_number(r), "ci_low": json_number(lo), "ci_high": json_number(hi)}
        for name, (r, lo, hi) in metrics.items()
    }
