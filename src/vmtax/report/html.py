"""The self-contained HTML report: one file, no network (a Content-Security-
Policy forbids every fetch), charts as inline SVG, tables sortable by a few
lines of inline script.  Every string that comes from a run -- target names,
facts, commands, reasons -- goes through escape(): a target cannot inject
markup into the page."""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

from ..model import BenchSpec, Comparison, Measurement, RunData
from . import explain, facts, plots, scoreboard, view
from .facts import warnings
from .htmlkit import page, table, td
from .scale import html_section
from .scoreboard import Board, geomeans
from .view import HTML, Table

CHART_MAX_BARS = 10  # benchmarks per ratio chart
Figure = Callable[[RunData, BenchSpec, list[tuple[str, list[float], list[float]]]], str]
# a chart of ratios: (title, direction, benchmarks, [(candidate, [(ratio, low, high) or None])]) -> SVG
Bars = Callable[[str, str, list[str], plots.Bars], str]


def mode_paragraphs(texts: list[str]) -> str:
    return "".join(f'<p class="meta">{escape(text)}</p>' for text in texts)


def scoreboard_table(board: Board) -> str:
    """The board as one sortable table (a line per benchmark), its legend
    before it and the notes in full after it."""
    fields = board.shown(HTML)
    header = ["suite", "benchmark", "better"] + [
        f.title_in(HTML, k, board.baseline) for k in board.candidates for f in fields
    ]
    rows = []
    for g in board.groups:
        for line in g.lines:
            spec = line.spec
            cells = [td(spec.suite, cls="l"), td(spec.name, cls="l"), td(spec.direction, cls="l")]
            cells += [
                td(f.text_in(x, HTML), f.sort(x) if f.sort else None, f.cls(x) if f.cls else "")
                for x in line.cells
                for f in fields
            ]
            rows.append(f"<tr>{''.join(cells)}</tr>")
    legend = f'<p class="meta">{escape(" · ".join(board.legend(fields, HTML)))}</p>'
    return (
        legend
        + table(header, rows, left=3)
        + mode_paragraphs([f"{view.MODES_MARK} {n.text}" for n in board.modes] + [n.text for n in board.states])
    )


def measurements_table(t: Table) -> str:
    cols = t.shown(HTML)
    rows = [
        "<tr>"
        + "".join(
            td(c.text_of(r), _sort(c.value(r)), cls="wrap" if c.wrap else "l" if c.align == "l" else "") for c in cols
        )
        + "</tr>"
        for r in t.rows
    ]
    return table([c.title_in(HTML) for c in cols], rows, left=sum(1 for c in cols[:3] if c.align == "l"))


def _sort(v: object) -> float | None:
    """A cell's sort key: its number, where it is one."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def ratio_charts(data: RunData, cs: list[Comparison], bars: Bars = plots.ratio_bars) -> str:
    cands = [t.name for t in data.targets[1:]]
    gm = geomeans(data, cs)
    cby = {(c.candidate, c.benchmark.name): c for c in cs}
    out = []
    suites = list(dict.fromkeys((b.suite, b.direction) for b in data.benchmarks))
    chunks = []
    for suite, direction in suites:
        names = [
            b.name
            for b in data.benchmarks
            if b.suite == suite and b.direction == direction and any((k, b.name) in cby for k in cands)
        ]
        parts = math.ceil(len(names) / CHART_MAX_BARS)
        for i in range(parts):  # a long suite is split so that every chart stays legible
            label = f"{suite} ({i + 1}/{parts})" if parts > 1 else suite
            chunks.append((suite, label, direction, names[i * CHART_MAX_BARS : (i + 1) * CHART_MAX_BARS]))
    for suite, label, direction, benches in chunks:
        series: plots.Bars = []
        for k in cands:
            got = [cby.get((k, name)) for name in benches]
            series.append((k, [c.ci if c else None for c in got]))
        svg = bars(f"{label}: candidate / {data.targets[0].name}", direction, benches, series)
        caption = "; ".join(f"{k}: geometric mean {gm.get((k, suite, direction), float('nan')):.3g}" for k in cands)
        out.append(
            f"<figure>{svg}<figcaption>{escape(caption)} · error bars: 95% CI (sign-flip test, paired blocks) · "
            f"{escape(direction)} is better</figcaption></figure>"
        )
    return f'<div class="charts">{"".join(out)}</div>'


def distribution_inputs(data: RunData) -> list[tuple[BenchSpec, list[tuple[str, list[float], list[float]]]]]:
    """Per benchmark with samples, each target's (name, times, values) of its measured samples."""
    by: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for s in data.samples:
        if not s.warmup:
            t, v = by.setdefault((s.benchmark, s.target), ([], []))
            t.append(s.t)
            v.append(s.value)
    out = []
    for spec in data.benchmarks:
        per = [(t.name, *by[(spec.name, t.name)]) for t in data.targets if (spec.name, t.name) in by]
        if per:
            out.append((spec, per))
    return out


