"""The scoreboard of a compare run, built once, in seed 001's shape: per
benchmark and candidate a cell -- the ratio and its interval, the flags
(* ? ~), the number of the note that says why a cell holds no ratio, the
raw means, each side's 95% CI half-width --; each suite's geometric means;
the notes (why a cell is empty; what a row whose processes fell in two
modes gives; a candidate whose tax moved with the host's state); the
verdict (the precision reached, what stopped the rows, what a larger budget
would take); the table of targets.

What a cell shows is said once, in FIELDS (hyperfine's MarkupExporter one
level up): a field's key in a JSON comparison, its value, its text and
title per format, its legend, and the formats that show it.  The writers
-- terminal.scoreboard, markdown.scoreboard_md, html.scoreboard_table and
jsondoc.comparisons -- only lay the board out and escape it for their
format: a new field is one entry in FIELDS."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import stats
from ..model import BenchSpec, Comparison, Measurement, RunData, Summary
from . import facts, view
from .jsonparts import host_state, metric_ratios, modes_row, stratum
from .units import fmt_duration, fmt_goal, fmt_interval, fmt_pair, fmt_pct, fmt_ratio2, fmt_value
from .view import HTML, JSON, MD, PEOPLE, TEXT, ModeNote

WIDTH = 100  # the terminal's scoreboard fits a 100-column terminal
OMIT = object()  # a field's value that leaves its key out of a JSON comparison

DIRECTIONS = {
    "higher": "Throughput benchmarks -> HIGHER IS BETTER -> higher ratio is better",
    "lower": "Latency benchmarks -> LOWER IS BETTER -> lower ratio is better",
}
# (mark, what it means, {format: in its own words}): the terminal's words are few, its screen is small
MARKS = [
    (
        "*",
        "a difference at the 5% level (sign-flip test over blocks run in random order)",
        {TEXT: "differs at the 5% level"},
    ),
    ("?", "the ratio's 95% CI is wider than the precision asked", {TEXT: "CI wider than asked"}),
    (
        view.MODES_MARK,
        "a side's processes fell in two modes (its note says which ratio the row gives)",
        {TEXT: "two modes (see below)"},
    ),
]


def precise(c: Comparison, goal: float | None) -> bool:
    """Whether the ratio's interval is within the precision asked."""
    return goal is not None and c.ci.rel_halfwidth <= goal


def stop_text(m: Measurement) -> str:
    """What stopped a side, and why: 'error: agent died'."""
    return m.stopped_by + (f": {m.reason}" if m.reason else "")


@dataclass(frozen=True)
class Cell:
    """One candidate's side of one benchmark: its comparison with the
    baseline and both sides' measurements (None where not measured)."""

    spec: BenchSpec
    baseline: str
    candidate: str
    c: Comparison | None
    cand: Measurement | None
    base: Measurement | None
    goal: float | None
    note: int = 0  # the number of the note saying why it holds no ratio (0: none)
    mode: ModeNote | None = None  # where a side's processes fell in two modes

    @property
    def stopped(self) -> Measurement | None:
        """The side, the candidate's first, that was skipped or failed; or,
        where there is no ratio, one whose stop has a reason (a row the
        budget left out): its note says why."""
        sides = [m for m in (self.cand, self.base) if m is not None]
        return next((m for m in sides if m.stopped_by in ("skipped", "error")), None) or (
            None if self._compared else next((m for m in sides if m.reason), None)
        )

    @property
    def _compared(self) -> bool:
        return bool(
            self.c is not None
            and self.cand is not None
            and self.base is not None
            and self.cand.summary
            and self.base.summary
        )

    @property
    def state(self) -> str:
        """'stopped' (a side skipped or failed, or holds no ratio for a
        reason), 'ratio', or 'none' (nothing to compare)."""
        if self.stopped is not None:
            return "stopped"
        return "ratio" if self._compared else "none"

    # a cell whose state is "ratio" holds a comparison and both sides' summaries: its fields read them here
    @property
    def comparison(self) -> Comparison:
        assert self.c is not None, "a cell with a ratio"
        return self.c

    @property
    def cand_summary(self) -> Summary:
        assert self.cand is not None and self.cand.summary is not None, "a cell with a ratio"
        return self.cand.summary

    @property
    def base_summary(self) -> Summary:
        assert self.base is not None and self.base.summary is not None, "a cell with a ratio"
        return self.base.summary

    @property
    def precise(self) -> bool:
        return self.c is not None and precise(self.c, self.goal)

    @property
    def two_modes(self) -> bool:
        return view.bimodal(self.c, self.cand, self.base)

    def flags(self, pad: bool = False) -> str:
        """'*?~' as they apply; pad: a blank for * and ? where they do not."""
        if self.c is None:
            return ""
        blank = " " if pad else ""
        return (
            ("*" if self.c.significant else blank)
            + (blank if self.precise else "?")
            + (view.MODES_MARK if self.two_modes else "")
        )

    @property
    def why(self) -> str:
        """Why it holds no ratio (a writer with room says it in the cell)."""
        m = self.stopped or self.cand
        return stop_text(m) if m is not None else "not measured"


