"""The writers of vmtax gate, diff and history (watch.py computes; these
only format): terminal, Markdown, JSON, JUnit XML and HTML."""

from __future__ import annotations

import math
import time
from html import escape
from xml.sax.saxutils import escape as xml_escape
from xml.sax.saxutils import quoteattr

from ..model import ALL_BLOCKS, Interval
from ..watch import Diff, Gate, Series
from . import jsonparts, plots, table
from .htmlkit import page, td
from .htmlkit import table as html_table
from .mdkit import md_cell, md_mark
from .safe import inert, one_line
from .units import fmt_interval, json_number
from .view import MODES_MARK


def ratio(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.4g}"


def _4g(x: float) -> str:
    return f"{x:.4g}"


def interval(iv: Interval | None) -> str:
    """A ratio's interval's ends: [0.9812, 1.003], or unbounded."""
    return "unbounded" if iv is None else fmt_interval(iv, "ends", _4g)


def pvalue(p: float | None) -> str:
    return "-" if p is None or not math.isfinite(p) else f"{p:.3g}"


FAST_LEGEND = (
    f"{MODES_MARK} after a ratio: over the blocks in which both sides ran in their fast mode, or in "
    f"the same mode (compare --fast-mode or --same-mode, on a row whose processes fell in two modes); "
    f"unmarked: over all blocks"
)
HTML_LEGEND = (
    f"{MODES_MARK} after a run: its ratio is over the blocks in which both sides ran in their fast "
    f"mode, or in the same mode (compare --fast-mode or --same-mode, on a row whose processes fell in "
    f"two modes); unmarked: over all blocks"
)


def stratified(estimand: str) -> bool:
    """Whether a ratio is over some of its blocks (a mode's), not all."""
    return estimand != ALL_BLOCKS


def md(text: str) -> str:
    """A Markdown cell or line outside a code span: pipes and tildes escaped."""
    return md_mark(md_cell(text))


def ratio_of(x: float | None, estimand: str) -> str:
    """A ratio, marked where it is the fast mode's rather than every block's."""
    return ratio(x) + (MODES_MARK if stratified(estimand) and x is not None and math.isfinite(x) else "")


def _mixed(d: Diff) -> list[str]:
    """The diff's rows whose two ratios are over different blocks (one run with --fast-mode)."""
    return [f"{c.benchmark} ({c.candidate} / {c.baseline})" for c in d.changes if c.estimand_a != c.estimand_b]


# -- gate ------------------------------------------------------------------------------
def _gate_cells(g: Gate) -> tuple[list[str], list[list[str]]]:
    header = ["benchmark", "candidate", "ratio", "95% CI", "p", "Holm p", "verdict", "why"]
    rows = [
        [
            r.benchmark,
            r.candidate,
            ratio(r.ratio),
            interval(r.ci),
            pvalue(r.p_value),
            pvalue(r.p_adjusted),
            r.verdict.upper() if r.verdict in ("regressed", "error") else r.verdict,
            r.why,
        ]
        for r in g.rows
    ]
    return header, rows


def _gate_summary(g: Gate, run_id: str) -> str:
    count = {
        v: sum(1 for r in g.rows if r.verdict == v) for v in ("regressed", "error", "inconclusive", "improved", "pass")
    }
    what = f"of {g.runs} runs (the last named {run_id})" if g.runs > 1 else run_id
    return (
        f"gate {what}: {g.verdict.upper()} at a threshold of {g.threshold:.2%} "
        f"(rows: {', '.join(f'{n} {v}' for v, n in count.items() if n)}; family-wise alpha {g.alpha:g}, "
        f"Holm over {sum(1 for r in g.rows if r.p_adjusted is not None)} tested rows"
        + ("; reference-adjusted where said below" if g.reference else "")
        + (
            f"; over {g.runs} runs, each its own boot of every target: a row's ratio the geometric mean of "
            f"the runs', its interval Student's over them"
            if g.runs > 1
            else ""
        )
        + ")"
    )


