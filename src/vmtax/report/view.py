"""The view of a run's measurements, built once and rendered by every
writer: the terminal (terminal.py), Markdown (markdown.py), HTML (html.py),
CSV (csvout.py) and JSON (jsondoc.py).

A row is one benchmark on one target.  A Column says, once, what a field
is: its name in CSV and JSON (`key`, where a format names it otherwise:
`names`), its title for people (`title`, or per format: `titles`), its raw
value, its text for people, and which writers show it (`show`).  Adding a
column is one entry in COLUMNS; a writer shows it where its format is in
`show`, with nothing else to edit.  The writers only lay cells out (and
escape them for their format); figures are formatted here, through
units.py, once.

Metrics (counters and host cost per operation) are columns only a run's
data can name: CSV gives each a column after these (their means), JSON a
nested object with units and intervals (jsondoc.metric_rows).

A run's header (header(): when, where, the goal and budget, the pinning,
the command, the baseline's machine) is built here once too; each writer
lays it out in its own shape.  So is the scoreboard's pivot of the same
rows (pivot(): one line per benchmark, the baseline's measurement and each
candidate's with its ratio), which the text, Markdown and HTML
scoreboards lay out."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeGuard

from .. import stats
from ..model import FAST_MODE, SAME_MODE, BenchSpec, Comparison, HostState, Measurement, Modes, RunData, headline_of
from ..stats import MODE_AGREE, STRATUM_MIN
from .units import fmt_duration, fmt_goal, fmt_interval, fmt_pct, fmt_ratio3, fmt_value

TEXT, MD, HTML, CSV, JSON = "text", "md", "html", "csv", "json"
PEOPLE = frozenset({TEXT, MD, HTML})
ALL = frozenset({TEXT, MD, HTML, CSV, JSON})


@dataclass(frozen=True)
class Row:
    """One benchmark on one target of a run, with its ratio to the baseline
    where the run compares."""

    run: RunData
    m: Measurement
    c: Comparison | None
    role: str  # baseline | candidate

    @property
    def s(self):
        return self.m.summary


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    value: Callable[[Row], object]
    text: Callable[[Row], str] | None = None  # for people; None: the value as it is
    show: frozenset[str] = ALL
    align: str = "r"
    titles: dict = field(default_factory=dict)  # format -> its own title
    names: dict = field(default_factory=dict)  # format -> its own key (CSV's "kind" is the run's)
    wrap: bool = False  # long text: a page may wrap it

    def title_in(self, fmt: str) -> str:
        return self.titles.get(fmt, self.title)

    def name_in(self, fmt: str) -> str:
        return self.names.get(fmt, self.key)

    def text_of(self, row: Row) -> str:
        if self.text is not None:
            return self.text(row)
        v = self.value(row)
        return "-" if v is None else str(v)


def _stat(name: str) -> Callable[[Row], float | None]:
    return lambda r: getattr(r.s, name) if r.s else None


def _shown(name: str) -> Callable[[Row], str]:
    return lambda r: fmt_value(getattr(r.s, name), r.m.benchmark.unit) if r.s else "-"


def _ratio(name: str) -> Callable[[Row], float | None]:
    return lambda r: getattr(r.c, name) if r.c else None


def _stopped(r: Row) -> str:
    return r.m.stopped_by + (f": {r.m.reason}" if r.m.reason else "")


def _harness(r: Row) -> str:
    return fmt_pct(r.m.overhead / r.s.mean, 2) if r.s and r.m.overhead is not None and r.s.mean else "-"


_MACHINE = frozenset({CSV, JSON})

COLUMNS: list[Column] = [
    Column("run_id", "run", lambda r: r.run.id, show=frozenset({CSV})),
    Column("host", "host", lambda r: r.run.host or "", show=frozenset({CSV})),
    Column("run_kind", "kind", lambda r: r.run.kind, show=frozenset({CSV}), names={CSV: "kind"}),
    Column("suite", "suite", lambda r: r.m.benchmark.suite, show=frozenset({HTML, CSV, JSON}), align="l"),
    Column("benchmark", "benchmark", lambda r: r.m.benchmark.name, align="l"),
    Column("direction", "better", lambda r: r.m.benchmark.direction, show=_MACHINE),
    Column("unit", "unit", lambda r: r.m.benchmark.unit, show=_MACHINE),
    Column("kind", "kind", lambda r: r.m.benchmark.kind, show=frozenset({JSON})),
    Column("target", "target", lambda r: r.m.target, align="l"),
    Column("role", "role", lambda r: r.role, show=frozenset({CSV})),
    Column("mean", "mean", _stat("mean"), _shown("mean")),
    Column(
        "ci_rel",
        "±95% CI",
        _stat("ci_rel"),
        lambda r: "±" + fmt_pct(r.s.ci_rel, 2) if r.s else "-",
        show=frozenset({TEXT, MD, HTML, JSON}),
        titles={TEXT: "95% CI"},
    ),
    Column("median", "median", _stat("median"), _shown("median")),
    Column("ci_low", "CI low", _stat("ci_low"), show=_MACHINE),
    Column("ci_high", "CI high", _stat("ci_high"), show=_MACHINE),
    Column("stdev", "stdev", _stat("stdev"), show=_MACHINE),
    Column("cv", "cv", _stat("cv"), show=frozenset({JSON})),
    Column("best3of5", "best 3/5", _stat("best3of5"), _shown("best3of5")),
    Column("min", "min", _stat("min"), _shown("min"), show=frozenset({TEXT, CSV, JSON})),
    Column("best18of30", "best 18/30", _stat("best18of30"), show=frozenset({JSON})),
    Column("n", "n", lambda r: r.s.n if r.s else 0),
    Column(
        "processes",
        "processes",
        lambda r: r.m.processes,
        show=frozenset({TEXT, HTML, CSV, JSON}),
        titles={TEXT: "procs"},
    ),
    Column("harness_overhead", "harness", lambda r: r.m.overhead, _harness, show=frozenset({TEXT, JSON})),
    Column("cpu", "cpu", lambda r: r.m.cpu if r.m.cpu >= 0 else None, show=frozenset({JSON})),
    Column("stopped", "stopped by", _stopped, show=PEOPLE, align="l", wrap=True),
    Column("stopped_by", "stopped by", lambda r: r.m.stopped_by, show=_MACHINE),
    Column("reason", "reason", lambda r: r.m.reason, show=_MACHINE),
    Column("ratio", "ratio", _ratio("ratio"), show=frozenset({CSV})),
    Column("ratio_ci_low", "ratio CI low", _ratio("ratio_ci_low"), show=frozenset({CSV})),
    Column("ratio_ci_high", "ratio CI high", _ratio("ratio_ci_high"), show=frozenset({CSV})),
    Column("p_value", "p", _ratio("p_value"), show=frozenset({CSV})),
    Column("significant", "significant", lambda r: r.c.significant if r.c else None, show=frozenset({CSV})),
    Column("estimand", "estimand", lambda r: r.c.estimand if r.c else None, show=frozenset({CSV})),
]


# CSV's first columns, in the order scripts have read them by position since
# they were written; a column added later comes after them (and after every
# earlier addition), so no position ever moves
CSV_FIRST = [
    "run_id",
    "host",
    "run_kind",
    "benchmark",
    "suite",
    "direction",
    "unit",
    "target",
    "role",
    "n",
    "processes",
    "mean",
    "median",
    "ci_low",
    "ci_high",
    "stdev",
    "min",
    "best3of5",
    "stopped_by",
    "reason",
    "ratio",
    "ratio_ci_low",
    "ratio_ci_high",
    "p_value",
    "significant",
]


@dataclass
class Table:
    """The rows of a run's measurements, in the analysis's order, and the
    suites they fall in (the terminal titles each group)."""

    rows: list[Row]
    columns: list[Column] = field(default_factory=lambda: list(COLUMNS))

    def shown(self, fmt: str) -> list[Column]:
        cols = [c for c in self.columns if fmt in c.show]
        if fmt == CSV:
            first = {k: i for i, k in enumerate(CSV_FIRST)}
            cols.sort(key=lambda c: first.get(c.key, len(first)))  # stable: later ones keep their order
        return cols

    def texts(self, fmt: str) -> list[list[str]]:
        cols = self.shown(fmt)
        return [[c.text_of(r) for c in cols] for r in self.rows]

    def values(self, fmt: str) -> list[dict[str, object]]:
        cols = self.shown(fmt)
        return [{c.name_in(fmt): c.value(r) for c in cols} for r in self.rows]

    def groups(self) -> list[tuple[int, str]]:
        """(row index, title) where a suite begins."""
        out, suite = [], None
        for i, r in enumerate(self.rows):
            b = r.m.benchmark
            if b.suite != suite:
                suite = b.suite
                out.append((i, f"[{suite}] {'lower' if b.direction == 'lower' else 'higher'} is better"))
        return out


def measurements(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> Table:
    base = data.targets[0].name if data.targets else ""
    cby = {(c.candidate, c.benchmark.name): c for c in cs}
    return Table(
        [
            Row(data, m, cby.get((m.target, m.benchmark.name)), "baseline" if m.target == base else "candidate")
            for m in ms
        ]
    )


@dataclass(frozen=True)
class Header:
    """What every writer says about a run before its rows, as text."""

    id: str
    kind: str
    status: str
    started: float
    host: str  # '' when not recorded
    user: str
    vmtax_version: str
    command: str
    targets: list[str]
    goal: str  # the precision asked: '1.0%'
    budget: str  # '6 min'
    pinning: str  # 'pinned to host CPU 1' | 'unpinned'
    per_process: str  # '3 samples/process, 1 warmup' ('' where not recorded)
    cpu_model: str  # the baseline's machine
    cpus: str
    kernel: str
    estimand: str = ""  # where it is not the ratio over every block: what the ratios are
    flag: str = ""  # and the option that said so: '--same-mode' | '--fast-mode'

    def when(self, utc: bool = False) -> str:
        if utc:
            return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.started))
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.started))

    @property
    def machine(self) -> str:
        return f"{self.cpu_model} ({self.cpus} CPUs), kernel {self.kernel}"


def _sampling(data: RunData) -> str:
    """How a run's processes took their samples, in the header's words."""
    cfg = data.config
    if cfg.get("samples_per_process") is None:
        return ""
    if data.kind == "compare" and cfg.get("pairing") == "lockstep":
        go = [
            f"{t.name} {t.facts['lockstep_go_ms']:.2g} ms"
            for t in data.targets
            if isinstance(t.facts.get("lockstep_go_ms"), (int, float))
        ]
        apart = [t.name for t in data.targets[1:] if t.kind == "ssh"]
        k = cfg.get("block_processes", 1)
        return (
            f"lockstep pairs of ~{cfg.get('step_ms', 1):g} ms samples"
            + (f" (a go's round trip: {', '.join(go)})" if go else "")
            + (f", {k} pairs of processes a block (--block-processes)" if k > 1 else "")
            + (f"; {', '.join(apart)}: another machine, its processes in turn" if apart else "")
        )
    return f"{cfg['samples_per_process']} samples/process, {cfg.get('warmup', 0)} warmup"


def per_process(data: RunData) -> str:
    """How a run's processes took their samples, and what a block's
    process stands for (its mean, or with --median its median sample),
    and with --reboot (--shared-boot) how many boots the guests' blocks ran on."""
    said = [_sampling(data)]
    if data.config.get("median"):
        said.append(
            "a process taken at its median sample and a ratio at its median block (--median)"
            if data.config.get("median_blocks")
            else "a process taken at its median sample (--median)"
        )
    if data.config.get("reboot"):
        boots = sorted({t.facts["boots"] for t in data.targets if "boots" in t.facts})
        many = f"{boots[0]}" if len(boots) == 1 else f"{boots[0]}-{boots[-1]}" if boots else "?"
        if data.config.get("shared_boot"):
            said.append(
                f"each round of blocks on one fresh boot, its state live-migrated into every guest "
                f"(--shared-boot: {many} boots)"
            )
        else:
            said.append(f"each round of blocks on fresh boots of the guests (--reboot: {many} boots a guest)")
    return "; ".join(x for x in said if x)