# -- the fields of a cell ----------------------------------------------------------------
def _means(x: Cell) -> str:
    return fmt_pair(x.cand_summary.mean, x.base_summary.mean, x.spec.unit) if x.state == "ratio" else ""


def _ratio_text(x: Cell, fmt: str) -> str:
    if fmt == HTML:
        if x.state != "ratio":
            return x.why
        return fmt_interval(x.comparison.ci, "cell")
    stopped = x.stopped  # there when the state is "stopped"
    text = (
        f"{stopped.stopped_by} [{x.note}]"
        if stopped is not None
        else "-"
        if x.state == "none"
        else f"{fmt_ratio2(x.comparison.ratio)}{x.flags(pad=True)}"
    )
    return f"{text.strip()} {_means(x)}" if fmt == MD else text  # Markdown: the raw means in the ratio's cell


def _means_text(x: Cell, fmt: str) -> str:
    if fmt == HTML:
        unit = x.spec.unit
        return (
            f"{fmt_value(x.cand_summary.mean, unit)} vs {fmt_value(x.base_summary.mean, unit)}"
            if x.state == "ratio"
            else "-"
        )
    return _means(x)


def _ci_text(x: Cell, fmt: str) -> str:
    """The ratio's 95% interval, its half-width in % of the ratio: what the
    precision asked and the `?` flag are judged by ('-': no interval)."""
    return fmt_interval(x.comparison.ci, "width") if x.state == "ratio" else ""


@dataclass(frozen=True)
class Field:
    """What one field of a cell is, said once.  key: its name in a JSON
    comparison (a comparison is a cell with a ratio); value: its value
    there (OMIT leaves the key out); text(cell, format): its text for
    people; title: its column's, after the candidate's name ({cand},
    {base}, or {c}, {b}: the names before a colon), where a format does not
    have its own (titles); legend: what it means, under the table (where a
    format does not have its own: legends); show: the formats that show
    it; sort: the HTML page sorts its column by this; cls: its HTML class;
    drop: the terminal leaves out a field with a drop (the highest first)
    where the table would not fit WIDTH."""

    key: str
    value: Callable[[Cell], object]
    text: Callable[[Cell, str], str] | None = None
    title: str = ""
    titles: dict = field(default_factory=dict)
    legend: str = ""
    legends: dict = field(default_factory=dict)
    show: frozenset[str] = frozenset({JSON})
    sort: Callable[[Cell], float | None] | None = None
    cls: Callable[[Cell], str] | None = None
    drop: int = 0

    def title_in(self, fmt: str, cand: str, base: str) -> str:
        return self.titles.get(fmt, self.title).format(cand=cand, base=base, c=cand.split(":")[0], b=base.split(":")[0])

    def legend_in(self, fmt: str) -> str:
        return self.legends.get(fmt, self.legend)

    def text_in(self, x: Cell, fmt: str) -> str:
        if self.text is not None:
            return self.text(x, fmt)
        v = self.value(x)
        return "-" if v is None or v is OMIT else str(v)


def _c(name: str) -> Callable[[Cell], object]:
    return lambda x: getattr(x.c, name)


def _spec(name: str) -> Callable[[Cell], object]:
    return lambda x: getattr(x.spec, name)


_PEOPLE_JSON = PEOPLE | {JSON}

