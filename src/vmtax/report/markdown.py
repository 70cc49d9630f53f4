"""Markdown export of a stored run: pastes cleanly into a GitHub issue or a
mailing-list post (seed 001's scoreboard shape, a short environment header)."""
from __future__ import annotations

import time

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
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(data.started))
    env = data.targets[0].facts if data.targets else {}
    out = [f"### vmtax run `{data.id}` ({data.status})", "",
           f"{when} · target `{md_cell(', '.join(t.name for t in data.targets))}` on "
           f"{md_cell(env.get('cpu_model', '?'))} ({env.get('cpus_online', '?')} CPUs), kernel "
           f"{md_cell(env.get('kernel', '?'))}; command `{md_cell(data.command)}`.", "",
           *md_table(view.measurements(data, ms, cs))]
    return "\n".join(out) + "\n"