def header(data: RunData) -> Header:
    cfg = data.config
    env = data.targets[0].facts if data.targets else {}
    headline = headline_of(cfg)
    return Header(
        id=data.id,
        kind=data.kind,
        status=data.status,
        started=data.started,
        host=data.host or "",
        user=data.user or "",
        vmtax_version=data.vmtax_version,
        command=data.command,
        targets=[t.name for t in data.targets],
        goal=fmt_goal(cfg.get("precision")),
        budget=fmt_duration(cfg.get("max_time", 0)),
        pinning=f"pinned to host CPU {cfg['cpu']}" if cfg.get("cpu") is not None else "unpinned",
        per_process=per_process(data),
        cpu_model=str(env.get("cpu_model", "?")),
        cpus=str(env.get("cpus_online", "?")),
        kernel=str(env.get("kernel", "?")),
        estimand=f"a row with two modes on both sides ({MODES_MARK}): its ratio {HEADLINE_SAID[headline]}, "
        "where those blocks give an interval"
        if headline
        else "",
        flag=HEADLINE_FLAG[headline] if headline else "",
    )


HEADLINE_SAID = {
    FAST_MODE: "in the fast mode (--fast-mode)",
    SAME_MODE: "over the blocks both sides ran in the same mode (--same-mode)",
}
HEADLINE_FLAG = {FAST_MODE: "--fast-mode", SAME_MODE: "--same-mode"}


