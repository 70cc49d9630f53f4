"""What a command that reports a stored run says, and its exit status:
the terminal report (the scoreboard of a compare run, the rows of another,
a scale run's table), the documents it writes (JSON, Markdown, HTML,
JUnit), and the exit code scripts can trust.  Pure: it returns an Output,
and the CLI prints it and writes its files.

Exit codes: 0 done; 1 vmtax could not do it (a target failed to start, a
run failed or was abandoned, nothing was measured); 2 bad input; 3
finished, but some benchmark failed (its error is in the report); 130
interrupted (what was measured is kept).  With a gate: its verdict's code
(0 pass, 1 regressed, 4 a row the candidate or the baseline failed, 3
inconclusive only)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace

from .. import watch
from ..analysis import analyse, reference_adjusted
from ..errors import UserError
from ..model import BOOTED_KINDS, Comparison, Measurement, RunData
from . import explain, html, jsondoc, markdown, scale, scoreboard, terminal, view
from . import watch as watch_report

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_BENCH_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
NO_NOTES = "no notes: every cell holds a ratio, and no row's processes fell in two modes"


@dataclass(frozen=True)
class Options:
    """What the command asked of the report (its options; None: not asked)."""

    json: str | None = None  # a file, or '-' for stdout
    markdown: str | None = None
    html: str | None = None
    junit: str | None = None
    gate: float | None = None  # the threshold to gate a compare run at
    reference: bool = False  # gate the rows adjusted by the reference loop
    all_rows: bool = False  # a compare run's rows, not its scoreboard
    notes: bool = False  # the notes in full, not the scoreboard
    explain: bool = False  # after the scoreboard, why (the per-operation counts)
    command: str = ""  # the command line, as an HTML page names it


@dataclass
class Output:
    """What to print and write: `out` goes to stdout, or to stderr where a
    document goes to stdout (`--json - | jq` works); `err` to stderr;
    `files` are (destination, text), '-' for stdout."""

    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)
    code: int = EXIT_OK

    @property
    def to_stderr(self) -> bool:
        return any(dest == "-" for dest, _ in self.files)


def json_text(doc: object) -> str:
    return json.dumps(doc, indent=2, default=str) + "\n"


def report(data: RunData, opts: Options) -> Output:
    """The report of a stored run, as `vmtax show` and the end of a run give it."""
    if data.kind == "scale":
        return scale_report(data, opts)
    ms, cs = analyse(data)
    gate = gate_of(data, cs, opts.gate, opts.reference) if opts.gate is not None else None
    o = Output(out=[terminal.run_header(data) + "\n"])
    if data.kind == "compare" and not opts.all_rows:
        o.out += _board(data, ms, cs, opts)
    else:
        t = view.measurements(data, ms, cs)
        modes = terminal.mode_lines(t)
        o.out += (
            [modes or NO_NOTES]
            if opts.notes
            else [terminal.measurements_table(t) + "\n"] + ([modes + "\n"] if modes else []) + [terminal.stop_tally(ms)]
        )
    if gate is not None:
        o.out.append("\n" + watch_report.gate_text(gate, data.id) + one_boot_note(data))
        if opts.junit:
            o.files.append((opts.junit, watch_report.gate_junit(gate, data.id)))
    if opts.json:
        o.files.append(
            (
                opts.json,
                json_text(
                    {**jsondoc.document(data, ms, cs), **({"gate": watch_report.gate_json(gate)} if gate else {})}
                ),
            )
        )
    if opts.markdown:
        o.files.append((opts.markdown, markdown.document(data, ms, cs)))
    o.code, said = exit_code(data, ms, cs, gate)
    o.err += said
    return o


def _board(data: RunData, ms: list[Measurement], cs: list[Comparison], opts: Options) -> list[str]:
    """A compare run's scoreboard and targets (or its notes in full), and why, where asked."""
    board = scoreboard.build(data, ms, cs)
    if opts.notes:
        out = [terminal.notes(board) or NO_NOTES]
    else:
        out = [terminal.scoreboard(board) + "\n", terminal.targets(board.targets, whole=False)]
    if opts.explain:
        out += ["\nWhy, per operation (vmtax explain " + data.id + "):\n", explain.text(explain.view(data, ms, cs))]
    return out