def _reference_lines(g: Gate) -> list[str]:
    """One line per candidate of a gate run --reference: adjusted or not, and why."""
    return [
        f"reference loop on {c.candidate}: "
        + (f"ratio {ratio(c.ratio)} {interval(c.ci)}; " if c.ratio is not None else "")
        + (c.why if c.used else f"not adjusted: {c.why}")
        for c in g.reference
    ]


def gate_text(g: Gate, run_id: str) -> str:
    header, rows = _gate_cells(g)
    return inert(
        table.render(header, rows, align="llrlrrll")
        + "\n\n"
        + _gate_summary(g, run_id)
        + "".join("\n  " + one_line(line) for line in _reference_lines(g))
    )


def gate_markdown(g: Gate, run_id: str) -> str:
    header, rows = _gate_cells(g)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
    notes = "".join(f"- {md(line)}\n" for line in _reference_lines(g))
    return f"## {md(_gate_summary(g, run_id))}\n\n" + (notes + "\n" if notes else "") + "\n".join(lines) + "\n"


def gate_json(g: Gate) -> dict:
    return {
        "threshold": g.threshold,
        "alpha": g.alpha,
        "correction": "holm",
        "verdict": g.verdict,
        "rows": [
            {
                "benchmark": r.benchmark,
                "candidate": r.candidate,
                "unit": r.unit,
                "direction": r.direction,
                **jsonparts.interval(r.ci, "ratio"),
                "p_value": json_number(r.p_value),
                "p_adjusted": json_number(r.p_adjusted),
                "verdict": r.verdict,
                "why": r.why,
                "estimand": r.estimand,
            }
            for r in g.rows
        ],
        **(
            {
                "reference": [
                    {
                        "candidate": c.candidate,
                        "used": c.used,
                        "why": c.why,
                        "beta": json_number(c.beta),
                        **jsonparts.interval(c.ci, "ratio"),
                        "rows": c.rows,
                    }
                    for c in g.reference
                ]
            }
            if g.reference
            else {}
        ),
    }


def gate_junit(g: Gate, run_id: str) -> str:
    """One testcase per row: a regression is a failure, a row the candidate
    or the baseline failed an error (with its message), an inconclusive row
    is skipped (with why), a pass or an improvement passes."""
    cases = []
    for r in g.rows:
        text = (
            f"{r.benchmark} on {r.candidate}: ratio {ratio(r.ratio)} {interval(r.ci)}, "
            f"adjusted p {pvalue(r.p_adjusted)}: {r.why}"
        )
        inner = {
            "regressed": f'<failure message={quoteattr(inert(text))} type="regressed">'
            f"{xml_escape(inert(text))}</failure>",
            "error": f'<error message={quoteattr(inert(text))} type="error">{xml_escape(inert(text))}</error>',
            "inconclusive": f"<skipped message={quoteattr(inert(text))}/>",
        }.get(r.verdict, "")
        cases.append(
            f"  <testcase classname={quoteattr(inert(r.candidate))} name={quoteattr(inert(r.benchmark))}>"
            f"{inner}</testcase>"
        )
    failures = sum(1 for r in g.rows if r.verdict == "regressed")
    skipped = sum(1 for r in g.rows if r.verdict == "inconclusive")
    errors = sum(1 for r in g.rows if r.verdict == "error")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuites name="vmtax gate">\n <testsuite name={quoteattr("vmtax gate " + run_id)} '
        f'tests="{len(g.rows)}" failures="{failures}" errors="{errors}" skipped="{skipped}" timestamp="{stamp}">\n'
        + "\n".join(cases)
        + "\n </testsuite>\n</testsuites>\n"
    )


# -- diff ------------------------------------------------------------------------------
def _diff_cells(d: Diff) -> tuple[list[str], list[list[str]]]:
    header = ["benchmark", "candidate / baseline", f"ratio in {d.run_a}", f"ratio in {d.run_b}", "B / A", "95% CI"]
    return header, [
        [
            c.benchmark,
            f"{_candidates(c)} / {c.baseline}",
            ratio_of(c.ratio_a, c.estimand_a),
            ratio_of(c.ratio_b, c.estimand_b),
            ratio(c.change),
            interval(c.ci),
        ]
        for c in d.changes
    ]