@dataclass(frozen=True)
class Side:
    """One candidate's side of a scoreboard line."""

    target: str
    m: Measurement | None
    c: Comparison | None


@dataclass(frozen=True)
class Line:
    """One benchmark of a compare run: the baseline's measurement and each
    candidate's side, in the run's target order."""

    spec: BenchSpec
    base: Measurement | None
    sides: list[Side]


def pivot(t: Table) -> list[Line]:
    """The view's rows, one line per benchmark of the run (in the run's
    order), for the scoreboards."""
    rows = t.rows
    if not rows:
        return []
    run = rows[0].run
    names = [x.name for x in run.targets]
    by = {(r.m.target, r.m.benchmark.name): r for r in rows}
    out = []
    for spec in run.benchmarks:
        base = by.get((names[0], spec.name))
        sides = [
            Side(
                k,
                by[(k, spec.name)].m if (k, spec.name) in by else None,
                by[(k, spec.name)].c if (k, spec.name) in by else None,
            )
            for k in names[1:]
        ]
        out.append(Line(spec, base.m if base else None, sides))
    return out


# -- rows whose processes fell in two modes ------------------------------------------
MODES_MARK = "~"


def _base_modes(c: Comparison, base: Measurement | None) -> Modes | None:
    """The baseline's modes a ratio was judged by: over the blocks it shared
    with a candidate that stopped before it (Comparison.base_shared), else
    its row's."""
    return c.base_modes if c.base_shared else base.modes if base is not None else None


