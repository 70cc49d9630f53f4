"""The native-vs-virtual scoreboard, in seed 001's shape: grouped by
direction and suite; per benchmark and candidate the ratio, the raw scores
in brackets [candidate/baseline], the 95% CI half-width of each side, and a
flag where the difference is outside the noise.  Text for the terminal
(fits 100 columns with two candidates) and Markdown for pasting."""
from __future__ import annotations

import math
import statistics
import textwrap

from .. import stats
from ..model import Comparison, Measurement, RunData
from . import table, view
from .facts import target_notes
from .units import fmt_goal, fmt_pair, fmt_pct

WIDTH = 100  # the scoreboard fits a 100-column terminal with two candidates
LEGEND = ("ratio = candidate/baseline · [candidate/baseline] raw means · ±c/b = 95% CI half-width "
          "of each mean · * a difference at the 5% level (sign-flip test over blocks run in random "
          "order) · ? the ratio's 95% CI is wider than the precision asked")


class Notes:
    """Why a cell holds no ratio, in full, numbered under the table (a
    cell has room for a word, a reason needs a sentence)."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def ref(self, target: str, m: Measurement) -> str:
        text = f"{m.benchmark.name} on {target}: {m.stopped_by}" + (f": {m.reason}" if m.reason else "")
        if text not in self.items:
            self.items.append(text)
        return f"{m.stopped_by} [{self.items.index(text) + 1}]"

    def lines(self) -> list[str]:
        return [f"[{i}] {t}" for i, t in enumerate(self.items, 1)]


def precise(c: Comparison, goal: float | None) -> bool:
    """Whether the ratio's interval is within the precision asked."""
    return goal is not None and stats.ratio_ci_rel(c.ratio, c.ratio_ci_low, c.ratio_ci_high) <= goal


def _cell(c: Comparison | None, base: Measurement | None, cand: Measurement | None, goal: float | None,
          notes: Notes) -> list[str]:
    for who, m in (("candidate", cand), ("baseline", base)):
        if m is not None and m.stopped_by in ("skipped", "error"):
            return [notes.ref(m.target, m), "", ""]
    if c is None or base is None or cand is None or not base.summary or not cand.summary:
        return ["-", "", ""]
    flag = (("*" if c.significant else " ") + (" " if precise(c, goal) else "?")
            + (view.MODES_MARK if view.bimodal(c, cand, base) else ""))
    unit = c.benchmark.unit
    cis = f"±{_pct(cand.summary.ci_rel)}/{_pct(base.summary.ci_rel)}"
    return [f"{_ratio(c.ratio)}{flag}", fmt_pair(cand.summary.mean, base.summary.mean, unit), cis]


