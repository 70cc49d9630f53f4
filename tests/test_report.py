"""Exports of stored runs: golden Markdown and CSV, escaping, warnings."""

import csv
import io
import json
import math
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from reportdata import run
from vmtax import stats
from vmtax.analysis import analyse
from vmtax.model import Interval, Sample
from vmtax.report import csvout, facts, html, jsondoc, markdown, scoreboard, terminal, view

GOLDEN = Path(__file__).parent / "golden"


def _board_text(data, ms, cs) -> str:
    """The terminal's scoreboard of a run (the board built once, laid out)."""
    return terminal.scoreboard(scoreboard.build(data, ms, cs))


def _notes_text(data, ms, cs) -> str:
    """The board's notes in full, as `vmtax show --notes` prints them."""
    return terminal.notes(scoreboard.build(data, ms, cs))


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):  # rewritten, and the run fails: a run that rewrites never passes
        path.write_text(text)
        pytest.fail(f"{name} rewritten (UPDATE_GOLDEN is set): review the diff, rerun without it")
    assert text == path.read_text(), f"{name} changed; rerun with UPDATE_GOLDEN=1 if intended"


@pytest.mark.parametrize("kind", ["compare", "run"])
def test_markdown_golden(kind):
    data = run(kind=kind, names=("local", "qemu:accel=tcg") if kind == "compare" else ("local",))
    check_golden(f"{kind}.md", markdown.document(data, *analyse(data)))


def _one_view():
    """One run's view, with a row that has no samples and a reason to escape."""
    data = run(names=("local", "qemu:accel=tcg", "uml"), counts=True)
    data.outcomes[("uml", "pi")] = ("error", "agent died | <b>badly</b>")
    data.samples = [s for s in data.samples if not (s.target == "uml" and s.benchmark == "pi")]
    ms, cs = analyse(data)
    return data, ms, cs, view.measurements(data, ms, cs)


WRITERS = {
    "txt": lambda t: terminal.measurements_table(t) + "\n",
    "md": lambda t: "\n".join(markdown.md_table(t)) + "\n",
    "html": lambda t: html.measurements_table(t) + "\n",
    "csv": lambda t: "\n".join(",".join(r) for r in [csvout.header(t), *csvout.rows(t)]) + "\n",
    "json": lambda t: json.dumps(jsondoc.result_rows(t), indent=1) + "\n",
}


@pytest.mark.parametrize("fmt", WRITERS)
def test_every_writer_renders_the_one_view(fmt):
    """The measurements of one view, in each format: golden files."""
    check_golden(f"measurements.{fmt}", WRITERS[fmt](_one_view()[3]))


def test_every_writer_lays_out_the_one_header():
    """A run's header is built once (view.header) and laid out by the
    terminal, Markdown (a run and a scoreboard) and HTML writers: golden."""
    import time

    data = run(names=("local", "qemu:accel=tcg"))
    data.host, data.user = "box <1>", "me"
    data.config.update(samples_per_process=3, warmup=1, cpu=1)
    ms, cs = analyse(data)
    one = run(kind="run", names=("local",))
    section = html.run_section(data, ms, cs)
    tz = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"  # the terminal's header is in local time
    time.tzset()
    try:
        parts = [
            terminal.run_header(data),
            "\n".join(markdown.document(one, *analyse(one)).splitlines()[:3]),
            "\n".join(markdown.document(data, ms, cs).splitlines()[:3]),
            section[: section.index("</p>") + 4],
        ]
    finally:
        if tz is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = tz
        time.tzset()
    check_golden("header.txt", "\n--\n".join(parts) + "\n")


def test_every_scoreboard_lays_out_the_one_pivot():
    """The text, Markdown and HTML scoreboards of a compare lay out one
    pivot of the view (view.pivot): golden, with a candidate's row that
    failed and a reason to escape."""
    from vmtax.report import scoreboard

    data, ms, cs, t = _one_view()
    lines = view.pivot(t)
    assert [x.spec.name for x in lines] == [b.name for b in data.benchmarks]
    assert all([s.target for s in x.sides] == ["qemu:accel=tcg", "uml"] for x in lines)
    check_golden(
        "scoreboard.txt",
        "\n=====\n".join(
            [
                _board_text(data, ms, cs),
                markdown.scoreboard_md(scoreboard.build(data, ms, cs)),
                html.scoreboard_table(scoreboard.build(data, ms, cs)),
            ]
        )
        + "\n",
    )


def test_a_column_is_one_entry_in_the_view():
    """A column added to the view shows in the writers it names, and in no
    other, with no edit to any writer."""
    *_, t = _one_view()
    t.columns.append(view.Column("answer", "the answer", lambda r: 42, show=frozenset({view.TEXT, view.CSV})))
    out = {fmt: w(t) for fmt, w in WRITERS.items()}
    lines = out["txt"].splitlines()
    data = [line for line in lines if line.startswith(("getppid", "forkwait"))]
    assert "the answer" in lines[0] and data and all(line.rstrip().endswith("42") for line in data)
    assert csvout.header(t)[-1] == "answer" and all(r[-1] == "42" for r in csvout.rows(t))
    assert all("answer" not in out[f] for f in ("md", "html", "json"))


def test_a_field_of_the_scoreboard_is_one_entry_and_shows_in_every_format():
    """A field added to the board once (scoreboard.Field) shows in the
    terminal's, Markdown's and HTML's scoreboard, with its title and its
    legend, and in every JSON comparison, with no edit to any writer."""
    data, ms, cs, _ = _one_view()
    board = scoreboard.build(data, ms, cs)
    board.fields.append(
        scoreboard.Field(
            "answer",
            lambda x: 42,
            lambda x, fmt: f"{fmt}:42",
            "deep thought",
            legend="the answer to everything",
            show=view.PEOPLE | {view.JSON},
        )
    )
    text = terminal.scoreboard(board)
    assert text.count("deep thought") == 2 and "text:42" in text and "the answer to everything" in text
    md = markdown.scoreboard_md(board)
    assert md.count("deep thought") == 2 and md.count("md:42") == 6 and "the answer to everything" in md
    page = html.scoreboard_table(board)
    assert page.count("deep thought") == 2 and page.count("html:42") == 6 and "the answer to everything" in page
    comparisons = jsondoc.comparisons(board)
    assert len(comparisons) == 5 and all(c["answer"] == 42 for c in comparisons)
    assert not any("answer" in c for c in jsondoc.document(data, ms, cs)["comparisons"])  # that board's alone


def test_csv_golden():
    data = run()
    check_golden("compare.csv", csvout.document([(data, *analyse(data))]))


