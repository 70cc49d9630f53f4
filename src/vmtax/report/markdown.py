"""Markdown export of a stored run: pastes cleanly into a GitHub issue or a
mailing-list post (seed 001's scoreboard shape, a short environment header)."""
from __future__ import annotations

import time

from ..model import Comparison, Measurement, RunData
from . import scoreboard
from .scoreboard import md_cell as _cell
from .units import fmt_pct, fmt_value



def document(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> str:
    if data.kind == "compare":
        return scoreboard.render_markdown(data, ms, cs)
    if data.kind == "scale":
        from . import scale
        return scale.markdown(data, scale.view(data))
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(data.started))
    env = data.targets[0].facts if data.targets else {}
    out = [f"### vmtax run `{data.id}` ({data.status})", "",
           f"{when} · target `{_cell(', '.join(t.name for t in data.targets))}` on "
           f"{_cell(env.get('cpu_model', '?'))} ({env.get('cpus_online', '?')} CPUs), kernel "
           f"{_cell(env.get('kernel', '?'))}; command `{_cell(data.command)}`.", "",
           "| benchmark | target | mean | ±95% CI | median | best 3/5 | n | stopped by |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
    for m in ms:
        s, u = m.summary, m.benchmark.unit
        if s is None:
            out.append(f"| {m.benchmark.name} | {_cell(m.target)} | - | - | - | - | 0 | "
                       f"{m.stopped_by}{': ' + _cell(m.reason) if m.reason else ''} |")
            continue
        out.append(f"| {m.benchmark.name} | {_cell(m.target)} | {fmt_value(s.mean, u)} | "
                   f"±{fmt_pct(s.ci_rel, 2)} | {fmt_value(s.median, u)} | {fmt_value(s.best3of5, u)} | "
                   f"{s.n} | {m.stopped_by}{': ' + _cell(m.reason) if m.reason else ''} |")
    return "\n".join(out) + "\n"
