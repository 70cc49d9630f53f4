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