def test_markdown_is_pasteable():
    data = run(facts={"cpu_model": "A|B"})
    text = markdown.document(data, *analyse(data))
    table = [line for line in text.splitlines() if line.startswith("| getppid")]
    assert table and table[0].count("|") == 4  # benchmark + 2 cells per candidate, no stray pipes
    assert "A\\|B" in text


HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"


def test_html_escapes_everything_from_a_target():
    data = run(
        facts={"kernel": HOSTILE, "hypervisor_vendor": HOSTILE, "accel_note": HOSTILE},
        names=("local", "qemu:label=<b>x</b>"),
    )
    data.outcomes[("qemu:label=<b>x</b>", "pi")] = ("error", HOSTILE)
    page = html.document([(data, *analyse(data))], "vmtax report <i>")
    assert HOSTILE not in page and "<b>x</b>" not in page and "<i>" not in page
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # only the page's own sorting script
    assert "Content-Security-Policy" in page
    # nothing that could be fetched (SVG xmlns declarations name, never fetch)
    assert not re.search(r'(src|href)\s*=\s*"(https?:|//)|url\((?!#)|@import', page)


def test_html_has_charts_per_suite_and_per_benchmark():
    data = run()
    page = html.document([(data, *analyse(data))], "vmtax report")
    assert page.count("<svg") == 2 + 3  # ratio bars for kernel and cpu; a distribution per benchmark
    assert 'id="dist-forkwait"' in page and "geometric mean" in page


def test_warnings_when_runs_differ():
    a, b = run(run_id="a"), run(run_id="b", cpu_model="Other CPU", agent_hash="b" * 64)
    w = facts.warnings([a, b])
    assert any("CPU model" in x for x in w) and any("agent binaries" in x for x in w)
    assert facts.warnings([a, run(run_id="c")]) == []


def test_explain_golden_and_readings():
    from vmtax.report import explain

    data = run(names=("local", "qemu:accel=tcg", "uml"), counts=True)
    blocks = explain.view(data, *analyse(data))
    check_golden("explain.md", explain.markdown(blocks))
    getppid = next(b for b in blocks if b.benchmark == "getppid")
    text = " ".join(getppid.readings)
    assert "uml: ~2.1 host context switches and ~16.8 host syscalls per getppid (local: 0, 1)" in text
    assert "ptrace round trip" in text
    assert "qemu:accel=tcg: host user CPU ≈ guest CPU time (295 ns against 310 ns" in text and "no VM exits" in text
    keys = [k for k, *_ in getppid.rows]
    assert keys[0] == "time" and "host_syscalls" in keys and "exits" not in keys  # nothing counted: no row
    doc = explain.to_json(blocks)
    row = next(r for r in doc[0]["rows"] if r["key"] == "host_context_switches")
    assert row["values"]["uml"]["mean"] == pytest.approx(2.1, rel=0.01)


def test_explain_says_nothing_it_cannot_show():
    """No counts, no readings; a candidate as fast as its baseline gets none."""
    from vmtax.report import explain

    data = run(names=("local", "qemu:accel=tcg"))
    blocks = explain.view(data, *analyse(data))
    assert all(len(b.rows) == 1 and not b.readings for b in blocks)


def test_a_log_scale_chart_labels_its_ticks_as_plain_numbers():
    """Matplotlib's default log labels are mathtext, which an SVG with live
    text shows raw: '$\\mathdefault{10^{1}}$' on the page."""
    from vmtax.report import plots

    svg = plots.ratio_bars(
        "kernel",
        "lower",
        ["getppid", "segv"],
        [
            ("uml", [Interval(78.0, 77.0, 79.0), Interval(19.0, 18.9, 19.1)]),
            ("container", [Interval(1.1, 1.0, 1.2), None]),
        ],
    )
    assert "mathdefault" not in svg and "$" not in svg


def test_explain_shows_a_workloads_host_cost_per_unit_of_work():
    """net_rr: its figure, then host CPU per 1000 transactions (with the
    user/system split), host context switches and the peer's CPU, in
    ms/1000tx, with a reading when the guest's unit costs far more."""
    import random as _random

    from vmtax.model import RunData, Sample
    from vmtax.report import explain
    from vmtax.suite.workloads import BY_NAME

    base = run(names=("local", "qemu:nic=virtio"))
    specs = BY_NAME["net_rr"].specs()
    rng, samples = _random.Random(7), []
    cost = {"local": (27.0, 1.3, 1762.0), "qemu:nic=virtio": (563.0, 456.0, 11262.0)}
    for n, (cpu, user, sw) in cost.items():
        for k in range(8):
            m = {
                "host_cpu_per_unit": cpu * rng.uniform(0.98, 1.02),
                "host_cpu_user_per_unit": user,
                "host_cpu_sys_per_unit": cpu - user,
                "host_context_switches_per_unit": sw,
                "peer_cpu_per_unit": 25.0,
            }
            for spec in specs:
                samples.append(
                    Sample(
                        spec.name,
                        n,
                        rng.uniform(900, 1100) * (1 if n == "local" else 0.1),
                        spec.unit,
                        process=k,
                        seq=0,
                        block=k,
                        t=1767268800.0 + k,
                        metrics=dict(m),
                    )
                )
    data = RunData(
        **{
            **base.__dict__,
            "benchmarks": specs,
            "samples": samples,
            "outcomes": {(n, s.name): ("budget", "") for n in cost for s in specs},
        }
    )
    blocks = explain.view(data, *analyse(data))
    assert [b.benchmark for b in blocks] == ["net_rr.tx_per_s"]  # once per workload
    b = blocks[0]
    assert b.per == "per 1000tx"
    labels = {k: (label, unit) for k, label, unit, _ in b.rows}
    assert labels["host_cpu_per_unit"][1] == "ms/1000tx" and "ms/1000tx" in labels["host_cpu_per_unit"][0]
    assert labels["host_context_switches_per_unit"][1] == "switches/1000tx"
    import re

    assert any(
        re.match(
            r"qemu:nic=virtio: 2[01]\.\dx the host CPU per 1000tx of local \(5\d\d against 2\d\.?\d* "
            r"ms/1000tx\), 1\d% of it in the host kernel; 11,262 host context switches",
            r,
        )
        for r in b.readings
    ), b.readings
    assert "per 1000tx" in explain.text(blocks) and '<th class="l">per 1000tx</th>' in explain.html(blocks)


