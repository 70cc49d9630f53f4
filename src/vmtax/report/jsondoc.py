"""The JSON document a script can rely on (schema 1): a key once given is
never renamed or dropped; new ones are added.  Its parts are the views'
(view.Table's results, scoreboard.Board's comparisons and verdict,
facts.Targets' targets), laid out here."""

from __future__ import annotations

from ..metrics import unit_of
from ..model import Comparison, Measurement, RunData
from ..suite.workloads import of_spec
from . import facts, scoreboard
from .jsonparts import interval, modes_row
from .units import json_number
from .view import JSON, Table

SCHEMA = 1


def result_rows(t: Table) -> list[dict]:
    return [
        {
            **{k: json_number(v) for k, v in values.items()},
            "metrics": metric_rows(r.m.metrics, r.m.benchmark.name),
            "modes": modes_row(r.m.modes),
        }
        for r, values in zip(t.rows, t.values(JSON), strict=True)
    ]


def metric_rows(metrics: dict, benchmark: str = "") -> dict:
    """name -> {unit, mean, ci_low, ci_high, n}: per operation (metrics.py),
    a workload's host cost per unit of its work."""
    w = of_spec(benchmark)
    work = w.work if w is not None else None
    return {
        name: {
            "unit": unit_of(name, work),
            **interval(s.ci, "mean"),
            "n": s.units,
        }
        for name, s in metrics.items()
    }


def comparisons(board: scoreboard.Board) -> list[dict]:
    """One object per cell with a comparison, its keys the board's JSON fields."""
    fields = board.shown(JSON)
    out = []
    for x in board.cells:
        if x.c is not None:
            values = ((f.key, f.value(x)) for f in fields)
            out.append({k: json_number(v) for k, v in values if v is not scoreboard.OMIT})
    return out


def verdict(v: scoreboard.Verdict) -> dict:
    return {
        "ratios": v.ratios,
        "precise": v.precise,
        "significant": v.significant,
        "goal": json_number(v.goal),
        "median_halfwidth": json_number(v.median),
        "stopped_by": v.stopped,
        "budget": {
            "ratios": v.budget,
            "median_halfwidth": json_number(v.budget_median),
            "blocks_to_goal": json_number(v.more_blocks),
        },
    }


def host_state(board: scoreboard.Board) -> list[dict]:
    """The candidates whose tax moved with the host's state (view.state_notes)."""
    return [
        {
            "candidate": n.candidate,
            "rows": n.rows,
            "higher": n.up,
            "lower": n.down,
            "median_change": json_number(n.median),
            "p_value": json_number(n.p_value),
        }
        for n in board.states
    ]


def targets(t: facts.Targets) -> list[dict]:
    return [{k: json_number(v) for k, v in row.items()} for row in t.values(JSON)]


def document(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> dict:
    board = scoreboard.build(data, ms, cs)
    doc = {
        "schema": SCHEMA,
        "run_id": data.id,
        "kind": data.kind,
        "status": data.status,
        "command": data.command,
        "vmtax_version": data.vmtax_version,
        "host": data.host,
        "user": data.user,
        "started": data.started,
        "finished": data.finished,
        "config": data.config,
        "environment": data.targets[0].facts if data.targets else {},
        "targets": targets(board.targets),
        "results": result_rows(board.table),
    }
    if data.kind == "compare" or cs:  # each cell with a ratio carries its comparison
        doc["comparisons"] = comparisons(board)
        doc["verdict"] = verdict(board.verdict)
        doc["host_state"] = host_state(board)
    return doc
