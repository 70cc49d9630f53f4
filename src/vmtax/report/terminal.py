"""The terminal report of a run: one row per benchmark and target."""
from __future__ import annotations

import textwrap
import time

from ..model import Measurement, RunData
from . import table, view
from .view import TEXT, Table


def run_header(data: RunData) -> str:
    h = view.header(data)
    host = f" · on {h.host}" if h.host else ""
    return (f"run {h.id} ({h.status}) · {h.when()}{host} · targets: {', '.join(h.targets)}\n"
            f"goal: 95% CI within ±{h.goal} of the mean, budget {h.budget} · {h.pinning}"
            + (f" · {h.per_process}" if h.per_process else "") + (f" · {h.estimand}" if h.estimand else "") + "\n"
            f"command: {h.command}")


def measurements_table(view: Table) -> str:
    cols = view.shown(TEXT)
    return table.render([c.title_in(TEXT) for c in cols], view.texts(TEXT),
                        align="".join(c.align for c in cols), groups=view.groups())


def mode_lines(t: Table) -> str:
    """The rows whose processes fell in two modes, a sentence each ('' if none)."""
    return "\n".join(textwrap.fill(text, 100, subsequent_indent="    ", break_on_hyphens=False)
                     for text in view.mode_texts(t))


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