def test_a_note_several_targets_share_is_said_once():
    """Five QEMU guests of a disk comparison share one failed KVM probe:
    the note under the targets names them together, once."""
    data = run(names=("local", "qemu:disk=virtio", "qemu:disk=scsi"), facts={"accel_note": "TCG: no KVM"})
    data.targets[0].facts.pop("accel_note")
    data.config["skipped_targets"] = {"uml": "FPU too small"}
    assert facts.target_notes(data) == [
        (["qemu:disk=virtio", "qemu:disk=scsi"], "TCG: no KVM"),
        (["uml"], "not measured, it does not work here: FPU too small"),
    ]
    md = markdown.targets_md(facts.targets(data))
    assert md.count("TCG: no KVM") == 1 and "- `qemu:disk=virtio`, `qemu:disk=scsi`: TCG: no KVM" in md
    page = html.document([(data, *analyse(data))], "r")
    assert page.count("TCG: no KVM") == 1 and "qemu:disk=virtio, qemu:disk=scsi: TCG: no KVM" in page


def test_the_summary_line_says_the_share_the_goal_and_the_median_interval():
    """The share of ratios within the precision asked is not mistaken for
    the precision asked, and the median half-width (the figure a precision
    goal is stated in) is there, a ratio without an interval counted as
    infinite."""
    import dataclasses

    from vmtax.report import scoreboard

    data = run(names=("local", "qemu"))
    data.config["precision"] = 0.01
    c = analyse(data)[1][0]
    cs = [dataclasses.replace(c, ci=Interval(1.0, 1 - w, 1 + w)) for w in (0.005, 0.03, 0.04, 0.05)]
    line = scoreboard.precision_share(data, cs)
    assert line.startswith("1 of 4 ratios (25%) reached the precision asked (±1.0%), median ±3.5%;"), line
    cs[-1] = dataclasses.replace(cs[-1], ci=Interval(1.0, float("nan"), float("nan")))
    cs[-2] = dataclasses.replace(cs[-2], ci=Interval(1.0, float("nan"), float("nan")))
    assert ", median: no interval;" in scoreboard.precision_share(data, cs)
    data.config["precision"] = 0.000001  # --precision 0.0001%: not "±0.0%"
    assert "reached the precision asked (±0.0001%)" in scoreboard.precision_share(data, cs)
    from vmtax.report.units import fmt_goal

    assert [fmt_goal(g) for g in (0.05, 0.01, 0.001, 0.0005, None)] == ["5.0%", "1.0%", "0.1%", "0.05%", "-"]


def _bimodal_run(kind="compare", base_slow=0.2, cand_slow=0.5):
    """40 blocks of getppid: the baseline 1.3x slower in base_slow of its
    processes, the candidate 1.5x slower than it and 1.3x slower again in
    cand_slow of its processes."""
    import random as _random

    data = run(kind=kind, names=("local", "qemu:accel=tcg") if kind == "compare" else ("qemu:accel=tcg",))
    data.benchmarks = data.benchmarks[:1]
    data.samples = _getppid_samples(
        _random.Random(7),
        [t.name for t in data.targets],
        40,
        lambda rng: None,
        lambda rng, _, name: (
            100.0 * (1.3 if rng.random() < base_slow else 1.0)
            if name == "local"
            else 150.0 * (1.3 if rng.random() < cand_slow else 1.0)
        ),
        0.005,
    )
    return data


def _getppid_samples(rng, names, blocks, state_of, mean_of, sd):
    """getppid samples of one process per target and block, four each (the
    first a warmup) around the process's mean, mean_of(rng, state, name),
    where state_of(rng) draws the block's (the host's) state."""
    samples = []
    for blk in range(blocks):
        state = state_of(rng)
        for name in names:
            mean = mean_of(rng, state, name)
            for seq in range(4):
                samples.append(
                    Sample(
                        "getppid",
                        name,
                        mean * (1 + rng.gauss(0, sd)),
                        "ns",
                        process=blk,
                        seq=seq,
                        warmup=seq == 0,
                        t=1767268800.0 + blk,
                        block=blk,
                    )
                )
    return samples


def test_a_candidate_whose_processes_fall_in_two_modes_gets_its_fast_mode_ratio_in_every_writer():
    data = _bimodal_run()
    ms, cs = analyse(data)
    base, cand = (next(m for m in ms if m.target == t) for t in ("local", "qemu:accel=tcg"))
    assert base.modes is not None and cand.modes is not None
    assert cand.modes.fast == pytest.approx(150, rel=0.01) and cand.modes.slow == pytest.approx(195, rel=0.01)
    assert base.modes.fast == pytest.approx(100, rel=0.01) and base.modes.slow == pytest.approx(130, rel=0.01)
    (c,) = cs
    f = c.fast_mode
    means = {
        t: {s.block: s.value for s in data.samples if s.target == t and s.seq == 1} for t in ("local", "qemu:accel=tcg")
    }  # a process's samples lie within 1.5% of its mean
    both = sum(
        not base.modes.is_slow(means["local"][k]) and not cand.modes.is_slow(means["qemu:accel=tcg"][k])
        for k in range(40)
    )
    assert f.of_blocks == 40 and f.blocks == both and 6 <= both <= 28
    assert f.ratio == pytest.approx(1.5, rel=0.005) and f.ci_low < 1.5 < f.ci_high and f.ci_high - f.ci_low < 0.02
    assert c.ratio > 1.55 and c.ratio_ci_high - c.ratio_ci_low > 5 * (f.ci_high - f.ci_low)  # the mix is wider
    text = _board_text(data, ms, cs)
    assert re.search(r"getppid +1\.\d\d\*  ~", text) or re.search(r"getppid +1\.\d\d\*\?~", text), text
    assert "~ two modes (see below)" in " ".join(text.split())
    assert text.splitlines()[-1] == "~ getppid: all-blocks ratio for qemu:accel=tcg (two modes on both sides)"
    note = " ".join(_notes_text(data, ms, cs).split("~ getppid,")[1].split())
    assert (
        note.startswith("qemu:accel=tcg vs local: qemu:accel=tcg: two modes, 150 ns")
        and "local: two modes, 100 ns" in note
    )
    assert f"over the {f.blocks} of 40 blocks in which both ran in their fast mode it is {f.ratio:.3f} [" in note
    md = markdown.document(data, ms, cs)
    assert "\\~ getppid, qemu:accel=tcg vs local" in md and " ~" not in md.replace("\\~", "")
    doc = jsondoc.document(data, ms, cs)
    assert doc["comparisons"][0]["fast_mode"]["blocks"] == f.blocks
    assert doc["comparisons"][0]["fast_mode"]["ratio"] == pytest.approx(f.ratio)
    rows = {r["target"]: r for r in doc["results"]}
    assert rows["local"]["modes"]["processes"] == 40 and rows["qemu:accel=tcg"]["modes"]["slow_share"] > 0.3
    json.dumps(doc, allow_nan=False)
    page = html.document([(data, ms, cs)], "vmtax report")
    assert "~ getppid, qemu:accel=tcg vs local" in page