FIELDS: list[Field] = [
    Field("benchmark", _spec("name")),
    Field("suite", _spec("suite")),
    Field("direction", _spec("direction")),
    Field("unit", _spec("unit")),
    Field("kind", _spec("kind")),
    Field("baseline", lambda x: x.baseline),
    Field("candidate", lambda x: x.candidate),
    Field(
        key="ratio",
        value=_c("ratio"),
        text=_ratio_text,
        title="{cand}",
        titles={MD: "{cand}/{base}", HTML: "{cand} / {base} (95% CI)"},
        legend="ratio = candidate/baseline",
        legends={
            TEXT: "",  # the terminal's table says it in its title
            MD: "ratio = candidate/baseline · [candidate/baseline] raw means",  # Markdown: both in one cell
            HTML: "ratio = candidate/baseline, its 95% CI in parentheses: the ratios a sign-flip test does not "
            "reject, over process means paired block by block (each block in random order), so host drift "
            "cancels and the error rate holds on a noisy host",
        },
        show=_PEOPLE_JSON,
        sort=lambda x: x.comparison.ratio if x.state == "ratio" else None,
        cls=lambda x: "" if x.state == "ratio" else "wrap",
    ),
    Field("ratio_ci_low", lambda x: x.comparison.ci.low),
    Field("ratio_ci_high", lambda x: x.comparison.ci.high),
    Field("p_value", _c("p_value")),
    Field("significant", _c("significant")),
    Field("stopped_by", _c("stopped_by")),
    Field("metrics", lambda x: metric_ratios(x.comparison.metrics)),
    Field("fast_mode", lambda x: stratum(x.comparison.fast_mode)),
    Field(
        "same_mode", lambda x: stratum(x.comparison.same_mode, slow=True)
    ),  # both fast or both slow, the modes weighted
    Field("slow_mode", lambda x: stratum(x.comparison.slow_mode, slow=True)),
    # --fast-mode (--same-mode) on a row with two modes: ratio/ratio_ci_* are fast_mode's (same_mode's), and
    # all_modes every block's
    Field("estimand", lambda x: x.comparison.estimand),
    Field("all_modes", lambda x: stratum(x.comparison.all_modes)),
    # a candidate that stopped before the baseline: the baseline's modes over the blocks the two share, which the
    # ratio was judged by (null: one mode there), and that block count; absent otherwise
    Field("baseline_shared_blocks", lambda x: x.comparison.base_shared if x.comparison.base_shared else OMIT),
    Field("baseline_modes", lambda x: modes_row(x.comparison.base_modes) if x.comparison.base_shared else OMIT),
    Field("host_state", lambda x: host_state(x.comparison.host_state)),
    Field(
        key="means",
        value=lambda x: OMIT,
        text=_means_text,
        title="[{c}/{b}]",
        titles={HTML: "{cand} vs {base}"},
        legend="[candidate/baseline] raw means",
        legends={TEXT: "[c/b] raw means", HTML: "candidate vs baseline: the raw means"},
        show=frozenset({TEXT, HTML}),
        sort=lambda x: x.cand_summary.mean if x.state == "ratio" else None,
        drop=1,
    ),
    Field(
        "ci",
        lambda x: OMIT,
        _ci_text,
        "±%",
        legend="±% = the ratio's 95% CI half-width, in % of the ratio",
        legends={TEXT: "±%: the ratio's 95% CI"},
        show=frozenset({TEXT, MD}),
    ),
    Field(
        "flags",
        lambda x: x.flags(),
        lambda x, fmt: x.flags() if x.state == "ratio" else "",
        "",
        show=frozenset({HTML, JSON}),
        cls=lambda x: "" if x.state != "ratio" else "l sig" if x.comparison.significant else "l prec",
    ),
]


# -- the board -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Line:
    """One benchmark: its cell for each candidate, in the run's order."""

    spec: BenchSpec
    cells: list[Cell]


@dataclass(frozen=True)
class Group:
    """A suite's lines of one direction, with each candidate's geometric
    mean of their ratios."""

    suite: str
    direction: str
    geomeans: list[float]
    lines: list[Line]


