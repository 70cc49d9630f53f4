"""The report of a scale run (`vmtax scale`): one view of its figures
(scaling.py), written as a terminal table, Markdown, the JSON document (a
contract: `{schema, run_id, target, benchmark, instances: [{n, aggregate,
per_instance, jain, slowdown, host_cpu_pct, vcpus, host_cpus}]}`) and an
HTML section with throughput-vs-N and fairness-vs-N charts."""

from __future__ import annotations

import time
from dataclasses import dataclass
from html import escape

from .. import scaling
from ..model import Estimate, Interval, RunData, ScalePoint
from . import plots, table
from .htmlkit import table as table_html
from .htmlkit import td
from .jsonparts import interval
from .mdkit import md_cell
from .units import fmt_duration, fmt_pct, fmt_rate, fmt_rate_range, json_number, sig

SCHEMA = 1
HEADER = [
    "N",
    "vCPUs / host CPUs",
    "aggregate (95% CI)",
    "per instance: mean [min–max]",
    "Jain (95% CI)",
    "slowdown vs N=1",
    "host CPU",
    "host mem / instance",
    "rounds",
    "stopped by",
]


@dataclass(frozen=True)
class BenchView:
    benchmark: str
    unit: str  # of the throughputs
    description: str
    points: list[ScalePoint]


def view(data: RunData) -> list[BenchView]:
    pts = scaling.points(data)
    return [BenchView(b.name, scaling.rate_unit(b), b.description, pts.get(b.name, [])) for b in data.benchmarks]


# -- figures as text ---------------------------------------------------------------
def _finite(e: Estimate) -> bool:
    return e.ci.bounded


def rate_ci(e: Estimate) -> str:
    """1.23 Mops/s ±0.8% (the 95% CI's half-width relative to the mean)."""
    if not _finite(e) or not e.value:
        return f"{fmt_rate(e.value, e.unit)} (no CI)"
    return f"{fmt_rate(e.value, e.unit)} ±{fmt_pct(e.ci.halfwidth / e.value)}"


def plain_ci(e: Estimate | None, digits: int = 3, suffix: str = "") -> str:
    if e is None:
        return "-"
    if not _finite(e):
        return f"{e.value:.{digits}f}{suffix} (no CI)"
    if e.ci_low == e.ci_high:
        return f"{e.value:.{digits}f}{suffix}"
    return f"{e.value:.{digits}f}{suffix} ({e.ci_low:.{digits}f}–{e.ci_high:.{digits}f})"


def cpu_text(e: Estimate | None) -> str:
    if e is None:
        return "-"
    if not _finite(e):
        return f"{e.value:.0f}%"
    return f"{e.value:.0f}% ±{e.ci.halfwidth:.0f}"


def mem_text(p: ScalePoint) -> str:
    m = p.host_mem_mb
    if not m:
        return "-"
    mean = sum(m) / len(m)
    return f"{sig(mean)} MiB" + (f" [{sig(min(m))}–{sig(max(m))}]" if len(m) > 1 else "")


def row(p: ScalePoint) -> list[str]:
    mean, lo, hi = scaling.per_instance_spread(p)
    unit = p.aggregate.unit
    return [
        str(p.n),
        f"{p.vcpus}/{p.host_cpus} ({p.overcommit:.2g}x)",
        rate_ci(p.aggregate),
        fmt_rate_range(mean, lo, hi, unit),
        plain_ci(p.jain),
        plain_ci(p.slowdown, 2, "x"),
        cpu_text(p.host_cpu_pct),
        mem_text(p),
        str(p.rounds),
        p.stopped_by + (f": {p.reason}" if p.reason else ""),
    ]