def _candidates(c) -> str:
    """A change's candidate: one name, or A's -> B's where the diff paired two."""
    return c.candidate if c.candidate_b == c.candidate else f"{c.candidate} -> {c.candidate_b}"


def _paired_line(d: Diff) -> list[str]:
    if not d.paired:
        return []
    base, a, b = d.paired
    return [f"paired the single candidates of the two runs against the baseline {base}: {a} (A) with {b} (B)"]


def _diff_notes(d: Diff) -> list[str]:
    """That the diff paired two candidates; what a marked ratio is, and the rows whose B / A sets ratios over
    different blocks against each other."""
    if not any(stratified(c.estimand_a) or stratified(c.estimand_b) for c in d.changes):
        return _paired_line(d)
    mixed = _mixed(d)
    return (
        _paired_line(d)
        + [FAST_LEGEND]
        + (
            [f"B / A sets ratios over different blocks against each other (not the same estimand): {', '.join(mixed)}"]
            if mixed
            else []
        )
    )


def _facts_lines(facts) -> list[str]:
    return [one_line(f"  {k}: {a} -> {b}") for k, a, b in facts] or ["  (none)"]


def diff_text(d: Diff) -> str:
    header, rows = _diff_cells(d)
    out = [
        table.render(header, rows, align="llrrrl"),
        "",
        f"facts that differ between {d.run_a} (A) and {d.run_b} (B):",
        *_facts_lines(d.facts),
    ]
    if d.only_a or d.only_b:
        out.append(one_line(f"targets in one run only: A {', '.join(d.only_a) or '-'}; B {', '.join(d.only_b) or '-'}"))
    out += [one_line(line) for line in _diff_notes(d)]
    out.append(
        "B / A: the change of each ratio; its interval adds the two runs' log-ratio variances (independent runs)"
    )
    return inert("\n".join(out))