@dataclass(frozen=True)
class Verdict:
    """What the run reached, over its ratios."""

    ratios: int
    precise: int
    significant: int
    goal: float | None
    median: float  # the median relative 95% half-width (inf: no interval)
    stopped: dict[str, int]  # the candidates' rows by what stopped them
    budget: int  # ratios short of the goal whose candidate stopped on the budget
    budget_median: float  # their median half-width
    budget_s: float

    @property
    def more_blocks(self) -> float | None:
        """How many times their blocks the budget's rows would take to reach
        the goal, at a half-width that narrows as 1/sqrt(blocks)."""
        if not self.budget or self.goal is None or not math.isfinite(self.budget_median):
            return None
        return (self.budget_median / self.goal) ** 2

    def lines(self) -> list[str]:
        """The verdict in sentences: the precision reached; the rows the
        budget stopped short of it, and what a larger budget would take;
        the rows that failed or were skipped."""
        out = [self.share()]
        if self.budget:
            more = self.more_blocks
            where = (
                f"at a median ±{fmt_pct(self.budget_median)}: ±{fmt_goal(self.goal)} would take about "
                f"{more:.{1 if more < 10 else 0}f}× their blocks (a CI narrows as 1/√blocks)"
                if more
                else f"without an interval (under {stats.MIN_BLOCKS} blocks each): a larger --max-time buys them"
            )
            out.append(
                f"{self.budget} stopped on the budget ({fmt_duration(self.budget_s)}) {where}; "
                "`vmtax doctor` says what this host's noise lets a budget buy"
            )
        others = [f"{k} {v}" for k, v in self.stopped.items() if k not in ("precision", "budget")]
        if others:
            out.append("stopped otherwise: " + ", ".join(others) + " (the notes say why)")
        return out

    def share(self) -> str:
        """The precision reached: '5 of 28 ratios (18%) reached the precision asked (±1.0%), ...'."""
        if not self.ratios:
            return "no ratios"
        median = f", median ±{fmt_pct(self.median)}" if math.isfinite(self.median) else ", median: no interval"
        asked = f" (±{fmt_goal(self.goal)})" if self.goal is not None else ""
        return (
            f"{self.precise} of {self.ratios} ratios ({fmt_pct(self.precise / self.ratios, 0)}) reached the "
            f"precision asked{asked}{median}; {self.significant} outside the noise"
        )


def _median_halfwidth(cs: list[Comparison]) -> float:
    """The median 95% CI half-width of the ratios (one without an interval counts as infinite)."""
    return statistics.median(c.ci.rel_halfwidth for c in cs) if cs else math.inf


def verdict(data: RunData, cells: list[Cell]) -> Verdict:
    cs = [x.c for x in cells if x.c is not None]
    goal = data.config.get("precision")
    stopped: dict[str, int] = {}
    for x in cells:
        if x.cand is not None:
            stopped[x.cand.stopped_by] = stopped.get(x.cand.stopped_by, 0) + 1
    short = [
        x.c for x in cells if x.c is not None and x.cand is not None and x.cand.stopped_by == "budget" and not x.precise
    ]
    return Verdict(
        ratios=len(cs),
        precise=sum(1 for x in cells if x.c is not None and x.precise),
        significant=sum(1 for c in cs if c.significant),
        goal=goal,
        median=_median_halfwidth(cs),
        stopped=dict(sorted(stopped.items())),
        budget=len(short),
        budget_median=_median_halfwidth(short),
        budget_s=float(data.config.get("max_time", 0) or 0),
    )


@dataclass
class Board:
    """The scoreboard of a compare run, for every writer."""

    header: view.Header
    baseline: str
    candidates: list[str]
    groups: list[Group]  # the throughput suites first, then the latency ones
    cells: list[Cell]  # every cell, benchmark by benchmark (the JSON's order)
    reasons: list[str]  # why a cell holds no ratio, numbered from 1 (Cell.note)
    modes: list[ModeNote]  # the rows with two modes, in full
    states: list[view.StateNote]  # the candidates whose tax moved with the host's state
    verdict: Verdict
    targets: facts.Targets
    table: view.Table  # the measurements it was built from
    fields: list[Field] = field(default_factory=lambda: list(FIELDS))

    def shown(self, fmt: str) -> list[Field]:
        return [f for f in self.fields if fmt in f.show]

    def legend(self, fields: list[Field], fmt: str) -> list[str]:
        """What the fields a writer lays out and the flags mean, each in a few words."""
        marks = [f"{m} {own.get(fmt, text)}" for m, text, own in MARKS if m != view.MODES_MARK or self.modes]
        return [f.legend_in(fmt) for f in fields if f.legend_in(fmt)] + marks

    def mode_rows(self) -> list[tuple[str, list[tuple[str, list[tuple[str, str]]]]]]:
        """The rows with two modes, in the board's order: (benchmark, [(what
        the ratio is, [(candidate, why)...])...])."""
        out = []
        for g in self.groups:
            for line in g.lines:
                said: dict[str, list[tuple[str, str]]] = {}
                for x in line.cells:
                    if x.mode is not None:
                        said.setdefault(x.mode.said, []).append((x.candidate, x.mode.why))
                if said:
                    out.append((line.spec.name, list(said.items())))
        return out