def exit_code(data: RunData, ms: list[Measurement], cs: list[Comparison], gate=None) -> tuple[int, list[str]]:
    """The exit code of a finished run's report, and what to say on stderr about it."""
    if data.status == "interrupted":
        kept = sum(1 for s in data.samples if not s.warmup)
        return EXIT_INTERRUPTED, [f"interrupted: {kept} samples kept in run {data.id}"]
    if data.status in ("failed", "abandoned"):
        return EXIT_FAIL, []
    failed = any(m.stopped_by == "error" for m in ms)
    empty = nothing_measured(data, ms, cs)
    if empty:  # a benchmark's error says more than "no ratio" (exit 3), else 1; a gate's error its own
        code = (
            gate.exit_code
            if gate is not None and gate.verdict == "error"
            else EXIT_BENCH_ERROR
            if failed
            else EXIT_FAIL
        )
        return code, [f"vmtax: {empty}"]
    if gate is not None:
        return gate.exit_code, []
    return (EXIT_BENCH_ERROR if failed else EXIT_OK), []


def nothing_measured(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> str:
    """Why a finished run has nothing to show ('' when it has): a compare
    without one ratio, a run without one measurement."""
    if data.kind == "compare" and len(data.targets) > 1:
        if any(math.isfinite(c.ratio) and c.ratio > 0 for c in cs):
            return ""
        return (
            f"run {data.id} produced no ratio: no row has a sample on the baseline and a candidate "
            f"(see each row's reason; a larger --max-time buys the first blocks)"
        )
    if any(m.summary is not None and m.summary.n > 0 for m in ms):
        return ""
    return f"run {data.id} produced no measurement (see each row's reason)"


def gate_of(data: RunData, cs: list[Comparison], threshold: float, reference: bool = False) -> watch.Gate:
    """The gate of a stored compare run (its rows adjusted by the reference
    loop where asked and honest); UserError where there is nothing to gate."""
    if data.kind != "compare" or len(data.targets) < 2:
        raise UserError(
            f"run {data.id} is a {data.kind} run of {len(data.targets)} target(s): a gate needs a "
            f"compare run (a baseline and a candidate: vmtax compare A B)"
        )
    checks: list = []
    if reference:
        cs, checks = reference_adjusted(data, cs)
    g = replace(watch.gate(data, cs, threshold), reference=tuple(checks))
    if not g.rows:
        raise UserError(f"run {data.id} has no compared row to gate")
    return g


def one_boot_note(data: RunData) -> str:
    """A line under a one-run gate of guests of one kind: each side is one
    boot, whose own offset its interval does not hold (watch.over_runs)."""
    base = data.targets[0].kind
    if data.config.get("reboot") or base not in BOOTED_KINDS or not any(t.kind == base for t in data.targets[1:]):
        return ""
    return (
        f"\n  {base} guests, one boot a side: what a boot carries of its own is not in these intervals; "
        f"gate several runs together (vmtax gate RUN RUN ...: docs/change.md, a gate for guests)"
    )


def gate_over_runs(runs: list[tuple[RunData, list[Comparison]]], threshold: float) -> watch.Gate:
    """The gate of several stored compare runs of the same targets, each
    run one replicate (watch.over_runs); UserError where there is nothing to gate."""
    for data, _ in runs:
        if data.kind != "compare" or len(data.targets) < 2:
            raise UserError(f"run {data.id} is a {data.kind} run: a gate over runs reads compare runs")
    g = replace(watch.gate(runs[-1][0], watch.over_runs(runs), threshold), runs=len(runs))
    if not g.rows:
        raise UserError(f"runs {runs[0][0].id} .. {runs[-1][0].id} have no row compared in every run")
    return g


def scale_report(data: RunData, opts: Options) -> Output:
    """A scale run's table, and its documents."""
    views = scale.view(data)
    o = Output(out=[scale.text(data, views)])
    if opts.json:
        o.files.append((opts.json, json_text(scale.document(data, views))))
    if opts.markdown:
        o.files.append((opts.markdown, scale.markdown(data, views)))
    if opts.html:
        o.files.append((opts.html, html.document([(data, [], [])], opts.command)))
    if data.status == "interrupted":
        o.err.append(f"interrupted: the complete rounds are kept in run {data.id}")
        o.code = EXIT_INTERRUPTED
    elif data.status in ("failed", "abandoned"):
        o.code = EXIT_FAIL
    return o