def _modes_of(target: str, m: Measurement | None, c: Comparison | None = None) -> str:
    """A side's modes; the baseline's (c given) as its ratio with c was
    judged by (_base_modes)."""
    shared = c.base_shared if c is not None else 0
    md = _base_modes(c, m) if c is not None else m.modes if m is not None else None
    over = f" over the {shared} blocks it shared with {c.candidate}" if c is not None and shared else ""
    if md is None:
        return f"{target}: one mode{over}"
    row = m if m is not None else c
    assert row is not None  # a side's row, or the comparison whose baseline it is
    unit = row.benchmark.unit
    return (
        f"{target}: two modes{over}, {fmt_value(md.fast, unit)} ({1 - md.slow_share:.0%}) and "
        f"{fmt_value(md.slow, unit)} ({md.slow_share:.0%} of {md.units} processes)"
    )


def _apart(fast, slow) -> bool:
    """Whether the two modes' own ratios' intervals do not meet."""
    return (
        slow is not None
        and fast is not None
        and fast.ci.bounded
        and slow.ci.bounded
        and (fast.ci_high < slow.ci_low or slow.ci_high < fast.ci_low)
    )


def _same_said(ratio: str, same, fast, slow, every) -> str:
    """A --same-mode headline's note: which blocks, each mode's own ratio,
    and where the two modes' intervals do not meet, that it mixes them."""
    n_fast = same.blocks - same.slow_blocks
    which = (
        f"{n_fast} fast, {same.slow_blocks} slow; each mode weighted by its blocks over their levels' spread"
        if n_fast and same.slow_blocks
        else f"{n_fast} fast: too few both slow to count"
        if n_fast
        else f"{same.slow_blocks} slow: too few both fast to count"
    )
    apart = _apart(fast, slow)
    return (
        f"The ratio {ratio} is over the {same.blocks} of {same.of_blocks} blocks in which both ran in the same "
        f"mode ({which}; --same-mode); in the fast mode alone it is "
        + (
            f"{fmt_interval(fast.ci)}, "
            if fast is not None
            else "none (at its ratio the modes fitted together were not each side's own), "
        )
        + (f"in the slow mode alone {fmt_interval(slow.ci)}, " if slow is not None else "")
        + f"over the modes as they fell {fmt_interval(every.ci)}."
        + (
            " The two modes' ratios differ (their intervals do not meet): the same-mode ratio lies between them; "
            "--fast-mode gives the fast mode's alone."
            if apart
            else ""
        )
    )