def header(data: RunData) -> str:
    cfg = data.config
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(data.started))
    host = f" · on {data.host}" if data.host else ""
    return (
        f"scale run {data.id} ({data.status}) · {when}{host} · {cfg.get('target')} at N = "
        f"{', '.join(str(n) for n in cfg.get('instances', []))}\n"
        f"{cfg.get('pinning', '')}\n"
        f"rounds of {cfg.get('round_time', 0):g} s timed after a synchronized start, "
        f"{cfg.get('min_rounds')} to {cfg.get('max_rounds')} per N (until the aggregate's 95% CI is "
        f"within ±{fmt_pct(cfg.get('precision'))}), budget {fmt_duration(cfg.get('max_time', 0))}\n"
        f"command: {data.command}"
    )


NOTES = (
    "throughput: operations per second of an agent row (1e9 x ops / ns over each instance's timed "
    "samples), a workload's own rate; aggregate: the sum over the N instances, per round; Jain: "
    "(sum x)^2 / (N x sum x^2) over the instances, per round (1 = an equal share); slowdown: one "
    "instance alone over one of N; host CPU: every host CPU, from /proc/stat over each round (other "
    "work on the host counts too); host mem: proportional set size of each instance's host "
    "processes; 95% CIs over rounds"
)


def warnings(data: RunData, v: BenchView) -> list[str]:
    """Where a stage's rounds lasted well past the timed work (scaling.drawn_out)."""
    asked = float(data.config.get("round_time", 0) or 0)
    return [
        f"N={p.n}: rounds took {min(p.round_s):.1f}–{max(p.round_s):.1f} s on the host for {asked:g} s of "
        f"timed work: the copies did not run side by side all along (a workload's start inside each copy "
        f"is not behind the barrier): its aggregate and spread are not the share's alone"
        for p in v.points
        if asked and scaling.drawn_out(p, asked)
    ]


def text(data: RunData, views: list[BenchView]) -> str:
    out = [header(data), ""]
    for v in views:
        out.append(f"{v.benchmark}: {v.description} -- throughput in {v.unit}")
        if v.points:
            out.append(table.render(HEADER, [row(p) for p in v.points], align="lrrrrrrrrl"))
        else:
            out.append("  no complete round")
        out += [f"  ! {w}" for w in warnings(data, v)]
        out.append("")
    out.append(NOTES)
    return "\n".join(out)


def markdown(data: RunData, views: list[BenchView]) -> str:
    cfg = data.config
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(data.started))
    out = [
        f"### vmtax scale `{data.id}` ({data.status})",
        "",
        f"{when} · `{md_cell(cfg.get('target'))}` at N = {', '.join(str(n) for n in cfg.get('instances', []))}"
        f" · {md_cell(cfg.get('pinning', ''))} · rounds of {cfg.get('round_time', 0):g} s after a "
        f"synchronized start · command `{md_cell(data.command)}`",
        "",
    ]
    for v in views:
        out += [
            f"**{v.benchmark}** ({md_cell(v.description)}), throughput in {v.unit}:",
            "",
            "| " + " | ".join(HEADER) + " |",
            "|" + "---:|" * (len(HEADER) - 1) + "---|",
        ]
        out += ["| " + " | ".join(md_cell(c) for c in row(p)) + " |" for p in v.points]
        out += [""] + [f"- ⚠ {md_cell(w)}" for w in warnings(data, v)] if warnings(data, v) else []
        out.append("")
    out.append(f"_{NOTES}_")
    return "\n".join(out) + "\n"


# -- JSON ----------------------------------------------------------------------------


def figure(e: Estimate | None) -> dict | None:
    return None if e is None else _figure(e)


def _figure(e: Estimate) -> dict:
    ends = interval(e.ci, "value")
    return {"value": ends.pop("value"), "unit": e.unit, **ends}


