"""The terminal report of a run: one row per benchmark and target."""
from __future__ import annotations

import time

from ..model import Measurement, RunData
from . import table
from .units import fmt_duration, fmt_goal
from .view import TEXT, Table


def run_header(data: RunData) -> str:
    cfg = data.config
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(data.started))
    pin = f"pinned to host CPU {cfg['cpu']}" if cfg.get("cpu") is not None else "unpinned"
    host = f" · on {data.host}" if data.host else ""
    return (f"run {data.id} ({data.status}) · {when}{host} · targets: {', '.join(t.name for t in data.targets)}\n"
            f"goal: 95% CI within ±{fmt_goal(cfg.get('precision'))} of the mean, budget "
            f"{fmt_duration(cfg.get('max_time', 0))} · {pin} · "
            f"{cfg.get('samples_per_process')} samples/process after {cfg.get('warmup')} warmup "
            f"(of the baseline's length)\n"
            f"command: {data.command}")


def measurements_table(view: Table) -> str:
    cols = view.shown(TEXT)
    return table.render([c.title_in(TEXT) for c in cols], view.texts(TEXT),
                        align="".join(c.align for c in cols), groups=view.groups())


def stop_tally(ms: list[Measurement]) -> str:
    counts: dict[str, int] = {}
    for m in ms:
        counts[m.stopped_by] = counts.get(m.stopped_by, 0) + 1
    return "stopped by: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def runs_table(runs: list[dict]) -> str:
    rows = [[r["id"], r["kind"], time.strftime("%Y-%m-%d %H:%M", time.localtime(r["started"])),
             r["host"] or "-", r["status"], r["targets"] or "", str(r["benchmarks"]), str(r["samples"])]
            for r in runs]
    return table.render(["run", "kind", "started", "host", "status", "targets", "benchmarks", "samples"],
                        rows, align="lllllrrr" if rows else None) if rows else "no runs stored"