def bimodal(c: Comparison | None, cand: Measurement | None, base: Measurement | None) -> TypeGuard[Comparison]:
    """Whether a ratio's row is marked: either side's process means fell in
    two modes (a fast-mode ratio needs both)."""
    if c is None:
        return False
    return bool((cand and cand.modes) or _base_modes(c, base))


def mode_texts(t: Table) -> list[str]:
    """The notes of mode_notes in full, each after its mark, for a writer to wrap or escape."""
    return [f"{MODES_MARK} {n.text}" for n in mode_notes(t)]


@dataclass(frozen=True)
class ModeNote:
    """A row whose process means fell in two modes: which figure the row
    gives and why, in a few words each (the scoreboard's one line), and the
    note in full (both sides' modes and every stratum's ratio)."""

    benchmark: str
    target: str
    said: str  # the figure given: 'same-mode ratio', 'all-blocks ratio', ...
    why: str  # '' or why that one: 'two modes on local only', ...
    text: str  # in full


def mode_notes(t: Table) -> list[ModeNote]:
    """A note for every row with two modes among its process means, in the
    view's order: on a compare's candidate row, both sides and the ratio
    over the blocks both ran in their fast mode (the uncontended stratum);
    a baseline's own row only where the run has no candidate to say it
    with."""
    out = []
    by = {(r.m.target, r.m.benchmark.name): r for r in t.rows}
    for r in t.rows:
        name, target = r.m.benchmark.name, r.m.target
        base = by[(r.c.baseline, name)].m if r.c is not None and (r.c.baseline, name) in by else None
        if bimodal(r.c, r.m, base):
            said, why, text = _ratio_said(r, base)
            out.append(
                ModeNote(
                    name,
                    target,
                    said,
                    why,
                    f"{name}, {target} vs {r.c.baseline}: {_modes_of(target, r.m)}; "
                    f"{_modes_of(r.c.baseline, base, r.c)}. {text}",
                )
            )
        elif (
            r.c is None
            and r.m.modes is not None
            and not any(x.c is not None and x.c.baseline == target and x.m.benchmark.name == name for x in t.rows)
        ):
            out.append(
                ModeNote(
                    name,
                    target,
                    "mean over both modes",
                    "",
                    f"{name} on {_modes_of(target, r.m)}; its mean is over the modes as they fell.",
                )
            )
    return out


ALL_BLOCKS_SAID = "all-blocks ratio"


