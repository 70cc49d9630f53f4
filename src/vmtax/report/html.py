"""The self-contained HTML report: one file, no network (a Content-Security-
Policy forbids every fetch), charts as inline SVG, tables sortable by a few
lines of inline script.  Every string that comes from a run -- target names,
facts, commands, reasons -- goes through escape(): a target cannot inject
markup into the page."""
from __future__ import annotations

import math
from html import escape

from ..model import Comparison, Measurement, RunData
from . import explain, plots, view
from .htmlkit import page, table, td
from .facts import FACT_HEADER, fact_rows, target_notes, warnings
from .scale import html_section
from .scoreboard import geomeans, precise
from .units import fmt_ratio3, fmt_value
from .view import HTML, Table

CHART_MAX_BARS = 10  # benchmarks per ratio chart
def _ratio_text(c: Comparison) -> str:
    lo, hi = c.ratio_ci_low, c.ratio_ci_high
    ci = f"{fmt_ratio3(lo)}–{fmt_ratio3(hi)}" if math.isfinite(lo) and math.isfinite(hi) else "unbounded"
    return f"{fmt_ratio3(c.ratio)} ({ci})"


def mode_paragraphs(t: Table) -> str:
    return "".join(f'<p class="meta">{escape(text)}</p>' for text in view.mode_texts(t))


def scoreboard_table(data: RunData, t: Table) -> str:
    base = data.targets[0].name
    cands = [t.name for t in data.targets[1:]]
    header = ["suite", "benchmark", "better"]
    for k in cands:
        header += [f"{k} / {base} (95% CI)", f"{k} vs {base}", ""]
    rows = []
    for line in view.pivot(t):
        spec, b = line.spec, line.base
        if not b:
            continue
        cells = [td(spec.suite, cls="l"), td(spec.name, cls="l"), td(spec.direction, cls="l")]
        for side in line.sides:
            c, m = side.c, side.m
            if c and m and m.summary and b.summary:
                flag = (("*" if c.significant else "") + ("" if precise(c, data.config.get("precision")) else "?")
                        + (view.MODES_MARK if view.bimodal(c, m, b) else ""))
                cells += [td(_ratio_text(c), c.ratio),
                          td(f"{fmt_value(m.summary.mean, spec.unit)} vs {fmt_value(b.summary.mean, spec.unit)}",
                              m.summary.mean),
                          td(flag, cls="l sig" if c.significant else "l prec")]
            else:
                why = f"{m.stopped_by}: {m.reason}" if m else "not measured"
                cells += [td(why, cls="wrap"), td("-"), td("")]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    legend = ('<p class="meta"><span class="sig">*</span> a difference at the 5% level · '
              '<span class="prec">?</span> the ratio did not reach the precision asked within the '
              "budget · the interval in brackets is the ratio's 95% CI: the ratios a sign-flip test "
              "does not reject, over process means paired block by block (each block in random "
              "order), so host drift cancels and the error rate holds on a noisy host</p>")
    return legend + table(header, rows, left=3) + mode_paragraphs(t)


def measurements_table(t: Table) -> str:
    cols = t.shown(HTML)
    rows = ["<tr>" + "".join(td(c.text_of(r), _sort(c.value(r)), cls="wrap" if c.wrap else
                                 "l" if c.align == "l" else "") for c in cols) + "</tr>" for r in t.rows]
    return table([c.title_in(HTML) for c in cols], rows, left=sum(1 for c in cols[:3] if c.align == "l"))