def build(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> Board:
    """The board of a run (of a compare run: a run of one target has no cells)."""
    t = view.measurements(data, ms, cs)
    lines = view.pivot(t)
    goal = data.config.get("precision")
    modes = view.mode_notes(t)
    mode_of = {(n.benchmark, n.target): n for n in modes}
    base = data.targets[0].name if data.targets else ""
    shown = [x for d in ("higher", "lower") for x in lines if x.spec.direction == d]  # the order on the board
    reasons: list[str] = []
    notes: dict[tuple[str, str], int] = {}
    for line in shown:
        for side in line.sides:
            x = Cell(
                spec=line.spec, baseline=base, candidate=side.target, c=side.c, cand=side.m, base=line.base, goal=goal
            )
            if x.stopped is not None:
                text = f"{line.spec.name} on {x.stopped.target}: {stop_text(x.stopped)}"
                if text not in reasons:
                    reasons.append(text)
                notes[(line.spec.name, side.target)] = reasons.index(text) + 1
    cells = {
        (line.spec.name, side.target): Cell(
            spec=line.spec,
            baseline=base,
            candidate=side.target,
            c=side.c,
            cand=side.m,
            base=line.base,
            goal=goal,
            note=notes.get((line.spec.name, side.target), 0),
            mode=mode_of.get((line.spec.name, side.target)),
        )
        for line in lines
        for side in line.sides
    }
    return Board(
        header=view.header(data),
        baseline=base,
        candidates=[x.name for x in data.targets[1:]],
        groups=_groups(shown, cells, data.targets[1:]),
        cells=list(cells.values()),
        reasons=reasons,
        modes=modes,
        states=view.state_notes([r.c for r in t.rows if r.c is not None]),
        verdict=verdict(data, list(cells.values())),
        targets=facts.targets(data),
        table=t,
    )


def _groups(lines: list[view.Line], cells: dict, cands) -> list[Group]:
    """The lines with a cell to show (a ratio or a reason), by direction and suite, with geometric means."""
    groups: list[Group] = []
    for line in lines:
        row = [cells[(line.spec.name, side.target)] for side in line.sides]
        if all(x.state == "none" for x in row):
            continue
        g = groups[-1] if groups else None
        if g is None or (g.suite, g.direction) != (line.spec.suite, line.spec.direction):
            g = Group(line.spec.suite, line.spec.direction, [], [])
            groups.append(g)
        g.lines.append(Line(line.spec, row))
    for g in groups:  # over every ratio of the suite and direction, as before the lines were picked
        for k in cands:
            g.geomeans.append(
                stats.geomean(
                    [
                        x.c.ratio
                        for x in cells.values()
                        if x.candidate == k.name
                        and x.c is not None
                        and x.spec.suite == g.suite
                        and x.spec.direction == g.direction
                    ]
                )
            )
    return groups


def geomeans(data: RunData, cs: list[Comparison]) -> dict[tuple[str, str, str], float]:
    """(candidate, suite, direction) -> geometric mean of its ratios (a
    suite with throughput and latency rows has a mean of each)."""
    acc: dict[tuple[str, str, str], list[float]] = {}
    for c in cs:
        acc.setdefault((c.candidate, c.benchmark.suite, c.benchmark.direction), []).append(c.ratio)
    return {k: stats.geomean(v) for k, v in acc.items()}


def precision_share(data: RunData, cs: list[Comparison]) -> str:
    """The precision reached over these ratios (Verdict.share)."""
    goal = data.config.get("precision")
    return Verdict(
        ratios=len(cs),
        precise=sum(1 for c in cs if precise(c, goal)),
        significant=sum(1 for c in cs if c.significant),
        goal=goal,
        median=_median_halfwidth(cs),
        stopped={},
        budget=0,
        budget_median=math.inf,
        budget_s=0.0,
    ).share()
