"""The dashboard's trend charts, drawn on the server as inline SVG: readable
with JavaScript off, nothing fetched.  A point links to its run, a change
point to the diff of the runs either side of it (data-run and data-cp say
which, for a test or a script).  Every text from the store is escaped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from urllib.parse import urlencode

from ..model import Interval
from ..report.plots import colour

W, H = 880, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 24, 36


@dataclass(frozen=True)
class Dot:
    run: str
    value: float
    low: float
    high: float
    title: str  # the tooltip


@dataclass(frozen=True)
class Mark:
    index: int  # the first point of the new level
    before_run: str
    run: str
    title: str


def _finite(*xs: float) -> bool:
    return all(isinstance(x, (int, float)) and math.isfinite(x) for x in xs)


def _range(dots: list[Dot]) -> tuple[float, float]:
    values = [x for d in dots for x in (d.value, d.low, d.high) if _finite(x)]
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    return lo - pad, hi + pad


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    step = (hi - lo) / (n - 1)
    return [lo + i * step for i in range(n)]


def _fmt(v: float) -> str:
    return f"{v:.4g}"


class Frame:
    """Data to pixels."""

    def __init__(self, n: int, lo: float, hi: float, height: int):
        self.n, self.lo, self.hi, self.h = n, lo, hi, height

    def x(self, i: int) -> float:
        span = W - LEFT - RIGHT
        return LEFT + (span / 2 if self.n == 1 else span * i / (self.n - 1))

    def y(self, v: float) -> float:
        return TOP + (self.h - TOP - BOTTOM) * (1 - (v - self.lo) / ((self.hi - self.lo) or 1))


def _band(f: Frame, dots: list[Dot]) -> str:
    ok = [(i, d) for i, d in enumerate(dots) if _finite(d.low, d.high)]
    if len(ok) < 2:
        return ""
    upper = [f"{f.x(i):.1f},{f.y(d.high):.1f}" for i, d in ok]
    lower = [f"{f.x(i):.1f},{f.y(d.low):.1f}" for i, d in reversed(ok)]
    return f'<polygon class="band" points="{" ".join(upper + lower)}" fill="#1f77b4" fill-opacity="0.18"/>'


def _axes(f: Frame, unit: str) -> str:
    out = []
    for v in _ticks(f.lo, f.hi):
        y = f.y(v)
        out.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{escape(_fmt(v))}</text>'
        )
    out.append(
        f'<text x="12" y="{(f.h - BOTTOM + TOP) / 2:.0f}" font-size="11" '
        f'transform="rotate(-90 12 {(f.h - BOTTOM + TOP) / 2:.0f})" text-anchor="middle">{escape(unit)}</text>'
    )
    return "".join(out)


def _marks(f: Frame, marks: list[Mark]) -> str:
    out = []
    for m in marks:
        x = (f.x(m.index - 1) + f.x(m.index)) / 2
        href = "/diff?" + urlencode({"a": m.before_run, "b": m.run})
        out.append(
            f'<a class="cp" href="{escape(href)}" data-cp="{escape(m.run)}"><title>{escape(m.title)}</title>'
            f'<rect x="{x - 6:.1f}" y="{TOP}" width="12" height="{f.h - TOP - BOTTOM}" fill="#d62728" '
            f'fill-opacity="0.08"/><line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{f.h - BOTTOM}" '
            f'stroke="#d62728" stroke-width="2" stroke-dasharray="5,3"/></a>'
        )
    return "".join(out)


def _dots(f: Frame, dots: list[Dot], link: bool) -> str:
    line = " ".join(f"{f.x(i):.1f},{f.y(d.value):.1f}" for i, d in enumerate(dots) if _finite(d.value))
    out = [f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>'] if line else []
    for i, d in enumerate(dots):
        if not _finite(d.value):
            continue
        dot = (
            f'<circle cx="{f.x(i):.1f}" cy="{f.y(d.value):.1f}" r="3.5" fill="#1f77b4" data-run="{escape(d.run)}">'
            f"<title>{escape(d.title)}</title></circle>"
        )
        out.append(f'<a href="/runs/{escape(d.run)}">{dot}</a>' if link else dot)
    return "".join(out)


def trend(
    title: str, unit: str, dots: list[Dot], marks: Sequence[Mark] = (), height: int = H, link: bool = True
) -> str:
    """A series over runs, oldest first: each value with its 95% interval as
    a band, the change points as dashed lines that link to their diff."""
    lo, hi = _range(dots)
    f = Frame(len(dots), lo, hi, height)
    labels = ""
    if dots:
        labels = (
            f'<text x="{LEFT}" y="{height - 10}" font-size="11">{escape(dots[0].run)}</text>'
            f'<text x="{W - RIGHT}" y="{height - 10}" font-size="11" text-anchor="end">{escape(dots[-1].run)}</text>'
        )
    return (
        f'<svg class="trend" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" '
        f'height="{height}" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f'<text x="{LEFT}" y="15" font-size="13" font-weight="600">{escape(title)}</text>'
        f"{_axes(f, unit)}{_band(f, dots)}{_marks(f, list(marks))}{_dots(f, dots, link)}{labels}</svg>"
    )


# -- a run's ratios -------------------------------------------------------------------------
BARS_H, BARS_TOP, BARS_BOTTOM = 330, 44, 96  # room above for the title and legend, below for the names


@dataclass(frozen=True)
class Scale:
    """Ratios to pixels, on a log axis where they span more than 5x (as report/plots.py)."""

    lo: float
    hi: float
    log: bool

    def y(self, v: float) -> float:
        f = (lambda x: math.log(x)) if self.log else (lambda x: x)
        span = BARS_H - BARS_TOP - BARS_BOTTOM
        return BARS_TOP + span * (1 - (f(v) - f(self.lo)) / ((f(self.hi) - f(self.lo)) or 1))

    def ticks(self, n: int = 5) -> list[float]:
        if self.log:  # 1, 2, 5 times the powers of ten within the axis
            tens = range(math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi)) + 1)
            return [m * 10.0**e for e in tens for m in (1, 2, 5) if self.lo <= m * 10.0**e <= self.hi]
        return _ticks(self.lo, self.hi, n)


Ratio = tuple[float, float, float] | None


def _scale(series: Sequence[tuple[str, Sequence[Ratio]]]) -> Scale:
    ratios = [v for _, vals in series for v in vals if v is not None and _finite(v[0]) and v[0] > 0]
    finite = [v[0] for v in ratios]
    log = bool(finite) and max(finite) / min(finite) > 5
    ends = [x for v in ratios for x in v if _finite(x) and x > 0] + [1.0]
    if log:
        return Scale(min(ends) / 1.25, max(ends) * 1.25, True)
    return Scale(0.0, max(ends) * 1.08, False)


def _bar(s: Scale, x: float, w: float, fill: str, v: tuple[float, float, float], tip: str) -> str:
    r, a, b = v
    base = s.y(s.lo)
    top = s.y(r)
    out = [
        f'<rect x="{x:.1f}" y="{min(top, base):.1f}" width="{w:.1f}" height="{abs(base - top):.1f}" '
        f'fill="{fill}"><title>{escape(tip)}</title></rect>'
    ]
    if _finite(a, b) and a > 0:
        cx, y1, y2 = x + w / 2, s.y(max(a, s.lo)), s.y(min(b, s.hi))
        out.append(
            f'<path d="M{cx:.1f},{y1:.1f}V{y2:.1f}M{cx - 2:.1f},{y1:.1f}h4M{cx - 2:.1f},{y2:.1f}h4" '
            'stroke="#000" stroke-width="0.8" fill="none"/>'
        )
    return "".join(out)


def _bars_axes(s: Scale, direction: str, benches: Sequence[str], group: float) -> str:
    out = []
    for v in s.ticks():
        y = s.y(v)
        out.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{escape(f"{v:.3g}")}</text>'
        )
    one = s.y(1.0)
    out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{one:.1f}" y2="{one:.1f}" stroke="#000" stroke-width="0.8"/>')
    base = BARS_H - BARS_BOTTOM
    for j, name in enumerate(benches):
        x = LEFT + group * (j + 0.5)
        out.append(
            f'<text x="{x:.1f}" y="{base + 14}" font-size="11" text-anchor="end" '
            f'transform="rotate(-30 {x:.1f} {base + 14})">{escape(name)}</text>'
        )
    better = "lower" if direction == "lower" else "higher"
    mid = (BARS_H - BARS_BOTTOM + BARS_TOP) / 2
    out.append(
        f'<text x="12" y="{mid:.0f}" font-size="11" transform="rotate(-90 12 {mid:.0f})" '
        f'text-anchor="middle">{escape(f"ratio to baseline ({better} is better)")}</text>'
    )
    return "".join(out)


def _legend(names: Sequence[str]) -> str:
    out, x = [], LEFT
    for i, name in enumerate(names):
        out.append(
            f'<rect x="{x}" y="{TOP - 2}" width="10" height="10" fill="{colour(i)}"/>'
            f'<text x="{x + 14}" y="{TOP + 7}" font-size="11">{escape(name)}</text>'
        )
        x += 24 + 7 * len(name)
    return "".join(out)


def ratio_bars(
    title: str, direction: str, benches: Sequence[str], intervals: Sequence[tuple[str, Sequence[Interval | None]]]
) -> str:
    """Grouped bars of candidate/baseline ratios with their 95% intervals as
    whiskers, a line at 1.0, one colour per candidate: report/plots.py's
    ratio_bars (its arguments and its reading), as inline SVG drawn here.
    intervals: (candidate, [a ratio's Interval or None per benchmark])."""
    series = [(n, [None if v is None else (v.point, v.low, v.high) for v in vals]) for n, vals in intervals]
    s = _scale(series)
    group = (W - LEFT - RIGHT) / max(1, len(benches))
    width = 0.8 * group / max(1, len(series))
    bars = []
    for i, (name, vals) in enumerate(series):
        for j, v in enumerate(vals):
            if v is None or not (_finite(v[0]) and v[0] > 0):
                continue
            x = LEFT + group * j + 0.1 * group + width * i
            tip = f"{benches[j]} on {name}: {v[0]:.4g} [{v[1]:.4g}, {v[2]:.4g}]"
            bars.append(_bar(s, x + 0.05 * width, 0.9 * width, colour(i), v, tip))
    return (
        f'<svg class="bars" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {BARS_H}" width="{W}" '
        f'height="{BARS_H}" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f'<text x="{LEFT}" y="13" font-size="13" font-weight="600">{escape(title)}</text>'
        f"{_bars_axes(s, direction, benches, group)}{''.join(bars)}{_legend([n for n, _ in series])}</svg>"
    )
