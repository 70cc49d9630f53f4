"""The terminal report of a run: one row per benchmark and target."""
from __future__ import annotations

import time

from ..model import Measurement, RunData
from . import table
from .units import fmt_duration, fmt_goal, fmt_pct, fmt_value


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


def measurements_table(ms: list[Measurement]) -> str:
    header = ["benchmark", "target", "mean", "95% CI", "median", "best 3/5", "min", "n", "procs",
              "harness", "stopped by"]
    rows, groups, suite = [], [], None
    for m in ms:
        if m.benchmark.suite != suite:
            suite = m.benchmark.suite
            groups.append((len(rows), f"[{suite}] lower is better" if m.benchmark.direction == "lower"
                           else f"[{suite}] higher is better"))
        s, u = m.summary, m.benchmark.unit
        stopped = m.stopped_by + (f": {m.reason}" if m.reason else "")
        if s is None:
            rows.append([m.benchmark.name, m.target, "-", "-", "-", "-", "-", "0", str(m.processes),
                         "-", stopped])
            continue
        harness = fmt_pct(m.overhead / s.mean, 2) if m.overhead is not None and s.mean else "-"
        rows.append([m.benchmark.name, m.target, fmt_value(s.mean, u), "±" + fmt_pct(s.ci_rel, 2),
                     fmt_value(s.median, u), fmt_value(s.best3of5, u), fmt_value(s.min, u),
                     str(s.n), str(m.processes), harness, stopped])
    return table.render(header, rows, align="llrrrrrrrrl", groups=groups)


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
