"""The terminal report of a run: the scoreboard of a compare run
(scoreboard.Board laid out), or one row per benchmark and target."""
from __future__ import annotations

import textwrap
import time

from ..model import Measurement, RunData
from . import facts, table, view
from .scoreboard import DIRECTIONS, WIDTH, Board
from .units import fmt_ratio2
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


def _fill(text: str, indent: str = "") -> str:
    return textwrap.fill(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


def scoreboard(board: Board) -> str:
    """The board's table, one per direction, its legend and its notes."""
    fields = board.shown(TEXT)
    out = []
    for direction, title in DIRECTIONS.items():
        groups = [g for g in board.groups if g.direction == direction]
        if not groups:
            continue
        header = ["benchmark"] + [f.title_in(TEXT, k, board.baseline) for k in board.candidates for f in fields]
        body, titles = [], []
        for g in groups:
            titles.append((len(body), g.suite))
            body += [["  " + line.spec.name] + [f.text_in(x, TEXT) for x in line.cells for f in fields]
                     for line in g.lines]
            body.append(["  geomean"] + [t for gm in g.geomeans for t in [fmt_ratio2(gm)] + [""] * (len(fields) - 1)])
        out.append(f"{title} (ratios to {board.baseline})")
        out.append(table.render(header, body, align="l" + "l" * len(fields) * len(board.candidates), groups=titles))
        out.append("")
    out.append(_fill(" · ".join(board.legend(fields, TEXT))))
    out += [_fill(f"[{i}] {text}", "    ") for i, text in enumerate(board.reasons, 1)]
    out += [_fill(f"{view.MODES_MARK} {n.text}", "    ") for n in board.modes]
    return "\n".join(out)


def targets(t: facts.Targets) -> str:
    """The table of targets, and the notes under it."""
    cols = t.shown(TEXT)
    out = [table.render([c.title for c in cols], t.texts(TEXT), align="".join(c.align for c in cols))]
    out += [textwrap.fill(", ".join(names) + f": {note}", WIDTH, initial_indent="  ", subsequent_indent="    ")
            for names, note in t.notes]
    return "\n".join(out)
