"""The dashboard's pages as view-models: plain dicts of JSON's types, which
the templates lay out and ?format=json returns as they are (docs/json.md).
A run's page is the one view-model of `vmtax report --html` and `vmtax show
--json` (report/html.py, report/jsondoc.py), its ratio charts drawn as
inline SVG (charts.ratio_bars); runs, hosts and gates are built here from
the runs' summaries (summary.py: the same analysis, stored at a run's end).
Every string from the store is data: the templates escape it."""

from __future__ import annotations

import math
from html import escape
from urllib.parse import quote

from .. import watch
from ..model import BenchSpec, Comparison, RunData
from ..report import html, jsondoc, plots
from ..report.units import json_number
from ..store import redact
from . import charts, queries, summary
from .data import Digest, Reader


def runs_page(reader: Reader, filters: dict[str, str], page: int, per: int) -> dict:
    found = queries.runs(reader, filters, page, per)
    said = reader.summaries([r["id"] for r in found.runs])
    rows = [
        {**r, "command": redact(r["command"]), "verdict": said[r["id"]][0], "gate": said[r["id"]][1]}
        for r in found.runs
    ]
    return {
        "filters": {k: v for k, v in filters.items() if v},
        "page": found.page,
        "pages": found.pages,
        "per": found.per,
        "total": found.total,
        "runs": rows,
    }


def lazy_figure(data: RunData, spec: BenchSpec, _per) -> str:
    """A distribution chart as an image of its own (distribution_svg), which the browser asks for
    when it comes into view: the page is drawn without the charts' seconds."""
    src = "/runs/" + quote(data.id, safe="") + "/dist/" + quote(spec.name, safe="") + ".svg"
    return f'<img src="{escape(src)}" loading="lazy" width="880" height="264" alt="{escape(spec.name)}: samples">'


def distribution_svg(reader: Reader, run_id: str, bench: str) -> str | None:
    """The distribution chart of one benchmark of a run, as `vmtax report --html` draws it (None: no such chart)."""

    def make() -> tuple[str, str | None]:
        data = reader.load(run_id)
        for spec, per in html.distribution_inputs(data):
            if spec.name == bench:
                return data.status, plots.distribution(spec.name, spec.unit, per)
        return data.status, None

    return reader.pages.get_or(("dist", run_id, bench), make, lambda got: got[0] != "running")[1]


def run_page(reader: Reader, run_id: str) -> tuple[dict, str]:
    """(the run's JSON document, as `vmtax show --json` gives it; the HTML
    section `vmtax report --html` lays out, its distributions as images),
    rendered once per run."""

    def make() -> tuple[str, dict, str]:
        data, d = reader.whole(run_id)
        if data.kind == "scale":
            return data.status, {"run": {"id": data.id, "kind": data.kind}}, html.run_section(data, [], [])
        section = html.run_section(data, d.ms, d.cs, lazy_figure, charts.ratio_bars)
        return data.status, jsondoc.document(data, d.ms, d.cs), section

    _status, doc, section = reader.pages.get_or(run_id, make, lambda page: page[0] != "running")
    return doc, section


def row_links(d: Digest) -> list[dict]:
    """Each ratio of a run, with the link to its history (the row on this host)."""
    names = watch.known_as(d.data)
    return [
        {
            "benchmark": c.benchmark.name,
            "candidate": names[c.candidate],
            "baseline": names[c.baseline],
            "host": d.data.host or "",
        }
        for c in d.cs
    ]


# -- gates -------------------------------------------------------------------------------
def gates_page(reader: Reader, limit: int) -> dict:
    ids = [run_id for run_id, _command in queries.gated(reader, limit)]
    said, runs = reader.summaries(ids), reader.heads(ids)
    pairs: dict[tuple[str, str], list[dict]] = {}
    for run_id in ids:
        g, data = said[run_id][1], runs[run_id]
        if g is None:
            continue
        names = [watch.known_as(data)[t.name] for t in data.targets]
        for cand in names[1:]:
            pairs.setdefault((names[0], cand), []).append(
                {"run": data.id, "started": data.started, "host": data.host, "status": data.status, **g}
            )
    return {"pairs": [{"baseline": b, "candidate": c, "gates": runs} for (b, c), runs in sorted(pairs.items())]}


# -- hosts -------------------------------------------------------------------------------
def geomean(cs: list[Comparison]) -> dict:
    """A suite's geometric mean of ratios, with its 95% interval (rows taken as independent)."""
    logs = [math.log(c.ratio) for c in cs if c.ratio > 0 and math.isfinite(c.ratio)]
    if not logs:
        return {"geomean": None, "ci_low": None, "ci_high": None, "rows": 0}
    g = math.exp(sum(logs) / len(logs))
    ses = [
        (math.log(c.ratio_ci_high) - math.log(c.ratio_ci_low)) / (2 * watch.Z95)
        if c.ratio_ci_low > 0 and math.isfinite(c.ratio_ci_high)
        else math.inf
        for c in cs
    ]
    se = math.sqrt(sum(s * s for s in ses)) / len(ses)
    lo, hi = (g * math.exp(-watch.Z95 * se), g * math.exp(watch.Z95 * se)) if math.isfinite(se) else (None, None)
    return {"geomean": g, "ci_low": lo, "ci_high": hi, "rows": len(logs)}


def _cells(host: str, d: Digest, seen: set[str]) -> list[dict]:
    names = watch.known_as(d.data)
    out = []
    for t in d.data.targets[1:]:
        cand = names[t.name]
        if cand in seen:
            continue
        seen.add(cand)
        mine = [c for c in d.cs if c.candidate == t.name]
        suites = list(dict.fromkeys((c.benchmark.suite, c.benchmark.direction) for c in mine))
        out.append(
            {
                "host": host,
                "target": cand,
                "baseline": names[d.data.targets[0].name],
                "run": d.data.id,
                "suites": [
                    {
                        "suite": s,
                        "direction": direction,
                        **{
                            k: json_number(v)
                            for k, v in geomean(
                                [c for c in mine if (c.benchmark.suite, c.benchmark.direction) == (s, direction)]
                            ).items()
                        },
                    }
                    for s, direction in suites
                ],
            }
        )
    return out


def hosts_page(reader: Reader) -> dict:
    """Each host's facts (its latest compare run's baseline) and its latest tax per target and suite."""
    hosts, cells = [], []
    for host, count, latest in queries.hosts(reader):
        ids = queries.latest_compares(reader, host)
        runs, figs = reader.heads(ids), reader.figures(ids)
        facts: dict = {}
        seen: set[str] = set()
        for run_id in ids:
            data = runs[run_id]
            if not facts and data.targets:
                facts = {k: str(v) for k, v in sorted(data.targets[0].facts.items())}
            cells += _cells(host, Digest(data, [], summary.comparisons(figs[run_id])), seen)
        hosts.append({"host": host, "runs": count, "latest": latest, "facts": facts, "latest_compare": ids[:1]})
    targets = sorted({c["target"] for c in cells})
    return {"hosts": hosts, "targets": targets, "matrix": cells}
