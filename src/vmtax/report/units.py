"""Figures with their units, scaled for people (JSON keeps the base unit)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from ..duration import fmt_duration as fmt_duration  # re-exported: the report's importers keep theirs
from ..duration import parse_duration as parse_duration
from ..model import Interval

_TIME = [("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0)]


def fmt_value(v: float | None, unit: str) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    if unit == "ns":
        for name, scale in _TIME:
            if abs(v) >= scale or name == "ns":
                return f"{sig(v / scale)} {name}"
    return f"{sig(v)} {unit}"


def fmt_rate(v: float | None, unit: str) -> str:
    """A throughput for people, scaled: 1.23 Mops/s (JSON keeps the base unit)."""
    if v is None or not math.isfinite(v):
        return "-"
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{sig(v / scale)} {prefix}{unit}"
    return f"{sig(v)} {unit}"


def fmt_rate_range(mean: float, lo: float, hi: float, unit: str) -> str:
    """mean [lo–hi] in the mean's scale: 2.80 Mops/s [2.73–2.86]."""
    text = fmt_rate(mean, unit)
    if not (math.isfinite(mean) and math.isfinite(lo) and math.isfinite(hi)):
        return text
    scale = next((s for p, s in (("G", 1e9), ("M", 1e6), ("k", 1e3)) if abs(mean) >= s), 1.0)
    return f"{text} [{sig(lo / scale)}–{sig(hi / scale)}]"


def fmt_pair(a: float, b: float, unit: str) -> str:
    """`[a/b unit]` in one scale chosen for the larger, as seed 001 prints;
    each in its own scale when one would round away in the other's."""
    if unit == "ns":
        big, small = max(abs(a), abs(b)), min(abs(a), abs(b))
        for name, scale in _TIME:
            if big >= scale or name == "ns":
                if small / scale < 0.1:
                    return f"[{fmt_value(a, unit)}/{fmt_value(b, unit)}]"
                return f"[{sig(a / scale)}/{sig(b / scale)} {name}]"
    return f"[{sig(a)}/{sig(b)} {unit}]"


def sig(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_ratio2(r: float) -> str:
    """A ratio in a table: two decimals where that shows the difference,
    three significant digits below 0.1 (a TCG cpuid at 0.004 is no '0.00')."""
    if not math.isfinite(r):
        return "-"
    if r < 0.1:
        return f"{r:.3g}"
    return f"{r:.2f}" if r < 10 else f"{r:.1f}" if r < 100 else f"{r:.0f}"


def fmt_ratio3(r: float) -> str:
    """A ratio in a sentence: three decimals, three significant digits below
    0.1 (a TCG guest's cpuid at 0.00172 is no '0.002 [0.002, 0.002]')."""
    return f"{r:.3g}" if abs(r) < 0.1 else f"{r:.3f}"


def fmt_pct(frac: float | None, digits: int = 1) -> str:
    if frac is None or not math.isfinite(frac):
        return "-"
    return f"{frac * 100:.{digits}f}%"


def fmt_goal(frac: float | None) -> str:
    """A precision goal: one decimal, or as many as a goal under 0.1% needs
    (0.0001% is not ±0.0%)."""
    if frac is not None and math.isfinite(frac) and 0 < frac * 100 < 0.1:
        return f"{frac * 100:.2g}%"
    return fmt_pct(frac)


def parse_precision(text: str) -> float:
    """'1%', '0.5%' or '1' (percent) -> a fraction."""
    t = text.strip().rstrip("%")
    try:
        v = float(t)
    except ValueError:
        raise ValueError(f"malformed precision '{text}' (try 1% or 0.5%)") from None
    if not 0 < v < 100:
        raise ValueError(f"precision '{text}' must be between 0% and 100%")
    return v / 100


def json_number(x: object) -> object:
    """A figure as JSON can carry it: NaN and the infinities as null (JSON
    has no such numbers), None as null; anything else as it is."""
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def fmt_interval(
    iv: Interval,
    style: Literal["sentence", "cell", "ends", "width"] = "sentence",
    num: Callable[[float], str] = fmt_ratio3,
) -> str:
    """An estimate and its interval as text, the one way every report writes
    one, in the style its place asks (`num` writes each figure):
    sentence  1.234 [1.200, 1.270]; unbounded: 1.234, no interval
    cell      1.234 (1.200–1.270); unbounded: 1.234 (unbounded)
    ends      [1.2, 1.27], the ends alone; unbounded (or reaching 0): unbounded
    width     ±1.4, the half-width in % of the point; unbounded: -"""
    if style == "width":
        rel = iv.rel_halfwidth * 100
        if not math.isfinite(rel):
            return "-"
        return "±" + (f"{rel:.2f}" if rel < 1 else f"{rel:.1f}" if rel < 10 else f"{rel:.0f}")
    if style == "ends":
        return f"[{num(iv.low)}, {num(iv.high)}]" if math.isfinite(iv.high) and iv.low > 0 else "unbounded"
    point = num(iv.point)
    if style == "cell":
        return f"{point} ({num(iv.low)}–{num(iv.high)})" if iv.bounded else f"{point} (unbounded)"
    if not iv.bounded:
        return f"{point}, no interval" if math.isfinite(iv.point) else "no interval"
    return f"{point} [{num(iv.low)}, {num(iv.high)}]"