def test_with_two_modes_on_one_side_only_there_is_no_fast_mode_ratio_and_the_note_says_why():
    data = _bimodal_run(base_slow=0.0)
    data.config["fast_mode"] = True  # nor a fast-mode headline
    ms, cs = analyse(data)
    (c,) = cs
    assert c.fast_mode is None and c.all_modes is None and c.ratio > 1.55
    text = _board_text(data, ms, cs)
    assert re.search(r"getppid +1\.\d\d\*.~", text), text
    assert text.splitlines()[-1] == "~ getppid: all-blocks ratio for qemu:accel=tcg (two modes on qemu:accel=tcg only)"
    flat = " ".join(_notes_text(data, ms, cs).split())
    assert "local: one mode" in flat and "no ratio within a mode (fast or same): one side's mode set against" in flat
    assert jsondoc.document(data, ms, cs)["comparisons"][0]["fast_mode"] is None


def test_a_single_target_run_with_two_modes_says_what_its_mean_is():
    data = _bimodal_run(kind="run")
    ms, cs = analyse(data)
    t = view.measurements(data, ms, cs)
    lines = " ".join(terminal.mode_lines(t).split())
    assert lines.startswith("~ getppid on qemu:accel=tcg: two modes, 150 ns") and "over the modes as they fell" in lines
    assert "\\~ getppid on qemu:accel=tcg" in markdown.document(data, ms, cs)
    assert (
        terminal.mode_lines(view.measurements(*(lambda d: (d, *analyse(d)))(run(kind="run", names=("local",))))) == ""
    )


def test_with_fast_mode_a_two_mode_row_reports_its_fast_stratum_and_says_so():
    data = _bimodal_run()
    data.config["fast_mode"] = True
    ms, cs = analyse(data)
    (c,) = cs
    assert c.ratio == c.fast_mode.ratio == pytest.approx(1.5, rel=0.005) and c.all_modes.ratio > 1.55
    assert c.all_modes.blocks == c.all_modes.of_blocks == 40 and c.fast_mode.blocks < 40
    assert c.p_value == c.fast_mode.p_value and c.significant
    assert terminal.run_header(data).splitlines()[1].endswith(" · --fast-mode")
    assert _board_text(data, ms, cs).splitlines()[-1] == "~ getppid: fast-mode ratio for qemu:accel=tcg"
    assert (
        "a row with two modes on both sides (\\~): its ratio in the fast mode (--fast-mode), where those blocks "
        "give an interval"
    ) in markdown.document(data, ms, cs)
    assert "(--fast-mode); over the modes as they fell it is 1.6" in " ".join(_notes_text(data, ms, cs).split())
    doc = jsondoc.document(data, ms, cs)
    (row,) = doc["comparisons"]
    assert row["estimand"] == "fast mode" and row["ratio"] == pytest.approx(c.fast_mode.ratio)
    assert row["all_modes"]["ratio"] == pytest.approx(c.all_modes.ratio)
    assert "Ratios: a row with two modes on both sides (\\~)" in markdown.document(data, ms, cs)
    from vmtax import watch as w
    from vmtax.report import watch as wr

    (g,) = wr.gate_json(w.gate(data, cs, 0.02))["rows"]
    assert g["estimand"] == "fast mode" and g["why"].endswith("; in the fast mode (--fast-mode)")
    rows = list(csv.DictReader(io.StringIO(csvout.document([(data, ms, cs)]))))
    assert [r["estimand"] for r in rows] == ["", "fast mode"]
    plain = run()  # rows with one mode: as without it
    plain.config["fast_mode"] = True
    assert [x.ratio for x in analyse(plain)[1]] == [x.ratio for x in analyse(run())[1]]
    assert all(r["estimand"] == "all blocks" for r in jsondoc.document(plain, *analyse(plain))["comparisons"])


def test_with_same_mode_a_two_mode_row_reports_its_same_mode_ratio_and_each_modes_own():
    data = _bimodal_run(base_slow=0.4)
    data.config["same_mode"] = True
    ms, cs = analyse(data)
    (c,) = cs
    s, f, slow = c.same_mode, c.fast_mode, c.slow_mode
    assert slow is not None and s.slow_blocks == slow.blocks >= 3 and s.blocks == f.blocks + slow.blocks
    assert c.ratio == s.ratio == pytest.approx(1.5, rel=0.005) and c.all_modes.ratio != pytest.approx(1.5, rel=0.01)
    assert c.p_value == s.p_value and c.estimand == "same mode"
    assert c.ratio_ci_high - c.ratio_ci_low <= f.ci_high - f.ci_low  # the slow blocks add to the fast ones
    assert terminal.run_header(data).splitlines()[1].endswith(" · --same-mode")
    assert _board_text(data, ms, cs).splitlines()[-1] == "~ getppid: same-mode ratio for qemu:accel=tcg"
    assert (
        "a row with two modes on both sides (\\~): its ratio over the blocks both sides ran in the same mode "
        "(--same-mode)"
    ) in " ".join(markdown.document(data, ms, cs).split())
    flat = " ".join(_notes_text(data, ms, cs).split())
    assert (
        f"in which both ran in the same mode ({f.blocks} fast, {slow.blocks} slow; each mode weighted by its "
        "blocks over their levels' spread; --same-mode); in the fast mode alone it is 1.5"
    ) in flat
    assert "in the slow mode alone it is" not in flat and "in the slow mode alone 1.5" in flat
    (row,) = jsondoc.document(data, ms, cs)["comparisons"]
    assert row["estimand"] == "same mode" and row["same_mode"]["slow_blocks"] == slow.blocks
    assert row["slow_mode"]["ratio"] == pytest.approx(slow.ratio) and "slow_blocks" not in row["fast_mode"]
    from vmtax import watch as w
    from vmtax.report import watch as wr

    (g,) = wr.gate_json(w.gate(data, cs, 0.02))["rows"]
    assert g["estimand"] == "same mode" and g["why"].endswith("(--same-mode)")
    data.config["same_mode"], data.config["fast_mode"] = False, True
    assert analyse(data)[1][0].ratio == f.ratio  # --fast-mode: the fast stratum's, as before


