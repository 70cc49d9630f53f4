"""Every chart of the reports, as inline SVG from matplotlib (text kept as
<text>, so it stays searchable and small).  One way to plot, used by all."""

from __future__ import annotations

import io
import math
import re
import warnings
from typing import TYPE_CHECKING, Any, TypeGuard

import matplotlib
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

from ..model import Interval
from .safe import inert
from .units import fmt_rate, fmt_value

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
# text.parse_math off: a label like `$x$` is text, never a formula (and a
# malformed one cannot crash the report); hashsalt: stable ids
STYLE: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "vmtax",
    "text.parse_math": False,
}


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def to_svg(fig: Figure) -> str:
    """The figure as one <svg> element (no XML prolog, no doctype).
    Matplotlib's warnings are not shown: a glyph missing from its font does
    not matter (the text stays text, the browser draws it), nor a layout a
    long label defeats (the chart is drawn all the same)."""
    buf = io.StringIO()
    FigureCanvasSVG(fig)
    with matplotlib.rc_context(STYLE), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig.savefig(buf, format="svg", bbox_inches="tight", dpi=110)
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)


def _figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(STYLE):
        return Figure(figsize=(width, height), layout="constrained")


Bars = list[tuple[str, list[Interval | None]]]  # ratio_bars' series: (candidate, a ratio or None per benchmark)


def _drawn(iv: Interval | None) -> TypeGuard[Interval]:
    return iv is not None and iv.point > 0 and math.isfinite(iv.point)


def ratio_bars(title: str, direction: str, benches: list[str], series: Bars) -> str:
    """Grouped bars of candidate/baseline ratios with their 95% intervals
    as error bars, a line at 1.0, one colour per candidate.  series:
    (candidate, [a ratio and its interval, or None, per benchmark])."""
    title, benches, series = inert(title), [inert(b) for b in benches], [(inert(n), v) for n, v in series]
    with matplotlib.rc_context(STYLE):
        fig = _figure(max(5.0, 0.5 * len(benches) * max(1, len(series)) + 1.5), 3.2)
        ax = fig.add_subplot()
        finite = [v.point for _, vals in series for v in vals if _drawn(v)]
        log = bool(finite) and max(finite) / min(finite) > 5
        _bars(ax, series, log)
        ax.axhline(1.0, color="black", linewidth=0.8)
        if log:
            _plain_log(ax)
        ax.set_xticks(range(len(benches)), benches, rotation=30, ha="right")
        better = "lower" if direction == "lower" else "higher"
        ax.set_ylabel(f"ratio to baseline ({better} is better)")
        ax.set_title(title, loc="left")
        ax.legend(frameon=False, fontsize=8)
        return to_svg(fig)


def _bars(ax, series: Bars, log: bool) -> None:
    """Each candidate's bars, side by side within a benchmark's slot, its intervals as error bars."""
    width = 0.8 / max(1, len(series))
    for i, (name, vals) in enumerate(series):
        drawn = [(j, v) for j, v in enumerate(vals) if _drawn(v)]
        ax.bar(
            [j - 0.4 + width * (i + 0.5) for j, _ in drawn],
            [v.point for _, v in drawn],
            width * 0.9,
            color=colour(i),
            label=name,
            yerr=_errors([v for _, v in drawn]),
            error_kw={"elinewidth": 0.8, "capsize": 2},
            bottom=0 if not log else None,
        )


def _plain_log(ax) -> None:
    """A log y axis labelled in plain numbers: the default labels are
    mathtext, which an SVG with svg.fonttype=none shows raw
    ("$\\mathdefault{10^{1}}$")."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def distribution(title: str, unit: str, per_target: list[tuple[str, list[float], list[float]]]) -> str:
    """Two panels: each target's samples as a box over its points (so
    bimodality shows), and the samples in time order (so drift shows).
    per_target: (name, times, values)."""
    title, per_target = inert(title), [(inert(n), t, v) for n, t, v in per_target]
    with matplotlib.rc_context(STYLE):
        fig = _figure(8.0, 2.4)
        left, right = fig.subplots(1, 2, width_ratios=[1, 2])
        for i, (name, times, values) in enumerate(per_target):
            if not values:
                continue
            left.boxplot([values], positions=[i], widths=0.5, showfliers=False, medianprops={"color": "black"})
            step = max(1, len(values) // 400)  # at most ~400 points a target
            pts = values[::step]
            jitter = [i + 0.18 * ((k * 0.618) % 1 - 0.5) for k in range(len(pts))]
            left.scatter(jitter, pts, s=4, color=colour(i), alpha=0.5, linewidths=0, rasterized=True)
            t0 = times[0]
            right.plot(
                [t - t0 for t in times[::step]], pts, ".", markersize=2, color=colour(i), label=name, rasterized=True
            )  # points as one image: a small page
        left.set_xticks(range(len(per_target)), [n for n, _, _ in per_target], rotation=20, ha="right")
        left.set_ylabel(unit)
        left.set_title(title, loc="left")
        right.set_xlabel("seconds since the first sample of each target")
        right.set_ylabel(unit)
        right.legend(frameon=False, fontsize=7, markerscale=4)
        if per_target and per_target[0][2]:
            lo = min(min(v) for _, _, v in per_target if v)
            hi = max(max(v) for _, _, v in per_target if v)
            right.set_title(f"range {fmt_value(lo, unit)} – {fmt_value(hi, unit)}", loc="right", fontsize=8)
        return to_svg(fig)


def _errors(points: list[Interval]) -> list[list[float]]:
    """Error bar lengths below and above each point; an unbounded end is left off."""
    return [
        [max(0.0, p.point - p.low) if math.isfinite(p.low) else 0.0 for p in points],
        [max(0.0, p.high - p.point) if math.isfinite(p.high) else 0.0 for p in points],
    ]


def _n_axis(ax, ns: list[int]) -> None:
    """N on a log2 axis, a tick at each N measured."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ns))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("instances at once (N)")