def _ratio_said(r: Row, base: Measurement | None) -> tuple[str, str, str]:
    """(the figure a two-mode candidate row gives, why, the note's sentence
    on its ratios) for a row of mode_notes."""
    c = r.c
    assert c is not None  # a candidate's row: bimodal() holds for none other
    which = headline_of(r.run.config)  # its run's --fast-mode or --same-mode
    f, every = c.fast_mode, c.all_modes
    ratio = fmt_interval(c.ci)
    fast = f and f"the {f.blocks} of {f.of_blocks} blocks in which both ran in their fast mode"
    asked = (f if which == FAST_MODE else c.same_mode) if which else f  # the stratum its run asked for
    flag = "--fast-mode" if which == FAST_MODE else "--same-mode"
    if asked is None and r.m.modes is not None and _base_modes(c, base) is not None:
        return (
            ALL_BLOCKS_SAID,
            "modes not one host state",
            f"The ratio {ratio} is of the means over the modes as they fell; no ratio within a mode"
            + (f" ({flag})" if which else "")
            + ": fitted to both sides together at the ratio, the modes are not each side's own (fewer "
            f"than {MODE_AGREE:.0%} of one side's processes fall where its own fit puts them), so "
            "they are not one state of the host seen on both.",
        )
    if asked is None:
        return (
            ALL_BLOCKS_SAID,
            f"two modes on {r.m.target if r.m.modes is not None else c.baseline} only",
            f"The ratio {ratio} is of the means over the modes as they fell; no ratio within a mode "
            "(fast or same): one side's mode set against the other side's mix would be biased wherever "
            "that side's modes went undetected.",
        )
    if every is not None and c.estimand == SAME_MODE:  # --same-mode: the headline is that stratum's
        return (
            "same-mode ratio",
            "the modes' ratios differ" if _apart(f, c.slow_mode) else "",
            _same_said(ratio, c.same_mode, f, c.slow_mode, every),
        )
    if every is not None:  # --fast-mode: the headline is the fast mode's
        return (
            "fast-mode ratio",
            "",
            f"The ratio {ratio} is over {fast} (--fast-mode); over the modes as they fell it is "
            f"{fmt_interval(every.ci)}.",
        )
    if which:  # --fast-mode or --same-mode asked, but its stratum gave no interval: kept as it was
        ran = (
            "ran with both sides in their fast mode"
            if which == FAST_MODE
            else f"count as run with both sides in one mode (a mode counts from {STRATUM_MIN} such blocks)"
        )
        return (
            ALL_BLOCKS_SAID,
            f"too few {which.replace(' ', '-')} blocks",
            f"The ratio {ratio} is of the means over the modes as they fell: {asked.blocks} of {asked.of_blocks} "
            f"blocks {ran}, too few for an interval, so it stays the ratio over all blocks ({flag} "
            "reports a stratum with one).",
        )
    assert f is not None  # no stratum asked for: the one said (asked) is the fast mode's
    return (
        ALL_BLOCKS_SAID,
        "two modes on both sides",
        f"The ratio {ratio} is of the means over the modes as they fell; over {fast} it is {fmt_interval(f.ci)}.",
    )


# -- a tax that moves with the host's state ----------------------------------------------
@dataclass(frozen=True)
class StateNote:
    """A candidate whose tax moved with the host's state over its rows
    (stats.tax_moves below stats.STATE_CHANCE): the rows each way, the
    median change of its tax, a line for the scoreboard and the note in full."""

    candidate: str
    rows: int  # its rows with a split
    up: int  # rows whose tax was higher in the host's slow half (95% CI above 1)
    down: int  # lower
    median: float  # the median slow/quick change of its tax over its rows
    p_value: float  # stats.tax_moves
    short: str
    text: str


def state_notes(cs: list[Comparison]) -> list[StateNote]:
    """One note per candidate whose tax moved with the host's state, in the
    order of its first row: its ratio in the blocks where the host ran slow
    against those where it ran quick, as the baseline's neighbouring blocks
    read it (stats.host_state)."""
    by: dict[str, list[tuple[Comparison, HostState]]] = {}
    for c in cs:
        if c.host_state is not None:
            by.setdefault(c.candidate, []).append((c, c.host_state))
    out = []
    for cand, got in by.items():
        m = stats.tax_summary([(h, c.benchmark.direction == "higher") for c, h in got])
        if m.p_value >= stats.STATE_CHANCE:
            continue
        moved = [(c, x) for (c, h), x in zip(got, m.changes, strict=True) if h.moved]
        base = got[0][0].baseline
        rows = ", ".join(
            f"{c.benchmark.name} ×{fmt_ratio3(x)}" for c, x in sorted(moved, key=lambda cx: -abs(math.log(cx[1])))
        )
        out.append(
            StateNote(
                candidate=cand,
                rows=len(got),
                up=m.up,
                down=m.down,
                median=m.median,
                p_value=m.p_value,
                short=f"{cand}'s tax moves with the host's state: ×{fmt_ratio3(m.median)} where the host ran slow "
                f"(median of {len(got)} rows)",
                text=f"{cand}'s tax moves with the host's state: in the blocks where the host ran slow (read from "
                f"{base}'s processes in the blocks just before and after), against those where it ran quick, "
                f"{cand}'s tax was higher on {m.up} of {len(got)} rows and lower on {m.down} (each at the "
                f"5% level), ×{fmt_ratio3(m.median)} at the median row (its rows together: p {m.p_value:.2g})"
                + (f"; {rows}" if rows else "")
                + ". Its intervals hold that change beside the noise: pairing a block's sides cancels a state "
                "that slows both alike, not a tax that grows with it, and the ratio is of the states the run met.",
            )
        )
    return out