def distribution_charts(data: RunData, figure: Figure | None = None) -> str:
    """A figure per benchmark; figure(data, spec, per) draws its chart (default: the SVG inline)."""
    draw = figure or (lambda data, spec, per: plots.distribution(spec.name, spec.unit, per))
    out = [
        f'<figure id="dist-{escape(spec.name)}">{draw(data, spec, per)}'
        f"<figcaption>{escape(spec.name)}: {escape(spec.description)}</figcaption></figure>"
        for spec, per in distribution_inputs(data)
    ]
    return f'<div class="charts">{"".join(out)}</div>'


def targets_table(t: facts.Targets) -> str:
    cols = t.shown(HTML)
    rows = [
        "<tr>"
        + "".join(td(c.text_of(x, t.data), _sort(c.value(x, t.data)), "l" if c.align == "l" else "") for c in cols)
        + "</tr>"
        for x in t.data.targets
    ]
    out = table([c.title for c in cols], rows, left=next((i for i, c in enumerate(cols) if c.align != "l"), len(cols)))
    notes = [", ".join(names) + f": {note}" for names, note in t.notes]
    return out + "".join(f'<p class="meta">{escape(n)}</p>' for n in notes)


def run_section(
    data: RunData,
    ms: list[Measurement],
    cs: list[Comparison],
    figure: Figure | None = None,
    bars: Bars = plots.ratio_bars,
) -> str:
    """A run's section of the report (figure: how its distributions are drawn, distribution_charts;
    bars: how its ratios are, plots.ratio_bars's arguments)."""
    if data.kind == "scale":
        return html_section(data)
    board = scoreboard.build(data, ms, cs)  # the one view its scoreboard, measurements and targets lay out
    t, h = board.table, board.header
    host = f" · on {escape(h.host)}" + (f" by {escape(h.user)}" if h.user else "") if h.host else ""
    parts = [
        f'<section id="run-{escape(h.id)}"><h2>Run {escape(h.id)} · {escape(h.kind)} · {escape(h.status)}</h2>',
        f'<p class="meta">{escape(h.when(utc=True))}{host} · vmtax {escape(h.vmtax_version)} · goal ±'
        f"{escape(h.goal)} (95% CI) within {escape(h.budget)} · {escape(h.pinning)}"
        + (f" · {escape(h.estimand)}" if h.estimand else "")
        + "<br>"
        f"command: <code>{escape(h.command)}</code></p>",
    ]
    if data.kind == "compare" and len(data.targets) > 1:
        parts += [
            '<p class="verdict">' + "<br>".join(escape(line) for line in board.verdict.lines()) + "</p>",
            "<h3>Scoreboard</h3>",
            scoreboard_table(board),
            "<h3>Ratios to the baseline</h3>",
            ratio_charts(data, cs, bars),
        ]
    blocks = explain.view(data, ms, cs)
    if any(len(b.rows) > 1 for b in blocks):
        parts += ["<h3>Why: per-operation counts, in the target and on its host</h3>", explain.html(blocks)]
    modes = (
        ""
        if data.kind == "compare" and len(data.targets) > 1  # or under the scoreboard
        else mode_paragraphs(view.mode_texts(t))
    )
    parts += [
        "<h3>Measurements</h3>",
        measurements_table(t) + modes,
        "<h3>Targets</h3>",
        targets_table(board.targets),
        "<h3>Samples: distribution and time order</h3>",
        distribution_charts(data, figure),
        "</section>",
    ]
    return "".join(parts)


def document(runs: list[tuple[RunData, list[Measurement], list[Comparison]]], command: str) -> str:
    return page(
        f"vmtax report: {', '.join(r.id for r, _, _ in runs)}",
        "vmtax report",
        command,
        "".join(run_section(*r) for r in runs),
        warnings([r for r, _, _ in runs]),
        f" from {len(runs)} stored run(s)",
    )
