"""CSV export: one row per benchmark and target of every run, with the
host it was measured on and the candidate's ratio to the baseline where the
run is a comparison."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from ..metrics import order
from ..model import Comparison, Measurement, RunData
from . import view
from .view import CSV, Table


def _field(x: object) -> str:
    if x is None:
        return ""
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, float):
        return repr(x)
    return str(x)


def header(t: Table) -> list[str]:
    return [c.name_in(CSV) for c in t.shown(CSV)]


def rows(t: Table, metric_names: Sequence[str] = ()) -> list[list[str]]:
    cols = t.shown(CSV)
    return [
        [_field(c.value(r)) for c in cols]
        + [_field(r.m.metrics[n].mean) if n in r.m.metrics else "" for n in metric_names]
        for r in t.rows
    ]


def document(runs: list[tuple[RunData, list[Measurement], list[Comparison]]]) -> str:
    """One row per benchmark and target; then one column per metric any of
    them counted (per operation, the mean: intervals are in the JSON)."""
    names = order({n for _, ms, _ in runs for m in ms for n in m.metrics})
    views = [view.measurements(data, ms, cs) for data, ms, cs in runs]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header(views[0] if views else view.Table([])) + names)
    for t in views:
        w.writerows(rows(t, names))
    return buf.getvalue()