def diff_markdown(d: Diff) -> str:
    header, rows = _diff_cells(d)
    lines = [f"## vmtax diff {d.run_a} {d.run_b}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
    lines += [x for n in _diff_notes(d) for x in ("", md(n))]
    lines += ["", "Facts that differ:", ""] + [f"- `{md_cell(k)}`: {md(a)} → {md(b)}" for k, a, b in d.facts]
    return "\n".join(lines) + "\n"


def diff_json(d: Diff) -> dict:
    return {
        "run_a": d.run_a,
        "run_b": d.run_b,
        "only_a": d.only_a,
        "only_b": d.only_b,
        "paired": {"baseline": d.paired[0], "a": d.paired[1], "b": d.paired[2]} if d.paired else None,
        "changes": [
            {
                "benchmark": c.benchmark,
                "baseline": c.baseline,
                "candidate": c.candidate,
                "candidate_b": c.candidate_b,
                "unit": c.unit,
                "direction": c.direction,
                "ratio_a": json_number(c.ratio_a),
                "ratio_b": json_number(c.ratio_b),
                **jsonparts.interval(c.ci, "change"),
                "estimand_a": c.estimand_a,
                "estimand_b": c.estimand_b,
            }
            for c in d.changes
        ],
        "facts": [{"fact": k, "a": a, "b": b} for k, a, b in d.facts],
    }


# -- history ---------------------------------------------------------------------------
def _title(s: Series) -> str:
    return f"{s.benchmark}: {s.candidate} / {s.baseline}"


def history_text(all_series: list[Series]) -> str:
    out = []
    for s in all_series:
        out.append(one_line(f"{_title(s)} ({len(s.points)} runs, oldest first)"))
        rows = [
            [
                p.run,
                time.strftime("%Y-%m-%d %H:%M", time.gmtime(p.started)),
                ratio_of(p.ratio, p.estimand),
                interval(p.ci),
                "<- change" if any(c.index == i for c in s.changes) else "",
            ]
            for i, p in enumerate(s.points)
        ]
        out.append(table.render(["run", "started (UTC)", "ratio", "95% CI", ""], rows, align="llrll"))
        if any(stratified(p.estimand) for p in s.points):
            out.append(FAST_LEGEND)
        for c in s.changes:
            out.append(
                f"  change point at run {c.run}: {ratio(c.before)} -> {ratio(c.after)} "
                f"({c.after / c.before - 1:+.2%}, p {pvalue(c.p_value)}); facts that changed there:"
            )
            out += ["  " + line for line in _facts_lines(c.facts)]
        out.append("")
    return inert("\n".join(out).rstrip())


def history_markdown(all_series: list[Series]) -> str:
    out = []
    for s in all_series:
        out += [f"### {md(_title(s))}", "", "| run | ratio | 95% CI | change |", "|---|---|---|---|"]
        out += [
            f"| {md(p.run)} | {md(ratio_of(p.ratio, p.estimand))} | {interval(p.ci)} | "
            f"{'change point' if any(c.index == i for c in s.changes) else ''} |"
            for i, p in enumerate(s.points)
        ]
        if any(stratified(p.estimand) for p in s.points):
            out += ["", md(FAST_LEGEND)]
        for c in s.changes:
            out += [
                "",
                f"Change point at run {c.run}: {ratio(c.before)} → {ratio(c.after)} "
                f"({c.after / c.before - 1:+.2%}, p {pvalue(c.p_value)}); facts that changed there:",
                "",
            ]
            out += [f"- `{md_cell(k)}`: {md(a)} → {md(b)}" for k, a, b in c.facts]
        out.append("")
    return "\n".join(out)


def history_json(all_series: list[Series]) -> list[dict]:
    return [
        {
            "benchmark": s.benchmark,
            "baseline": s.baseline,
            "candidate": s.candidate,
            "unit": s.unit,
            "direction": s.direction,
            "points": [
                {
                    "run": p.run,
                    "started": p.started,
                    **jsonparts.interval(p.ci, "ratio"),
                    "estimand": p.estimand,
                }
                for p in s.points
            ],
            "change_points": [
                {
                    "index": c.index,
                    "run": c.run,
                    "before": c.before,
                    "after": c.after,
                    "p_value": c.p_value,
                    "facts": [{"fact": k, "before": a, "after": b} for k, a, b in c.facts],
                }
                for c in s.changes
            ],
        }
        for s in all_series
    ]


def history_html(all_series: list[Series], command: str) -> str:
    parts = []
    for s in all_series:
        chart = plots.history(
            _title(s),
            s.direction,
            [p.ci for p in s.points],
            [p.run + (MODES_MARK if stratified(p.estimand) else "") for p in s.points],
            [c.index for c in s.changes],
        )
        rows = [
            "<tr>"
            + td(c.run, cls="l")
            + td(ratio(c.before), c.before)
            + td(ratio(c.after), c.after)
            + td(f"{c.after / c.before - 1:+.2%}", c.after / c.before)
            + td(pvalue(c.p_value), c.p_value)
            + td("; ".join(f"{k}: {a} → {b}" for k, a, b in c.facts) or "(none)", cls="wrap")
            + "</tr>"
            for c in s.changes
        ]
        parts += [
            f"<h2>{escape(_title(s))}</h2>",
            f'<figure class="history">{chart}<figcaption>'
            f"{len(s.points)} runs, oldest first; band: 95% CI of each run's ratio; dashed: a change "
            f"point (Apache Otava, E-divisive means)"
            + (f"; {escape(HTML_LEGEND)}" if any(stratified(p.estimand) for p in s.points) else "")
            + "</figcaption></figure>",
        ]
        if rows:
            parts.append(
                html_table(["change point at run", "before", "after", "change", "p", "facts that changed there"], rows)
            )
    return page("vmtax history", "vmtax history", command, "".join(parts) or "<p>no series</p>")