def test_a_stratum_too_small_for_an_interval_leaves_the_row_as_it_was_and_its_note_says_so():
    data = _bimodal_run(base_slow=0.85, cand_slow=0.85)  # both fast in a block or two only
    data.config["fast_mode"] = True
    ms, cs = analyse(data)
    (c,) = cs
    f = c.fast_mode
    assert f is not None and f.blocks < 6 and not math.isfinite(f.ci_high)
    assert c.estimand == "all blocks" and c.all_modes is None
    flat = " ".join(_notes_text(data, ms, cs).split())
    assert (
        f"The ratio {c.ratio:.3f} [" in flat
        and f"is of the means over the modes as they fell: {f.blocks} of 40 "
        "blocks ran with both sides in their fast mode, too few for an interval, so it stays the ratio over all "
        "blocks (--fast-mode reports a stratum with one)."
    ) in flat
    data.config["fast_mode"], data.config["same_mode"] = False, True  # the slow blocks give it one
    (c,) = analyse(data)[1]
    assert c.estimand == "same mode" and c.same_mode.slow_blocks > 20
    from dataclasses import replace

    from vmtax.model import Stratum

    data.config["same_mode"] = False
    ms, (c,) = analyse(data)
    data.config["same_mode"] = True  # as a run whose same-mode stratum gave no interval is written
    c = replace(c, same_mode=Stratum(Interval(math.nan, -math.inf, math.inf), 4, 40, slow_blocks=4))
    flat = " ".join(_notes_text(data, ms, [c]).split())
    assert (
        "4 of 40 blocks count as run with both sides in one mode (a mode counts from 3 such blocks), too few "
        "for an interval, so it stays the ratio over all blocks (--same-mode reports a stratum with one)."
    ) in flat


def test_a_same_mode_note_says_when_the_modes_ratios_differ_or_one_mode_had_too_few_blocks():
    from vmtax.model import Stratum
    from vmtax.report.view import _same_said

    fast, every = Stratum(Interval(1.00, 0.99, 1.01), 20, 40, 0.5), Stratum(Interval(1.02, 1.0, 1.04), 40, 40, 0.03)
    slow = Stratum(Interval(1.05, 1.03, 1.07), 10, 40, 0.001, slow_blocks=10)
    said = _same_said(
        "1.012 [1.003, 1.02]", Stratum(Interval(1.012, 1.003, 1.02), 30, 40, 0.01, slow_blocks=10), fast, slow, every
    )
    assert "(20 fast, 10 slow; each mode weighted by its blocks over their levels' spread; --same-mode)" in said
    assert "in the slow mode alone 1.050 [1.030, 1.070]" in said and "The two modes' ratios differ" in said
    near = Stratum(Interval(1.01, 1.0, 1.03), 10, 40, 0.2, slow_blocks=10)
    assert "differ" not in _same_said(
        "r", Stratum(Interval(1.0, 0.99, 1.01), 30, 40, 0.5, slow_blocks=10), fast, near, every
    )
    alone = _same_said("r", Stratum(Interval(1.0, 0.99, 1.01), 20, 40, 0.5), fast, None, every)
    assert "(20 fast: too few both slow to count; --same-mode)" in alone and "slow mode alone" not in alone


def _tail_run(same_mode=True):
    """The TCG-cpuid shape under the hog (20261126-192538-4e41): the
    baseline 1.5x slower in 46% of its processes (the host's state), the
    candidate at 1/600 of it, 1.5x slower in the same state, and 3x slower
    again in a tail of 26% of its processes of its own."""
    import random as _random

    data = run(names=("local", "qemu:accel=tcg"))
    data.benchmarks = data.benchmarks[:1]
    data.config["same_mode"] = same_mode
    data.samples = _getppid_samples(
        _random.Random(11),
        ["local", "qemu:accel=tcg"],
        92,
        lambda rng: 1.5 if rng.random() < 0.46 else 1.0,
        lambda rng, state, name: (
            4000.0 * state if name == "local" else 5.1 * state * (3.0 if rng.random() < 0.26 else 1.0)
        ),
        0.01,
    )
    return data


def test_where_the_two_sides_modes_are_not_one_state_of_the_host_there_is_no_stratum_and_the_note_says_why():
    data = _tail_run()
    ms, cs = analyse(data)
    base, cand = (next(m for m in ms if m.target == t) for t in ("local", "qemu:accel=tcg"))
    assert base.modes is not None and cand.modes is not None  # each side on its own: two modes
    assert base.modes.slow / base.modes.fast == pytest.approx(1.5, rel=0.02)
    assert cand.modes.slow / cand.modes.fast > 2.2  # its own tail, not the host's state
    (c,) = cs
    assert c.same_mode is None and c.fast_mode is None and c.estimand == "all blocks"
    every = sum(s.value for s in data.samples if s.target == "qemu:accel=tcg" and not s.warmup) / sum(
        s.value for s in data.samples if s.target == "local" and not s.warmup
    )
    assert c.ratio == pytest.approx(every, rel=0.02) and c.ratio_ci_low < every < c.ratio_ci_high
    flat = " ".join(_notes_text(data, ms, cs).split())
    assert (
        "is of the means over the modes as they fell; no ratio within a mode (--same-mode): fitted to both sides "
        "together at the ratio, the modes are not each side's own (fewer than 80% of one side's processes fall "
        "where its own fit puts them), so they are not one state of the host seen on both."
    ) in flat
    assert f"The ratio {c.ratio:.3g} [" in flat  # three significant digits, not 0.002
    (row,) = jsondoc.document(data, ms, cs)["comparisons"]
    assert row["estimand"] == "all blocks" and row["same_mode"] is None


def test_the_stop_asks_the_interval_the_report_gives():
    """analysis.reported_halfwidth (what the runner's stop confirms) is the
    half-width of the row as analyse reports it: the headline stratum under
    --same-mode or --fast-mode, every block without a flag or where the
    stratum is not kept (the tail's shape)."""
    from vmtax import analysis, stats

    for data, flag in (
        (_bimodal_run(), None),
        (_bimodal_run(), "same_mode"),
        (_bimodal_run(), "fast_mode"),
        (_tail_run(), "same_mode"),
    ):
        data.config.pop("same_mode", None)
        if flag:
            data.config[flag] = True
        ms, (c,) = analyse(data)
        means = analysis.block_means(data.samples)
        base, cand = means[("local", "getppid")], means[("qemu:accel=tcg", "getppid")]
        bm, cm = (next(m.modes for m in ms if m.target == t) for t in ("local", "qemu:accel=tcg"))
        fit = {None: None, "same_mode": analysis.same_mode, "fast_mode": analysis.fast_mode}[flag]
        got = analysis.reported_halfwidth(base, cand, fit(base, cand, bm, cm) if fit else None)
        assert got == pytest.approx(stats.ratio_ci_rel(c.ratio, c.ratio_ci_low, c.ratio_ci_high)), (flag, c.estimand)
        assert c.estimand == {None: "all blocks", "fast_mode": "fast mode"}.get(
            flag, "all blocks" if c.same_mode is None else "same mode"
        )


