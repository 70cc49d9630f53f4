"""Markdown export of a stored run: pastes cleanly into a GitHub issue or a
mailing-list post (seed 001's scoreboard shape, a short environment header)."""

from __future__ import annotations

from ..model import Comparison, Measurement, RunData
from . import facts, scoreboard, view
from .mdkit import md_cell, md_mark
from .scoreboard import DIRECTIONS, Board
from .units import fmt_ratio2
from .view import MD, Table


def md_table(t: Table) -> list[str]:
    """A view's measurements as Markdown table lines."""
    cols = t.shown(MD)
    return [
        "| " + " | ".join(c.title_in(MD) for c in cols) + " |",
        "|" + "".join("---|" if c.align == "l" else "---:|" for c in cols),
    ] + ["| " + " | ".join(md_cell(x) for x in row) + " |" for row in t.texts(MD)]


def mode_items(texts: list[str]) -> list[str]:
    """The two-mode notes as a Markdown list (and a blank line after), or nothing."""
    items = [f"- {md_cell(md_mark(text))}" for text in texts]
    return items + [""] if items else []


def scoreboard_md(board: Board) -> str:
    """The board: its tables by direction, legend, notes and targets."""
    h, base, cands = board.header, board.baseline, board.candidates
    fields = board.shown(MD)
    out = [
        f"### vmtax scoreboard — run `{h.id}`",
        "",
        f"Baseline `{md_cell(base)}` on {md_cell(h.machine)}; command `{md_cell(h.command)}`."
        + (f" Ratios: {md_mark(md_cell(h.estimand))}." if h.estimand else ""),
        "",
        "  \n".join(md_mark(md_cell(line)) for line in board.verdict.lines()),
        "",
    ]
    for direction, title in DIRECTIONS.items():
        groups = [g for g in board.groups if g.direction == direction]
        if not groups:
            continue
        out += [
            f"**{title}**",
            "",
            "| benchmark | " + " | ".join(md_cell(f.title_in(MD, k, base)) for k in cands for f in fields) + " |",
            "|---|" + "---|" * len(fields) * len(cands),
        ]
        for g in groups:
            out.append(f"| **{md_cell(g.suite)}** |" + " |" * (len(fields) * len(cands)))
            out += [
                f"| {md_cell(line.spec.name)} | "
                + " | ".join(md_mark(md_cell(f.text_in(x, MD))) for x in line.cells for f in fields)
                + " |"
                for line in g.lines
            ]
            out.append(
                "| *geomean* | "
                + " | ".join(t for gm in g.geomeans for t in [fmt_ratio2(gm)] + [""] * (len(fields) - 1))
                + " |"
            )
        out.append("")
    out += [md_mark(" · ".join(board.legend(fields, MD)).replace("*", "\\*")), ""]
    out += [md_cell(f"[{i}] {text}") + "  " for i, text in enumerate(board.reasons, 1)] + (
        [""] if board.reasons else []
    )
    out += mode_items([f"{view.MODES_MARK} {n.text}" for n in board.modes] + [n.text for n in board.states])
    out += [targets_md(board.targets)]
    return "\n".join(out)


def targets_md(t: facts.Targets) -> str:
    cols = t.shown(MD)
    lines = ["| " + " | ".join(c.title for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(md_cell(x) for x in row) + " |" for row in t.texts(MD)]
    notes = ["- " + ", ".join(f"`{n}`" for n in names) + f": {note}" for names, note in t.notes]
    return "\n".join(lines + ([""] + notes if notes else []))


def document(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> str:
    if data.kind == "compare":
        return scoreboard_md(scoreboard.build(data, ms, cs))
    if data.kind == "scale":
        from . import scale

        return scale.markdown(data, scale.view(data))
    h = view.header(data)
    t = view.measurements(data, ms, cs)
    out = [
        f"### vmtax run `{h.id}` ({h.status})",
        "",
        f"{h.when(utc=True)} · target `{md_cell(', '.join(h.targets))}` on {md_cell(h.machine)}; "
        f"command `{md_cell(h.command)}`.",
        "",
        *md_table(t),
    ]
    items = mode_items(view.mode_texts(t))
    out += [""] + items[:-1] if items else []  # (the document ends in a newline of its own)
    return "\n".join(out) + "\n"
