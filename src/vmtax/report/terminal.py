"""The terminal report of a run: the scoreboard of a compare run
(scoreboard.Board laid out), or one row per benchmark and target."""

from __future__ import annotations

import textwrap
import time

from ..model import Measurement, RunData
from . import facts, table, view
from .safe import one_line
from .scoreboard import WIDTH, Board
from .units import fmt_ratio2
from .view import TEXT, Table


def run_header(data: RunData) -> str:
    """Which run, where, what it asked and how it was started, each line wrapped at WIDTH."""
    h = view.header(data)
    host = f" · on {h.host}" if h.host else ""
    return "\n".join(
        _fill(line)
        for line in [
            f"run {h.id} ({h.status}) · {h.when()}{host} · {', '.join(h.targets)}",
            f"goal: ±{h.goal} (95% CI) in {h.budget} · {h.pinning}"
            + (f" · {h.per_process}" if h.per_process else "")
            + (f" · {h.flag}" if h.flag else ""),
            f"command: {h.command}",
        ]
    )


def measurements_table(view: Table) -> str:
    cols = view.shown(TEXT)
    return table.render(
        [c.title_in(TEXT) for c in cols], view.texts(TEXT), align="".join(c.align for c in cols), groups=view.groups()
    )


def mode_lines(t: Table) -> str:
    """The rows whose processes fell in two modes, a sentence each ('' if none)."""
    return "\n".join(
        textwrap.fill(text, WIDTH, subsequent_indent="    ", break_on_hyphens=False) for text in view.mode_texts(t)
    )


def stop_tally(ms: list[Measurement]) -> str:
    counts: dict[str, int] = {}
    for m in ms:
        counts[m.stopped_by] = counts.get(m.stopped_by, 0) + 1
    return "stopped by: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def runs_table(runs: list[dict]) -> str:
    rows = [
        [
            r["id"],
            r["kind"],
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r["started"])),
            r["host"] or "-",
            r["status"],
            r["targets"] or "",
            str(r["benchmarks"]),
            str(r["samples"]),
        ]
        for r in runs
    ]
    return (
        table.render(
            ["run", "kind", "started", "host", "status", "targets", "benchmarks", "samples"],
            rows,
            align="lllllrrr" if rows else None,
        )
        if rows
        else "no runs stored"
    )


def _fill(text: str, indent: str = "    ") -> str:
    return textwrap.fill(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


def _one_line(text: str) -> str:
    """Text on one line of the terminal (a line break in it shown as an escape): cut with an
    ellipsis where longer (said in full by --notes)."""
    text = one_line(text)
    return text if len(text) <= WIDTH else text[: WIDTH - 2].rstrip() + " …"


def scoreboard(board: Board) -> str:
    """What a compare run says, on one screen: the verdict first, then one
    table (a suite's line gives the geometric mean of its ratios), its
    legend, and a line for each note (notes() says them in full)."""
    fields, table_text = _fit(board)
    legend = board.legend(fields, TEXT)
    if board.shown(TEXT) != fields:
        legend.append("raw means: --all-rows")
    if board.reasons or board.modes or board.states:
        legend.append(f"notes in full: vmtax show --notes {board.header.id}")
    out = [_fill(line) for line in board.verdict.lines()]
    out += [
        "",
        _fill(
            f"Ratios to {board.baseline} (lower is better unless a suite says higher; a suite's line: geometric mean)"
        ),
        table_text,
        _fill(" · ".join(legend), ""),
    ]
    out += [_one_line(f"[{i}] {text}") for i, text in enumerate(board.reasons, 1)]
    out += mode_lines_short(board)
    out += [_one_line(n.short) for n in board.states]
    return "\n".join(out)


def _fit(board: Board) -> tuple[list, str]:
    """The fields the table shows, and the table: every field the terminal
    shows where that fits WIDTH, else without those a field's `drop` lets go
    (the highest first) until it does."""
    fields = board.shown(TEXT)
    while True:
        text = _table(board, fields)
        droppable = [f for f in fields if f.drop]
        if max(len(line) for line in text.splitlines()) <= WIDTH or not droppable:
            return fields, text
        worst = max(droppable, key=lambda f: f.drop)
        fields = [f for f in fields if f is not worst]


def _table(board: Board, fields: list) -> str:
    header = ["benchmark"] + [f.title_in(TEXT, k, board.baseline) for k in board.candidates for f in fields]
    body: list[list[str]] = []
    titles = []
    for g in board.groups:
        titles.append(len(body))
        body.append(
            [g.suite + (" (higher is better)" if g.direction == "higher" else "")]
            + [t for gm in g.geomeans for t in [fmt_ratio2(gm)] + [""] * (len(fields) - 1)]
        )
        body += [["  " + line.spec.name] + [f.text_in(x, TEXT) for x in line.cells for f in fields] for line in g.lines]
    return table.render(header, body, align="l" * (1 + len(fields) * len(board.candidates)))


def mode_lines_short(board: Board) -> list[str]:
    """The rows with two modes, then which ratio each gives for which
    candidates, and why where there is room (at most a line per row: rows
    alike share one)."""
    alike: dict[str, list[tuple[str, str]]] = {}  # what they say, without whys -> (benchmark, with them)
    for name, groups in board.mode_rows():
        bare = "; ".join(f"{said} for {', '.join(c for c, _ in cands)}" for said, cands in groups)
        full = "; ".join(
            f"{said} for " + ", ".join(c + (f" ({why})" if why else "") for c, why in cands) for said, cands in groups
        )
        alike.setdefault(bare, []).append((name, full))
    out = []
    for bare, rows in alike.items():
        names, fulls = ", ".join(n for n, _ in rows), {f for _, f in rows}
        tries = ([fulls.pop()] if len(fulls) == 1 else []) + [bare]
        lines = next(
            (
                x
                for x in (_fill(f"{view.MODES_MARK} {names}: {said}").splitlines() for said in tries)
                if len(x) <= len(rows)
            ),
            None,
        )
        out += lines or [_one_line(f"{view.MODES_MARK} {names}: {bare}")]  # one row: its name first, then the cut
    return out


def notes(board: Board) -> str:
    """The notes in full: why each cell without a ratio has none; for each
    row with two modes, both sides' modes and every ratio; each candidate
    whose tax moved with the host's state; the targets' notes ('' if none)."""
    return "\n".join(
        [_fill(f"[{i}] {text}") for i, text in enumerate(board.reasons, 1)]
        + [_fill(f"{view.MODES_MARK} {n.text}") for n in board.modes]
        + [_fill(n.text) for n in board.states]
        + [_fill(", ".join(names) + f": {note}") for names, note in board.targets.notes]
    )


def targets(t: facts.Targets, whole: bool = True) -> str:
    """The table of targets, and the notes under it (whole: each in full,
    else on one line)."""
    cols = t.shown(TEXT)
    notes = [", ".join(names) + f": {note}" for names, note in t.notes]
    return "\n".join(
        [table.render([c.title for c in cols], t.texts(TEXT), align="".join(c.align for c in cols))]
        + [
            textwrap.fill(n, WIDTH, initial_indent="  ", subsequent_indent="    ") if whole else _one_line("  " + n)
            for n in notes
        ]
    )
