"""A row's history and the diff of two runs, as the dashboard shows them:
`vmtax history`'s series and change points (watch.series, watch.change_points)
and `vmtax diff`'s ratio of ratios (watch.diff), with what the pages add: the
two sides' own values under the ratio, and the diff's changes sorted, the
significant ones first, counted by direction."""

from __future__ import annotations

import math

from .. import watch
from ..errors import UserError
from ..model import Interval, RunData
from ..report import watch as watch_report
from ..report.units import json_number
from . import charts, queries, summary
from .data import Reader

MAX_RUNS = 1000


def _sides(s: watch.Series, runs: dict[str, RunData], figs: dict[str, list[dict]]) -> list[dict]:
    """Per point, the baseline's and the candidate's own means with their intervals."""
    out = []
    for p in s.points:
        names = watch.known_as(runs[p.run])
        f = next(
            f
            for f in figs[p.run]
            if (names[f["baseline"]], names[f["candidate"]], f["benchmark"]) == (s.baseline, s.candidate, s.benchmark)
        )
        row: dict[str, object] = {"run": p.run}
        for side, prefix in (("baseline", "base"), ("candidate", "cand")):
            row[side] = {k: json_number(f[f"{prefix}_{k}"]) for k in ("mean", "ci_low", "ci_high")}
        out.append(row)
    return out


def series(ids: list[str], runs: dict[str, RunData], figs: dict[str, list[dict]]) -> list[watch.Series]:
    """Each (baseline, candidate, benchmark)'s ratio over the runs (ids: newest first), oldest
    first, targets matched by what they are known as: watch.series over the runs' figures."""
    out: dict[tuple[str, str, str], watch.Series] = {}
    for run_id in sorted(ids, key=lambda i: runs[i].started):
        data, names = runs[run_id], watch.known_as(runs[run_id])
        for f in figs[run_id]:
            key = (names[f["baseline"]], names[f["candidate"]], f["benchmark"])
            s = out.setdefault(key, watch.Series(f["benchmark"], *key[:2], f["unit"], f["direction"], []))
            s.points.append(
                watch.Point(run_id, data.started, Interval(f["ratio"], f["ci_low"], f["ci_high"]), f["estimand"])
            )
    return list(out.values())


def _series(reader: Reader, q: dict[str, str], limit: int):
    """The row's series over the latest runs that measured it, the runs and their figures:
    four queries where the runs are summarised (store.figures), whatever their number."""
    ids = [run_id for run_id, _ in queries.compare_runs(reader, q["bench"], q.get("host", ""), limit)]
    runs, figs = reader.heads(ids), reader.figures(ids, q["bench"])
    return [s for s in series(ids, runs, figs) if s.points], runs, figs


def history_page(reader: Reader, q: dict[str, str], limit: int) -> dict:
    """One row's history: its ratio per run with change points, both sides'
    values; the other series of the benchmark as choices."""
    if not q.get("bench"):
        raise UserError("say which row: ?bench=NAME (and &candidate=, &baseline=, &host=)")
    limit = max(4, min(limit, MAX_RUNS))
    all_series, runs, figs = _series(reader, q, limit)
    choices = [{"candidate": s.candidate, "baseline": s.baseline, "points": len(s.points)} for s in all_series]
    match = [
        s
        for s in all_series
        if (not q.get("candidate") or s.candidate == q["candidate"])
        and (not q.get("baseline") or s.baseline == q["baseline"])
    ]
    if not match:
        return {"query": q, "series": None, "choices": choices, "sides": []}
    s = match[0]
    s.changes = watch.change_points(s, {run_id: watch.flat_facts(data) for run_id, data in runs.items()})
    return {
        "query": {**q, "candidate": s.candidate, "baseline": s.baseline},
        "series": watch_report.history_json([s])[0],
        "choices": choices,
        "sides": _sides(s, runs, figs),
    }


def history_charts(model: dict) -> dict[str, str]:
    """The history page's three charts: the ratio, then each side's own values."""
    s = model["series"]
    if s is None:
        return {}
    points, cps = s["points"], s["change_points"]
    marks = [
        charts.Mark(
            c["index"],
            points[c["index"] - 1]["run"],
            c["run"],
            f"change point at {c['run']}: {c['before']:.4g} → {c['after']:.4g}; "
            + (_facts_said(c["facts"]) or "no fact changed there")
            + "; click: the diff",
        )
        for c in cps
    ]

    def dot(run: str, v: dict, what: str) -> charts.Dot:
        val, lo, hi = (_num(v.get(k)) for k in ("ratio" if "ratio" in v else "mean", "ci_low", "ci_high"))
        return charts.Dot(run, val, lo, hi, f"{run}: {what} {val:.4g} [{lo:.4g}, {hi:.4g}]")

    ratio = [dot(p["run"], p, "ratio") for p in points]
    out = {"ratio": charts.trend(f"{s['benchmark']}: {s['candidate']} / {s['baseline']}", "ratio", ratio, marks)}
    for side in ("candidate", "baseline"):
        dots = [dot(x["run"], x[side], s[side]) for x in model["sides"]]
        out[side] = charts.trend(f"{s[side]}'s own value", s["unit"], dots, marks, height=200)
    return out


def _facts_said(facts: list[dict], most: int = 6) -> str:
    said = [f"{f['fact']}: {f['before']} → {f['after']}" for f in facts[:most]]
    return "; ".join(said) + (f"; and {len(facts) - most} more" if len(facts) > most else "")


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) else math.nan


# -- diff ---------------------------------------------------------------------------------
def moved(c: dict) -> str:
    """'worse', 'better' or 'within' (its interval holds no change)."""
    lo, hi = c["ci_low"], c["ci_high"]
    if lo is None or hi is None or lo <= 1 <= hi:
        return "within"
    up = lo > 1
    return "worse" if up == (c["direction"] == "lower") else "better"


def diff_page(reader: Reader, a_ref: str, b_ref: str) -> dict:
    if not a_ref or not b_ref:
        raise UserError("say which two runs: ?a=RUN&b=RUN")
    ids = [reader.resolve(a_ref), reader.resolve(b_ref)]
    runs = reader.heads(ids)
    for data in runs.values():
        if data.kind != "compare" or len(data.targets) < 2:
            raise UserError(f"run {data.id} is a {data.kind} run: a diff reads compare runs")
    figs = reader.figures(ids)
    a, b = runs[ids[0]], runs[ids[1]]
    try:
        doc = watch_report.diff_json(watch.diff(a, summary.comparisons(figs[a.id]), b, summary.comparisons(figs[b.id])))
    except ValueError as e:
        raise UserError(str(e)) from None
    for c in doc["changes"]:
        c["moved"] = moved(c)
        c["significant"] = c["moved"] != "within"
    doc["changes"].sort(
        key=lambda c: (not c["significant"], -abs(math.log(c["change"])) if c["change"] else 0, c["benchmark"])
    )
    doc["counts"] = {k: sum(1 for c in doc["changes"] if c["moved"] == k) for k in ("worse", "better", "within")}
    doc["host_a"], doc["host_b"] = a.host, b.host
    return doc