def _baseline_ran_on(data):
    """The baseline's 60 more blocks (40-99), all in a mode of their own, as
    when it went on with other candidates after this one stopped."""
    import random as _random

    rng = _random.Random(5)
    data.samples += [
        Sample(
            "getppid",
            "local",
            170.0 * (1 + rng.gauss(0, 0.005)),
            "ns",
            process=blk,
            seq=seq,
            warmup=seq == 0,
            t=1767268800.0 + blk,
            block=blk,
        )
        for blk in range(40, 100)
        for seq in range(4)
    ]


def test_a_candidate_that_stopped_first_is_judged_by_the_baselines_modes_over_their_shared_blocks():
    """A candidate that stopped on precision while the baseline went on
    with others (Runner._stop_precise) keeps the comparison it stopped on:
    the baseline's later blocks (here 60 more, all in a mode of their own)
    do not move the modes its stratum is judged by."""
    data = _bimodal_run()
    data.config["same_mode"] = True
    _, (before,) = analyse(data)
    assert before.estimand == "same mode"
    _baseline_ran_on(data)
    ms, (after,) = analyse(data)
    assert next(m for m in ms if m.target == "local").processes == 100
    assert (after.estimand, after.ratio, after.ratio_ci_low, after.ratio_ci_high, after.p_value) == (
        before.estimand,
        before.ratio,
        before.ratio_ci_low,
        before.ratio_ci_high,
        before.p_value,
    )


def test_the_note_of_a_candidate_that_stopped_first_gives_the_baselines_modes_it_was_judged_by():
    """The row's note and the JSON give the baseline's modes over the 40
    blocks it shared with the candidate (those its stratum was judged by),
    not over its 100 processes; a run where both ran every block says
    neither."""
    data = _bimodal_run()
    data.config["same_mode"] = True
    ms, cs = analyse(data)
    assert cs[0].base_shared == 0 and "baseline_shared_blocks" not in jsondoc.document(data, ms, cs)["comparisons"][0]
    assert not any("blocks it shared" in n for n in view.mode_texts(view.measurements(data, ms, cs)))
    _baseline_ran_on(data)
    ms, cs = analyse(data)
    (c,) = cs
    assert c.base_shared == 40 and c.base_modes is not None and c.base_modes.units == 40
    (note,) = [n for n in view.mode_texts(view.measurements(data, ms, cs)) if "vs local" in n]
    assert "local: two modes over the 40 blocks it shared with qemu:accel=tcg, " in note
    assert "of 40 processes" in note and "of 100 processes" not in note
    (row,) = jsondoc.document(data, ms, cs)["comparisons"]
    assert row["baseline_shared_blocks"] == 40 and row["baseline_modes"]["processes"] == 40
    assert row["baseline_modes"]["fast"] == pytest.approx(c.base_modes.fast)


def test_a_ratio_of_fewer_than_six_blocks_claims_no_interval():
    """A 95% sign-flip interval needs 6 blocks (2/2^5 > 5%): a row the
    budget ended at 3 says so with null ends in the JSON, not a made-up
    one (the runner's stop waits for 6, so only the budget or Ctrl-C ends
    a row here)."""
    import random as _random

    data = run(names=("local", "qemu:accel=tcg"))
    data.benchmarks = data.benchmarks[:1]
    data.samples = _getppid_samples(
        _random.Random(3),
        ["local", "qemu:accel=tcg"],
        3,
        lambda rng: None,
        lambda rng, _, name: 100.0 if name == "local" else 150.0,
        0.005,
    )
    ms, cs = analyse(data)
    (c,) = cs
    assert c.ratio == pytest.approx(1.5, rel=0.01)
    (row,) = jsondoc.document(data, ms, cs)["comparisons"]
    assert row["ratio"] == pytest.approx(c.ratio) and row["ratio_ci_low"] is None and row["ratio_ci_high"] is None


def test_the_scoreboards_interval_column_is_the_ratios_the_precision_is_judged_by():
    """Each candidate's `±%` column is its ratio's 95% interval (what `?`
    and the verdict's count go by), not its two means' own: paired blocks
    cancel the host's drift that widens each mean.  A row at ±0.9% under a
    goal of 1% reads without `?`; one at ±1.2% with it."""
    data = run(names=("local", "qemu:accel=tcg"))
    data.config["precision"] = 0.01
    ms, cs = analyse(data)
    board = scoreboard.build(data, ms, cs)
    (ci,) = [f for f in board.fields if f.key == "ci"]
    for x in board.cells:
        c = x.comparison
        rel = (c.ratio_ci_high - c.ratio_ci_low) / 2 / c.ratio * 100
        text = ci.text_in(x, "text")
        assert float(text.lstrip("±")) == pytest.approx(rel, rel=0.06), (text, rel)
    x = board.cells[0]
    for lo, hi, flagged in ((0.991, 1.009, False), (0.988, 1.012, True)):
        y = scoreboard.Cell(
            x.spec,
            x.baseline,
            x.candidate,
            replace(x.c, ci=Interval(1.0, lo, hi)),
            x.cand,
            x.base,
            0.01,
        )
        assert ci.text_in(y, "text") == ("±1.2" if flagged else "±0.90") and ("?" in y.flags()) == flagged
    inf = scoreboard.Cell(
        x.spec,
        x.baseline,
        x.candidate,
        replace(x.c, ci=Interval(x.c.ratio, math.nan, x.c.ratio_ci_high)),
        x.cand,
        x.base,
        0.01,
    )
    assert ci.text_in(inf, "text") == "-"


DEMO = (
    [("kernel", n) for n in ("getppid", "segv", "forkwait", "page_fault")]
    + [("lmbench", n) for n in ("null_read", "stat", "sig_handle", "fork_exec", "ctx_2p_16k", "mmap")]
    + [("cpu", "pi"), ("exits", "cpuid"), ("mem", "tlb_4k")]
)


