"""Markdown export of a stored run: pastes cleanly into a GitHub issue or a
mailing-list post (seed 001's scoreboard shape, a short environment header)."""
from __future__ import annotations

from ..model import Comparison, Measurement, RunData
from . import scoreboard, view
from .scoreboard import md_cell
from .view import MD, Table



def md_table(t: Table) -> list[str]:
    """A view's measurements as Markdown table lines."""
    cols = t.shown(MD)
    return (["| " + " | ".join(c.title_in(MD) for c in cols) + " |",
             "|" + "".join("---|" if c.align == "l" else "---:|" for c in cols)]
            + ["| " + " | ".join(md_cell(x) for x in row) + " |" for row in t.texts(MD)])


def document(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> str:
    if data.kind == "compare":
        return scoreboard.render_markdown(data, ms, cs)
    if data.kind == "scale":
        from . import scale
        return scale.markdown(data, scale.view(data))
    h = view.header(data)
    t = view.measurements(data, ms, cs)
    out = [f"### vmtax run `{h.id}` ({h.status})", "",
           f"{h.when(utc=True)} · target `{md_cell(', '.join(h.targets))}` on {md_cell(h.machine)}; "
           f"command `{md_cell(h.command)}`.", "",
           *md_table(t)]
    items = scoreboard.mode_items(t)
    out += [""] + items[:-1] if items else []  # (the document ends in a newline of its own)
    return "\n".join(out) + "\n"
