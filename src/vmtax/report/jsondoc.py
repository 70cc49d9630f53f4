"""The JSON document a script can rely on (schema 1)."""
from __future__ import annotations


from ..metrics import unit_of
from ..model import Comparison, Measurement, Modes, RunData, Stratum
from ..suite.workloads import of_spec
from . import view
from .units import json_number
from .view import JSON, Table

SCHEMA = 1


def result_rows(t: Table) -> list[dict]:
    return [{**{k: json_number(v) for k, v in values.items()}, "metrics": metric_rows(r.m.metrics, r.m.benchmark.name),
             "modes": modes_row(r.m.modes)}
            for r, values in zip(t.rows, t.values(JSON))]


def modes_row(m: Modes | None) -> dict | None:
    """Where a row's process means fell in two modes (stats.modes): each
    mode's mean, the slow one's share, and how clearly two."""
    if m is None:
        return None
    return {"fast": json_number(m.fast), "slow": json_number(m.slow), "slow_share": json_number(m.slow_share),
            "processes": m.units, "cut": json_number(m.cut), "bic_gain": json_number(m.bic_gain),
            "separation": json_number(m.separation)}


def metric_rows(metrics: dict, benchmark: str = "") -> dict:
    """name -> {unit, mean, ci_low, ci_high, n}: per operation (metrics.py),
    a workload's host cost per unit of its work."""
    w = of_spec(benchmark)
    work = w.work if w is not None else None
    return {name: {"unit": unit_of(name, work), "mean": json_number(s.mean), "ci_low": json_number(s.ci_low),
                   "ci_high": json_number(s.ci_high), "n": s.units}
            for name, s in metrics.items()}


def comparison_row(c: Comparison) -> dict:
    return {
        "benchmark": c.benchmark.name, "suite": c.benchmark.suite, "direction": c.benchmark.direction,
        "unit": c.benchmark.unit, "kind": c.benchmark.kind,
        "baseline": c.baseline, "candidate": c.candidate, "ratio": json_number(c.ratio),
        "ratio_ci_low": json_number(c.ratio_ci_low), "ratio_ci_high": json_number(c.ratio_ci_high),
        "p_value": json_number(c.p_value), "significant": c.significant, "stopped_by": c.stopped_by,
        "metrics": {name: {"ratio": json_number(r), "ci_low": json_number(lo), "ci_high": json_number(hi)}
                    for name, (r, lo, hi) in c.metrics.items()},
        "fast_mode": _stratum(c.fast_mode),
        "same_mode": _stratum(c.same_mode, slow=True),  # both fast or both slow, the modes weighted
        "slow_mode": _stratum(c.slow_mode, slow=True),
        # compare --fast-mode (--same-mode) on a row with two modes: ratio/ratio_ci_* are fast_mode's
        # (same_mode's), and these every block's
        "estimand": c.estimand,
        "all_modes": _stratum(c.all_modes),
        # a candidate that stopped before the baseline: the baseline's modes over the blocks the two share,
        # which the ratio was judged by (null: one mode there), and that block count; absent otherwise
        **({"baseline_shared_blocks": c.base_shared, "baseline_modes": modes_row(c.base_modes)}
           if c.base_shared else {}),
    }


def _stratum(s: Stratum | None, slow: bool = False) -> dict | None:
    """A ratio over some of a row's blocks (model.Stratum): its figures are
    null where the stratum had too few blocks for an interval."""
    if s is None:
        return None
    return {"ratio": json_number(s.ratio), "ci_low": json_number(s.ci_low), "ci_high": json_number(s.ci_high),
            "p_value": json_number(s.p_value), "blocks": s.blocks, "of_blocks": s.of_blocks,
            **({"slow_blocks": s.slow_blocks} if slow else {})}  # same_mode's and slow_mode's: of its blocks


def document(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> dict:
    t = view.measurements(data, ms, cs)
    doc = {
        "schema": SCHEMA, "run_id": data.id, "kind": data.kind, "status": data.status,
        "command": data.command, "vmtax_version": data.vmtax_version, "host": data.host, "user": data.user,
        "started": data.started, "finished": data.finished, "config": data.config,
        "environment": data.targets[0].facts if data.targets else {},
        "targets": [{"name": t.name, "kind": t.kind, "accel": t.accel, "boot_s": t.boot_s,
                     "idle_cpu_pct": t.idle_cpu_pct, "mem_overhead_mb": t.mem_overhead_mb,
                     "agent_hash": data.agent_hashes.get(t.name), "facts": t.facts}
                    for t in data.targets],
        "results": result_rows(t),
    }
    if data.kind == "compare" or cs:  # each candidate's row of the view carries its comparison
        doc["comparisons"] = [comparison_row(r.c) for r in t.rows if r.c is not None]
    return doc