def _demo_run():
    """make demo's shape: 13 agent rows and a workload's throughput on
    local, qemu, uml and container, 40 blocks each; the host slow in a
    quarter of its blocks (two modes on local, qemu and container, one on
    uml's slower processes), with --same-mode; a KVM probe's long note."""
    import random as _random

    from vmtax.model import BenchSpec

    data = run(names=("local", "qemu", "uml", "container"), facts={"accel_note": "TCG: " + "no KVM guest " * 30})
    for t in data.targets:
        if t.name != "qemu":
            t.facts.pop("accel_note")
    data.config.update(same_mode=True, cpu=1, samples_per_process=3, warmup=1, max_time=420.0)
    data.command = (
        "vmtax compare local qemu uml container --skip-unavailable --max-time 7m --tool-seconds 2 "
        "--same-mode --bench " + " ".join(n for _, n in DEMO) + " sysbench_cpu"
    )
    data.benchmarks = [
        BenchSpec("sysbench_cpu.events_per_s", "apps", "events/s", "higher", "sysbench cpu", kind="workload")
    ] + [BenchSpec(n, s, "ns", "lower", n) for s, n in DEMO]
    rng, scale = _random.Random(5), {"local": 1.0, "qemu": 3.0, "uml": 10.0, "container": 1.05}
    data.samples, data.outcomes = [], {}
    for i, spec in enumerate(data.benchmarks):
        for blk in range(40):
            slow = rng.random() < 0.25
            for name, k in scale.items():
                mean = 1000.0 * (i + 1) * k * (1.3 if slow and name != "uml" else 1.0)
                mean = 1e9 / mean if spec.direction == "higher" else mean
                for seq in range(4):
                    data.samples.append(
                        Sample(
                            spec.name,
                            name,
                            mean * (1 + rng.gauss(0, 0.01)),
                            spec.unit,
                            process=blk,
                            seq=seq,
                            warmup=seq == 0,
                            t=1767268800.0 + blk,
                            block=blk,
                        )
                    )
                data.outcomes[(name, spec.name)] = ("budget", "")
    return data


def test_the_scoreboard_of_make_demos_shape_fits_a_screen_verdict_first():
    """14 rows on 4 targets, most with two modes: the terminal's report --
    header, verdict, table, legend, a line per noted row, targets -- fits
    100 columns and leaves room on a 60-line screen for make's and vmtax's
    own lines; the verdict comes before the table; the notes in full are
    `vmtax show --notes`'s."""
    data = _demo_run()
    ms, cs = analyse(data)
    board = scoreboard.build(data, ms, cs)
    text = "\n".join(
        [terminal.run_header(data), "", terminal.scoreboard(board), "", terminal.targets(board.targets, whole=False)]
    )
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert len(lines) <= 47, text  # and make's echo of the command and vmtax's first line: 6 more
    verdict = next(i for i, line in enumerate(lines) if "reached the precision asked" in line)
    assert verdict < next(i for i, line in enumerate(lines) if line.startswith("benchmark "))
    assert sum(1 for line in lines if line.startswith("~ ")) <= 14 and board.modes
    assert "  qemu: TCG: no KVM guest" in text and text.count("no KVM guest") < 10  # its note on one line
    full = terminal.notes(board)
    flat = " ".join(full.split())
    assert all(f"{n.benchmark}, {n.target} vs local" in flat for n in board.modes) and flat.count("no KVM guest") == 30


def test_a_stored_runs_report_and_exit_code_come_from_the_report_not_the_cli():
    """report/console.py gives what to print, the documents to write and the
    exit code; the CLI only prints and writes them."""
    from vmtax.report import console

    data = run(names=("local", "qemu:accel=tcg", "uml"))
    o = console.report(data, console.Options(json="-", markdown="out.md"))
    assert o.code == console.EXIT_OK and o.to_stderr and not o.err  # `--json - | jq`: the tables go to stderr
    assert o.out[0].startswith("run 20260101-120000-abcd (complete)") and "Ratios to local" in o.out[1]
    (dest, doc), (md, text) = o.files
    assert dest == "-" and json.loads(doc)["verdict"]["ratios"] == 6 and md == "out.md" and "| benchmark |" in text
    data.outcomes[("uml", "pi")] = ("error", "agent died")
    assert console.report(data, console.Options()).code == console.EXIT_BENCH_ERROR
    data.status = "interrupted"
    o = console.report(data, console.Options())
    assert o.code == console.EXIT_INTERRUPTED and o.err == [
        f"interrupted: {len([s for s in data.samples if not s.warmup])} samples kept in run 20260101-120000-abcd"
    ]
    data.status, data.samples, data.outcomes[("uml", "pi")] = "complete", [], ("budget", "")
    o = console.report(data, console.Options(notes=True))
    assert o.code == console.EXIT_FAIL and "produced no ratio" in o.err[0] and "benchmark" not in "".join(o.out)


def _state_run(grow: float):
    """reportdata's run over 36 blocks of 6 samples a side, the host slow in
    every other run of 6 blocks (the baseline 30% slower there) and the
    candidate's tax `grow` times higher in a slow block."""
    data = run()
    rng = __import__("random").Random(7)
    samples = []
    for spec in data.benchmarks:
        for blk in range(36):
            slow = blk // 6 % 2 == 1
            for i, n in enumerate(("local", "qemu:accel=tcg")):
                level = 100.0 * (1.3 if slow else 1.0) * (1.0 if i == 0 else 3.0 * (grow if slow else 1.0))
                samples += [
                    Sample(spec.name, n, level * rng.gauss(1, 0.01), "ns", process=blk * 2 + i, seq=k, block=blk, t=k)
                    for k in range(6)
                ]
    return replace(data, samples=samples)


def test_a_tax_that_moves_with_the_hosts_state_is_said_under_the_board_and_in_json():
    data = _state_run(grow=1.2)
    ms, cs = analyse(data)
    board = scoreboard.build(data, ms, cs)
    assert [(n.candidate, n.rows, n.down) for n in board.states] == [("qemu:accel=tcg", 3, 0)]
    assert 1.1 < board.states[0].median <= 1.2 and board.states[0].up >= 2
    text = _board_text(data, ms, cs)
    assert "qemu:accel=tcg's tax moves with the host's state: ×1.1" in text
    assert max(len(line) for line in text.splitlines()) <= terminal.WIDTH
    notes = " ".join(_notes_text(data, ms, cs).split())
    assert f"tax was higher on {board.states[0].up} of 3 rows and lower on 0" in notes
    doc = jsondoc.document(data, ms, cs)
    assert doc["host_state"][0]["candidate"] == "qemu:accel=tcg" and doc["host_state"][0]["higher"] == 3
    h = doc["comparisons"][0]["host_state"]
    assert set(h) == {"blocks", "quick_ratio", "slow_ratio", "change", "change_ci_low", "change_ci_high", "moved"}
    assert h["moved"] and 2.9 < h["quick_ratio"] < 3.2 and 3.4 < h["slow_ratio"] < 3.7
    assert "tax moves with the host's state" in markdown.scoreboard_md(board)
    assert "tax moves with the host" in html.scoreboard_table(board)