def md_cell(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ratio(r: float) -> str:
    """Two decimals where that shows the difference, three significant
    digits below 0.1 (a TCG cpuid at 0.004 is no '0.00')."""
    if not math.isfinite(r):
        return "-"
    if r < 0.1:
        return f"{r:.3g}"
    return f"{r:.2f}" if r < 10 else f"{r:.1f}" if r < 100 else f"{r:.0f}"


def _pct(f: float) -> str:
    if not math.isfinite(f):
        return "inf"
    return f"{f * 100:.1f}" if f < 0.1 else f"{f * 100:.0f}"


def _rows(data: RunData, ms: list[Measurement], cs: list[Comparison], notes: Notes):
    """Yields (direction, suite, benchmark name, [cells per candidate]):
    the view's pivot (view.pivot), throughput rows first."""
    lines = view.pivot(view.measurements(data, ms, cs))
    goal = data.config.get("precision")
    for direction in ("higher", "lower"):
        for line in [x for x in lines if x.spec.direction == direction]:
            cells = [_cell(side.c, line.base, side.m, goal, notes) for side in line.sides]
            if all(c == ["-", "", ""] for c in cells):
                continue
            yield direction, line.spec.suite, line.spec.name, cells


def geomeans(data: RunData, cs: list[Comparison]) -> dict[tuple[str, str, str], float]:
    """(candidate, suite, direction) -> geometric mean of its ratios (a
    suite with throughput and latency rows has a mean of each)."""
    acc: dict[tuple[str, str, str], list[float]] = {}
    for c in cs:
        acc.setdefault((c.candidate, c.benchmark.suite, c.benchmark.direction), []).append(c.ratio)
    return {k: stats.geomean(v) for k, v in acc.items()}


def _title(direction: str) -> str:
    return ("Throughput benchmarks -> HIGHER IS BETTER -> higher ratio is better" if direction == "higher"
            else "Latency benchmarks -> LOWER IS BETTER -> lower ratio is better")


def render_text(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> str:
    base, cands = data.targets[0].name, [t.name for t in data.targets[1:]]
    gm = geomeans(data, cs)
    out = []
    notes = Notes()
    rows = list(_rows(data, ms, cs, notes))
    for direction in ("higher", "lower"):
        sel = [r for r in rows if r[0] == direction]
        if not sel:
            continue
        header = ["benchmark"]
        for k in cands:
            header += [k, f"[{k.split(':')[0]}/{base.split(':')[0]}]", "±c/b %"]
        body, groups, suite = [], [], None
        for _, s, name, cells in sel:
            if s != suite:
                if suite is not None:
                    body.append(_geo_row(suite, direction, cands, gm))
                suite = s
                groups.append((len(body), f"{s}"))
            body.append(["  " + name] + [x for c in cells for x in c])
        body.append(_geo_row(suite, direction, cands, gm))
        out.append(f"{_title(direction)} (ratios to {base})")
        out.append(table.render(header, body, align="l" + "lll" * len(cands), groups=groups))
        out.append("")
    t = view.measurements(data, ms, cs)
    modes = view.mode_notes(t)
    out.append(textwrap.fill(LEGEND + (" · " + view.MODES_LEGEND if modes else ""), WIDTH, break_on_hyphens=False))
    for line in notes.lines():
        out.append(textwrap.fill(line, WIDTH, subsequent_indent="    ", break_on_hyphens=False))
    out += [textwrap.fill(text, WIDTH, subsequent_indent="    ", break_on_hyphens=False) for text in view.mode_texts(t)]
    return "\n".join(out)


def _geo_row(suite: str, direction: str, cands: list[str], gm: dict) -> list[str]:
    row = ["  geomean"]
    for k in cands:
        row += [_ratio(gm.get((k, suite, direction), float("nan"))), "", ""]
    return row


def render_markdown(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> str:
    base, cands = data.targets[0].name, [t.name for t in data.targets[1:]]
    gm = geomeans(data, cs)
    h = view.header(data)
    out = [f"### vmtax scoreboard — run `{h.id}`", "",
           f"Baseline `{md_cell(base)}` on {md_cell(h.machine)}; command `{md_cell(h.command)}`."
           + (f" Ratios: {md_mark(md_cell(h.estimand))}." if h.estimand else ""), ""]
    notes = Notes()
    rows = list(_rows(data, ms, cs, notes))
    for direction in ("higher", "lower"):
        sel = [r for r in rows if r[0] == direction]
        if not sel:
            continue
        out += [f"**{_title(direction)}**", "",
                "| benchmark | " + " | ".join(f"{md_cell(k)}/{md_cell(base)} | ±c/b %" for k in cands) + " |",
                "|---|" + "---|---|" * len(cands)]
        suite = None
        for _, s, name, cells in sel:
            if s != suite:
                if suite is not None:
                    out.append(_md_geo(suite, direction, cands, gm))
                suite = s
                out.append(f"| **{s}** |" + " |" * (2 * len(cands)))
            out.append(f"| {name} | " + " | ".join(f"{md_mark(c[0].strip())} {c[1]} | {c[2]}" for c in cells)
                       + " |")
        out.append(_md_geo(suite, direction, cands, gm))
        out.append("")
    t = view.measurements(data, ms, cs)
    modes = view.mode_notes(t)
    out += [md_mark((LEGEND + (" · " + view.MODES_LEGEND if modes else "")).replace("*", "\\*")), ""]
    out += [md_cell(line) + "  " for line in notes.lines()] + ([""] if notes.items else [])
    out += mode_items(t)
    out += [targets_markdown(data)]
    return "\n".join(out)


def mode_items(t: view.Table) -> list[str]:
    """The two-mode notes as a Markdown list (and a blank line after), or nothing."""
    items = [f"- {md_cell(md_mark(text))}" for text in view.mode_texts(t)]
    return items + [""] if items else []


def md_mark(text: str) -> str:
    """GitHub's Markdown strikes text between single tildes: escape the mark."""
    return text.replace(view.MODES_MARK, "\\" + view.MODES_MARK)


def _md_geo(suite: str, direction: str, cands: list[str], gm: dict) -> str:
    return "| *geomean* | " + " | ".join(f"{_ratio(gm.get((k, suite, direction), float('nan')))} | "
                                        for k in cands) + " |"


def _target_rows(data: RunData) -> list[list[str]]:
    rows = []
    for t in data.targets:
        f = t.facts
        rows.append([t.name, t.kind, t.accel or "-",
                     f"{t.boot_s:.2f} s" if t.boot_s is not None else "-",
                     f"{t.idle_cpu_pct:.1f}%" if t.idle_cpu_pct is not None else "-",
                     f"{t.mem_overhead_mb:.0f} MiB" if t.mem_overhead_mb is not None else "-",
                     str(f.get("kernel", "?")), str(f.get("hypervisor_vendor") or "-")])
    return rows


TARGET_HEADER = ["target", "kind", "accel", "boot", "idle CPU", "mem overhead", "kernel", "hypervisor seen"]


def targets_text(data: RunData) -> str:
    return table.render(TARGET_HEADER, _target_rows(data), align="llllrrll")


def targets_markdown(data: RunData) -> str:
    lines = ["| " + " | ".join(TARGET_HEADER) + " |", "|" + "---|" * len(TARGET_HEADER)]
    lines += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in _target_rows(data)]
    notes = ["- " + ", ".join(f"`{n}`" for n in names) + f": {note}" for names, note in target_notes(data)]
    return "\n".join(lines + ([""] + notes if notes else []))


def precision_share(data: RunData, cs: list[Comparison]) -> str:
    if not cs:
        return "no ratios"
    goal = data.config.get("precision")
    n = sum(1 for c in cs if precise(c, goal))
    flagged = sum(1 for c in cs if c.significant)
    # the median 95% CI half-width of the ratios (one without an interval counts as infinite)
    mid = statistics.median(stats.ratio_ci_rel(c.ratio, c.ratio_ci_low, c.ratio_ci_high) for c in cs)
    median = f", median ±{fmt_pct(mid)}" if math.isfinite(mid) else ", median: no interval"
    asked = f" (±{fmt_goal(goal)})" if goal is not None else ""
    return (f"{n} of {len(cs)} ratios ({fmt_pct(n / len(cs), 0)}) reached the precision asked{asked}"
            f"{median}; {flagged} outside the noise")