def _sort(v: object) -> float | None:
    """A cell's sort key: its number, where it is one."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def ratio_charts(data: RunData, cs: list[Comparison]) -> str:
    cands = [t.name for t in data.targets[1:]]
    gm = geomeans(data, cs)
    cby = {(c.candidate, c.benchmark.name): c for c in cs}
    out = []
    suites = list(dict.fromkeys((b.suite, b.direction) for b in data.benchmarks))
    chunks = []
    for suite, direction in suites:
        names = [b.name for b in data.benchmarks if b.suite == suite and b.direction == direction
                 and any((k, b.name) in cby for k in cands)]
        parts = math.ceil(len(names) / CHART_MAX_BARS)
        for i in range(parts):  # a long suite is split so that every chart stays legible
            label = f"{suite} ({i + 1}/{parts})" if parts > 1 else suite
            chunks.append((suite, label, direction, names[i * CHART_MAX_BARS:(i + 1) * CHART_MAX_BARS]))
    for suite, label, direction, benches in chunks:
        series = []
        for k in cands:
            vals = []
            for name in benches:
                c = cby.get((k, name))
                vals.append((c.ratio, c.ratio_ci_low, c.ratio_ci_high) if c else None)
            series.append((k, vals))
        svg = plots.ratio_bars(f"{label}: candidate / {data.targets[0].name}", direction, benches, series)
        caption = "; ".join(f"{k}: geometric mean {gm.get((k, suite, direction), float('nan')):.3g}"
                            for k in cands)
        out.append(f"<figure>{svg}<figcaption>{escape(caption)} · error bars: 95% CI (sign-flip test, paired blocks) · "
                   f"{escape(direction)} is better</figcaption></figure>")
    return f'<div class="charts">{"".join(out)}</div>'


def distribution_charts(data: RunData) -> str:
    out = []
    by: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for s in data.samples:
        if not s.warmup:
            t, v = by.setdefault((s.benchmark, s.target), ([], []))
            t.append(s.t)
            v.append(s.value)
    for spec in data.benchmarks:
        per = [(t.name, *by[(spec.name, t.name)]) for t in data.targets if (spec.name, t.name) in by]
        if not per:
            continue
        out.append(f'<figure id="dist-{escape(spec.name)}">'
                   f'{plots.distribution(spec.name, spec.unit, per)}'
                   f"<figcaption>{escape(spec.name)}: {escape(spec.description)}</figcaption></figure>")
    return f'<div class="charts">{"".join(out)}</div>'


def targets_table(data: RunData) -> str:
    rows = []
    for t, facts in zip(data.targets, fact_rows(data)):
        extra = [td(f"{t.boot_s:.2f} s" if t.boot_s is not None else "-", t.boot_s),
                 td(f"{t.idle_cpu_pct:.1f}%" if t.idle_cpu_pct is not None else "-", t.idle_cpu_pct),
                 td(f"{t.mem_overhead_mb:.0f} MiB" if t.mem_overhead_mb is not None else "-",
                     t.mem_overhead_mb)]
        rows.append("<tr>" + "".join(td(x, cls="l") for x in facts) + "".join(extra) + "</tr>")
    out = table(FACT_HEADER + ["boot", "idle CPU", "mem overhead"], rows, left=len(FACT_HEADER))
    notes = [", ".join(names) + f": {note}" for names, note in target_notes(data)]
    return out + "".join(f'<p class="meta">{escape(n)}</p>' for n in notes)


def run_section(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> str:
    if data.kind == "scale":
        return html_section(data)
    t = view.measurements(data, ms, cs)  # the one view its scoreboard and measurements lay out
    h = view.header(data)
    host = f" · on {escape(h.host)}" + (f" by {escape(h.user)}" if h.user else "") if h.host else ""
    parts = [f'<section id="run-{escape(h.id)}"><h2>Run {escape(h.id)} · {escape(h.kind)} · '
             f"{escape(h.status)}</h2>",
             f'<p class="meta">{escape(h.when(utc=True))}{host} · vmtax {escape(h.vmtax_version)} · goal ±'
             f"{escape(h.goal)} (95% CI) within {escape(h.budget)} · {escape(h.pinning)}"
             + (f" · {escape(h.estimand)}" if h.estimand else "") + "<br>"
             f"command: <code>{escape(h.command)}</code></p>"]
    if data.kind == "compare" and len(data.targets) > 1:
        parts += ["<h3>Scoreboard</h3>", scoreboard_table(data, t),
                  "<h3>Ratios to the baseline</h3>", ratio_charts(data, cs)]
    blocks = explain.view(data, ms, cs)
    if any(len(b.rows) > 1 for b in blocks):
        parts += ["<h3>Why: per-operation counts, in the target and on its host</h3>", explain.html(blocks)]
    modes = "" if data.kind == "compare" and len(data.targets) > 1 else mode_paragraphs(t)  # or under the scoreboard
    parts += ["<h3>Measurements</h3>", measurements_table(t) + modes,
              "<h3>Targets</h3>", targets_table(data),
              "<h3>Samples: distribution and time order</h3>", distribution_charts(data), "</section>"]
    return "".join(parts)


def document(runs: list[tuple[RunData, list[Measurement], list[Comparison]]], command: str) -> str:
    return page(f"vmtax report: {', '.join(r.id for r, _, _ in runs)}", "vmtax report", command,
                "".join(run_section(*r) for r in runs), warnings([r for r, _, _ in runs]),
                f" from {len(runs)} stored run(s)")