def test_a_tax_the_hosts_state_leaves_alone_gets_no_state_note():
    data = _state_run(grow=1.0)
    ms, cs = analyse(data)
    board = scoreboard.build(data, ms, cs)
    assert board.states == []
    assert "host's state" not in _board_text(data, ms, cs) + _notes_text(data, ms, cs)
    doc = jsondoc.document(data, ms, cs)
    assert doc["host_state"] == [] and all(c["host_state"] is not None for c in doc["comparisons"])


def _state_cmp(name: str, cand: str, change: float, z: float, moved: bool, direction: str = "lower"):
    from vmtax.model import BenchSpec, Comparison, HostState

    lo, hi = (change * 0.97, change * 1.03) if moved else (min(change, 1) * 0.9, max(change, 1) * 1.1)
    return Comparison(
        BenchSpec(name, "kernel", "ns", direction, name),
        "local",
        cand,
        Interval(3.0, 2.9, 3.1),
        0.01,
        True,
        "budget",
        host_state=HostState(20, 3.0, 3.0 * change, Interval(change, lo, hi), z=z),
    )


def test_state_notes_add_a_candidates_rows_as_taxes_and_say_it_beyond_chance_only():
    up = [_state_cmp(f"r{i}", "qemu", 1.1, 2.5, True) for i in range(4)]
    flat = [_state_cmp(f"f{i}", "qemu", 1.0, 0.0, False) for i in range(9)]
    # a throughput whose ratio fell in the slow half: its tax grew
    thr = _state_cmp("tput", "qemu", 1 / 1.2, -3.0, True, direction="higher")
    (n,) = view.state_notes(up + flat + [thr])
    assert (n.candidate, n.rows, n.up, n.down) == ("qemu", 14, 5, 0)
    assert n.p_value == pytest.approx(2 * __import__("scipy").stats.norm.sf(13 / math.sqrt(14)))
    assert n.median == pytest.approx(1.0) and "tput ×1.200" in n.text and n.text.index("tput") < n.text.index("r0")
    assert len(n.short) <= terminal.WIDTH
    # the same throughput row read as a latency would cancel the others: not said
    assert view.state_notes(up[:2] + flat + [_state_cmp("tput", "qemu", 1 / 1.2, -3.0, True)]) == []
    # three rows at z 2.5 among 12: p 0.03, above stats.STATE_CHANCE
    assert view.state_notes(up[:3] + flat) == []
    down = [_state_cmp(f"d{i}", "uml", 0.9, -3.0, True) for i in range(5)]
    (d,) = view.state_notes(down)
    assert (d.candidate, d.up, d.down) == ("uml", 0, 5) and "×0.900" in d.short


def test_median_takes_each_blocks_process_at_its_median_sample():
    """compare --median (config `median`): a block's process is its median
    sample, so a sample cut into by another job leaves the ratio where the
    typical sample puts it; the header says so.  Without it, the mean."""
    from vmtax import analysis
    from vmtax.report import view

    data = run(names=("local", "qemu:accel=tcg"))
    cut = []
    for s in data.samples:
        if s.benchmark == "getppid" and s.target == "qemu:accel=tcg" and not s.warmup and not s.counting and s.seq == 1:
            s = replace(s, value=s.value * 50)  # one sample in every process cut into, the candidate's only
        cut.append(s)
    data.samples = cut
    key = ("qemu:accel=tcg", "getppid")
    means, medians = analysis.block_means(data.samples)[key], analysis.block_means(data.samples, median=True)[key]
    assert all(medians[b] < means[b] / 2 for b in means)
    plain = next(c for c in analyse(data)[1] if c.benchmark.name == "getppid")
    data.config["median"] = True
    typical = next(c for c in analyse(data)[1] if c.benchmark.name == "getppid")
    assert typical.ratio < plain.ratio / 2 and typical.ci.excludes(1)
    assert "a process taken at its median sample (--median)" in view.per_process(data)


def test_median_blocks_takes_a_ratio_at_its_median_block_and_old_runs_read_as_before():
    """A run with median_blocks (compare --median now): a block whose
    candidate ran 28% slower moves its ratio and interval little; the same
    samples stored without the key (a run from before) read as the ratio of
    the blocks' means, as they did."""
    from vmtax import analysis
    from vmtax.report import view

    data = run(names=("local", "qemu:accel=tcg"))
    blocks = sorted({s.block for s in data.samples if s.benchmark == "getppid"})
    slow = blocks[len(blocks) // 2]
    data.samples = [
        replace(s, value=s.value * 1.28)
        if (s.benchmark, s.target, s.block) == ("getppid", "qemu:accel=tcg", slow)
        else s
        for s in data.samples
    ]
    data.config["median"] = True
    by_mean = next(c for c in analyse(data)[1] if c.benchmark.name == "getppid")
    data.config["median_blocks"] = True
    by_block = next(c for c in analyse(data)[1] if c.benchmark.name == "getppid")
    c, b = stats.paired(
        *(analysis.block_means(data.samples, median=True)[(n, "getppid")] for n in ("qemu:accel=tcg", "local"))
    )
    assert (by_block.ratio, by_block.ci.low, by_block.ci.high) == pytest.approx(stats.compare_ranked(c, b)[:3])
    assert (by_mean.ratio, by_mean.ci.low, by_mean.ci.high) == pytest.approx(stats.compare_paired(c, b)[:3])
    assert by_block.ci.rel_halfwidth < by_mean.ci.rel_halfwidth
    assert "a ratio at its median block (--median)" in view.per_process(data)


def test_the_header_says_how_many_pairs_of_processes_a_lockstep_block_held():
    from vmtax.report import view

    data = run(names=("local", "qemu:accel=tcg"))
    data.config.update(pairing="lockstep", step_ms=0.25, samples_per_process=30)
    assert "pairs of processes a block" not in view.per_process(data)  # an old run, or K = 1
    data.config["block_processes"] = 4
    assert "lockstep pairs of ~0.25 ms samples, 4 pairs of processes a block (--block-processes)" in view.per_process(
        data
    )