def point_json(p: ScalePoint) -> dict:
    mean, lo, hi = scaling.per_instance_spread(p)
    mem = p.host_mem_mb
    return {
        "n": p.n,
        "aggregate": figure(p.aggregate),
        "per_instance": [{"instance": k + 1, **_figure(e)} for k, e in enumerate(p.per_instance)],
        "jain": figure(p.jain),
        "slowdown": figure(p.slowdown),
        "host_cpu_pct": figure(p.host_cpu_pct),
        "vcpus": p.vcpus,
        "host_cpus": p.host_cpus,
        # beyond the contract's keys
        "per_instance_stats": {"mean": mean, "min": lo, "max": hi, "unit": p.aggregate.unit},
        "host_mem_per_instance": (
            {"value": sum(mem) / len(mem), "unit": "MiB", "min": min(mem), "max": max(mem)} if mem else None
        ),
        "overcommit": json_number(p.overcommit),
        "rounds": p.rounds,
        "round_seconds": list(p.round_s),
        "stopped_by": p.stopped_by,
    }


def document(data: RunData, views: list[BenchView]) -> dict | list:
    """The contract's object for a run of one benchmark; a list of them,
    one per benchmark, for a run of several."""
    docs = [
        {
            "schema": SCHEMA,
            "run_id": data.id,
            "target": data.config.get("target"),
            "benchmark": v.benchmark,
            "instances": [point_json(p) for p in v.points],
            "status": data.status,
            "pinning": data.config.get("pinning"),
        }
        for v in views
    ]
    return docs[0] if len(docs) == 1 else docs


# -- HTML ----------------------------------------------------------------------------
def charts(v: BenchView) -> str:
    if not v.points:
        return ""
    ns = [p.n for p in v.points]
    agg = [p.aggregate.ci for p in v.points]
    each = [Interval(e.value / p.n, e.ci_low / p.n, e.ci_high / p.n) for p in v.points for e in [p.aggregate]]
    spread = [scaling.per_instance_spread(p)[1:] for p in v.points]
    throughput = plots.throughput_vs_n(f"{v.benchmark}: throughput", v.unit, ns, agg, each, spread)
    fairness = plots.versus_n(
        f"{v.benchmark}: fairness",
        "Jain's index",
        ns,
        [("Jain's index", [p.jain.ci for p in v.points])],
        ylim=(0.0, 1.05),
    )
    return (
        f'<div class="charts"><figure>{throughput}<figcaption>{escape(v.benchmark)}: the N instances '
        f"together and one of them on average, error bars: 95% CI over rounds</figcaption></figure>"
        f"<figure>{fairness}<figcaption>1 = every instance got the same share; 1/N = one got it all; "
        f"error bars: 95% CI over rounds</figcaption></figure></div>"
    )


def html_section(data: RunData) -> str:
    """A scale run's section of the HTML report (report/html.py)."""
    views = view(data)
    cfg = data.config
    parts = [
        f'<section id="run-{escape(data.id)}"><h2>Run {escape(data.id)} · scale · {escape(data.status)}</h2>',
        f'<p class="meta">{escape(cfg.get("target", "?"))} at N = '
        f"{escape(', '.join(str(n) for n in cfg.get('instances', [])))} · {escape(cfg.get('pinning', ''))}"
        f" · rounds of {cfg.get('round_time', 0):g} s after a synchronized start"
        f"<br>command: <code>{escape(data.command)}</code></p>",
    ]
    for v in views:
        rows = []
        for p in v.points:
            cells = row(p)
            rows.append(
                "<tr>"
                + td(cells[0], p.n)
                + td(cells[1], p.overcommit)
                + td(cells[2], p.aggregate.value)
                + td(cells[3], scaling.per_instance_spread(p)[0])
                + td(cells[4], p.jain.value)
                + td(cells[5], p.slowdown.value if p.slowdown else None)
                + "".join(td(c) for c in cells[6:9])
                + td(cells[9], cls="l")
                + "</tr>"
            )
        parts += [
            f"<h3>{escape(v.benchmark)}: throughput in {escape(v.unit)}</h3>",
            f'<p class="meta">{escape(v.description)}</p>',
            table_html(HEADER, rows, left=0),
            "".join(f'<div class="warn">⚠ {escape(w)}</div>' for w in warnings(data, v)),
            charts(v),
        ]
    parts += [f'<p class="meta">{escape(NOTES)}</p></section>']
    return "".join(parts)
