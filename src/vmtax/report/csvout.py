"""CSV export: one row per benchmark and target of every run, with the
host it was measured on and the candidate's ratio to the baseline where the
run is a comparison."""
from __future__ import annotations

import csv
import io

from ..metrics import order
from ..model import Comparison, Measurement, RunData

COLUMNS = ["run_id", "host", "kind", "benchmark", "suite", "direction", "unit", "target", "role", "n",
           "processes", "mean", "median", "ci_low", "ci_high", "stdev", "min", "best3of5",
           "stopped_by", "reason", "ratio", "ratio_ci_low", "ratio_ci_high", "p_value", "significant"]


def _num(x) -> str:
    return "" if x is None else repr(float(x))


def rows(data: RunData, ms: list[Measurement], cs: list[Comparison],
         metric_names: list[str] = ()) -> list[list[str]]:
    base = data.targets[0].name if data.targets else ""
    cby = {(c.candidate, c.benchmark.name): c for c in cs}
    out = []
    for m in ms:
        s = m.summary
        c = cby.get((m.target, m.benchmark.name))
        out.append([data.id, data.host or "", data.kind, m.benchmark.name, m.benchmark.suite, m.benchmark.direction,
                    m.benchmark.unit, m.target, "baseline" if m.target == base else "candidate",
                    str(s.n if s else 0), str(m.processes),
                    *[_num(getattr(s, k)) if s else "" for k in
                      ("mean", "median", "ci_low", "ci_high", "stdev", "min", "best3of5")],
                    m.stopped_by, m.reason,
                    *([_num(c.ratio), _num(c.ratio_ci_low), _num(c.ratio_ci_high), _num(c.p_value),
                       str(c.significant).lower()] if c else ["", "", "", "", ""]),
                    *[_num(m.metrics[n].mean) if n in m.metrics else "" for n in metric_names]])
    return out


def document(runs: list[tuple[RunData, list[Measurement], list[Comparison]]]) -> str:
    """One row per benchmark and target; then one column per metric any of
    them counted (per operation, the mean: intervals are in the JSON)."""
    names = order({n for _, ms, _ in runs for m in ms for n in m.metrics})
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS + names)
    for data, ms, cs in runs:
        w.writerows(rows(data, ms, cs, names))
    return buf.getvalue()