def versus_n(
    title: str,
    ylabel: str,
    ns: list[int],
    series: list[tuple[str, list[Interval]]],
    ylim: tuple[float, float] | None = None,
) -> str:
    """A figure against the instance count N (vmtax scale): one line per
    series, its 95% intervals as error bars."""
    title, series = inert(title), [(inert(n), p) for n, p in series]
    with matplotlib.rc_context(STYLE):
        fig = _figure(4.6, 3.0)
        ax = fig.add_subplot()
        for i, (name, points) in enumerate(series):
            ax.errorbar(
                ns,
                [p.point for p in points],
                yerr=_errors(points),
                color=colour(i),
                marker="o",
                markersize=3.5,
                linewidth=1.2,
                elinewidth=0.9,
                capsize=3,
                label=name,
            )
        _n_axis(ax, ns)
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set_ylabel(ylabel)
        ax.set_title(title, loc="left")
        ax.legend(frameon=False, fontsize=7)
        return to_svg(fig)


def throughput_vs_n(
    title: str,
    unit: str,
    ns: list[int],
    aggregate: list[Interval],
    each: list[Interval],
    spread: list[tuple[float, float]],
) -> str:
    """vmtax scale's throughput against N: the N instances together (left
    axis) and one instance (right axis: the mean with its interval, and
    the slowest to the fastest shaded: spread), both from zero."""
    slowest, fastest = [s for s, _ in spread], [f for _, f in spread]
    title = inert(title)
    from matplotlib.ticker import FuncFormatter

    short = FuncFormatter(lambda v, _: fmt_rate(v, "").strip())
    with matplotlib.rc_context(STYLE):
        fig = _figure(5.0, 3.0)
        left = fig.add_subplot()
        right = left.twinx()
        right.spines["right"].set_visible(True)
        right.fill_between(
            ns, slowest, fastest, color=colour(1), alpha=0.15, linewidth=0, label="slowest – fastest instance"
        )
        right.errorbar(
            ns,
            [p.point for p in each],
            yerr=_errors(each),
            color=colour(1),
            marker="s",
            markersize=3.5,
            linewidth=1.2,
            elinewidth=0.9,
            capsize=3,
            label="one instance (mean)",
        )
        left.errorbar(
            ns,
            [p.point for p in aggregate],
            yerr=_errors(aggregate),
            color=colour(0),
            marker="o",
            markersize=3.5,
            linewidth=1.2,
            elinewidth=0.9,
            capsize=3,
            label="all N together",
        )
        _n_axis(left, ns)
        for ax, what, c in ((left, "all N together", colour(0)), (right, "one instance", colour(1))):
            ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(short)
            ax.set_ylabel(f"{what} ({unit})", color=c)
        left.set_title(title, loc="left")
        handles = [h for ax in (left, right) for h in ax.get_legend_handles_labels()[0]]
        left.legend(handles, [str(h.get_label()) for h in handles], frameon=False, fontsize=7, loc="lower left")
        return to_svg(fig)


def history(title: str, direction: str, points: list[Interval], labels: list[str], changes: list[int]) -> str:
    """A ratio over stored runs, oldest first: its 95% interval as a band,
    the ratio as a line of points, a dashed line at each change point
    (before the first run of the new level)."""
    title, labels = inert(title), [inert(x) for x in labels]
    with matplotlib.rc_context(STYLE):
        fig = _figure(max(4.8, 0.35 * len(points) + 2.0), 2.8)
        ax = fig.add_subplot()
        xs = list(range(len(points)))
        ys = [p.point for p in points]
        finite = [(x, p.low, p.high) for x, p in enumerate(points) if p.bounded]
        if finite:
            ax.fill_between(
                [f[0] for f in finite],
                [f[1] for f in finite],
                [f[2] for f in finite],
                color=colour(0),
                alpha=0.2,
                linewidth=0,
                label="95% CI",
            )
        ax.plot(xs, ys, "o-", color=colour(0), markersize=3.5, linewidth=1.2, label="ratio")
        for k, i in enumerate(changes):
            ax.axvline(
                i - 0.5, color=colour(1), linestyle="--", linewidth=1.2, label="change point" if k == 0 else None
            )
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.set_xticks(xs, labels, rotation=35, ha="right", fontsize=7)
        better = "lower" if direction == "lower" else "higher"
        ax.set_ylabel(f"ratio to baseline ({better} is better)")
        ax.set_title(title, loc="left")
        ax.legend(frameon=False, fontsize=7)
        return to_svg(fig)
