"""The CLI as a user meets it: bad input, JSON documents, show/runs, Ctrl-C."""

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys

import pytest

from conftest import AGENT
from helpers import leftovers, vmtax, wait_samples, wait_until
from vmtax import stats


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "--bench", "nope"], "unknown benchmark 'nope'"),
        (["run", "--suite", "nope"], "unknown suite 'nope'"),
        (["run", "--target", "vax"], "unknown target kind 'vax'"),
        (["run", "--max-time", "6 parsecs"], "malformed duration"),
        (["run", "--precision", "lots"], "malformed precision"),
        (["run", "--precision", "0%"], "between 0% and 100%"),
        (["run", "--samples", "0"], "--samples must be between 1 and 10000"),
        (["run", "--samples", "10000000"], "--samples must be between 1 and 10000"),
        (["run", "--parallel", "10000"], "--parallel must be between 1 and 256"),
        (["run", "--cpu", "99"], "--cpu 99: not a CPU this process may use"),
        (["run", "--cpu", "lots"], "--cpu must be a CPU number, auto or none"),
        (["run", "--max-time", "0s"], "--max-time must be positive"),
        (["run", "--target", "fake:oops"], "not key=value"),
        (["run", "--target", "fake:scale=abc"], "scale must be a number"),
        (["run", "--target", "qemu:smp=0"], "smp must be an integer >= 1"),
        (["run", "--target", "qemu:boot_timeout=-1"], "boot_timeout must be a number > 0"),
        (["run", "--target", "qemu:boot_timeout=nan"], "boot_timeout must be a number > 0"),
        (["run", "--target", "uml:boot_timeout=inf"], "boot_timeout must be a number > 0"),
        (["run", "--target", "local:inject=200"], "inject must be a number > 0"),
        (["show", "nope"], "no results database"),
        (["runs", "--limit", "0"], "--limit must be between 1 and"),
        (["history", "--limit", "0"], "--limit must be between 1 and"),
        (["frobnicate"], "invalid choice"),
        # one range check (cli.check_options) for every command's numbers and durations
        (["compare", "fake", "fake:scale=2", "--max-time", "169h"], "--max-time must be positive and at most a week"),
        (["scale", "fake", "--max-time", "0s"], "--max-time must be positive and at most a week"),
        (["scale", "fake", "--round-time", "10ms"], "--round-time must be between 50ms and 1h"),
        (["scale", "fake", "--round-time", "soon"], "malformed duration 'soon'"),
        (["scale", "fake", "--rounds", "1"], "--rounds must be between 2 and 1000"),
        (["scale", "fake", "--warmup", "1001"], "--warmup must be between 0 and 1000"),
        (["doctor", "--max-time", "0s"], "--max-time must be positive and at most a week"),
        (["doctor", "--rows", "0"], "--rows must be between 1 and 1000"),
        (["doctor", "--targets", "1"], "--targets must be between 2 and 100"),
        (["doctor", "--processes", "7"], "--processes must be between 8 and 1000"),
        (["doctor", "--noise-seconds", "nan"], "--noise-seconds must be between 0.1 and 600, got nan"),
        (["compare", "fake", "fake:scale=2", "--step-ms", "0.01"], "--step-ms must be between 0.05 and 1000, got 0.01"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys, db):
    assert vmtax(*args, db=db) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_run_fake_writes_json_document_and_show_reads_it(tmp_path, capsys, db):
    out = tmp_path / "r.json"
    rc = vmtax("run", "--target", "fake:noise=0.002", "--bench", "getppid", "segv", "--json", str(out), db=db)
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == 1 and doc["run_id"] and doc["environment"]["kernel"] == "fake"
    assert [r["benchmark"] for r in doc["results"]] == ["getppid", "segv"]
    for r in doc["results"]:
        assert r["stopped_by"] == "precision" and r["ci_low"] <= r["mean"] <= r["ci_high"]
        assert {"target", "unit", "direction", "n", "median"} <= set(r)
    again = tmp_path / "again.json"
    assert vmtax("show", doc["run_id"][:15], "--json", str(again), db=db) == 0
    assert json.loads(again.read_text())["results"] == doc["results"]
    capsys.readouterr()
    assert vmtax("runs", "--json", db=db) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == doc["run_id"]


def test_benchmark_error_gives_exit_3_and_others_go_on(capsys, db):
    rc = vmtax("run", "--target", "fake:crash=segv", "--bench", "getppid", "segv", db=db)
    out = capsys.readouterr().out
    assert rc == 3 and "error: agent exited with status -11" in out and "precision" in out


def test_report_needs_an_output_and_writes_each(tmp_path, capsys, db):
    assert vmtax("report", db=db) == 2
    assert "--html FILE" in capsys.readouterr().err
    assert vmtax("compare", "fake", "fake:scale=2,label=b", "--bench", "getppid", db=db) == 0
    out = {k: tmp_path / f"r.{k}" for k in ("html", "md", "csv")}
    assert (
        vmtax("report", "--html", str(out["html"]), "--markdown", str(out["md"]), "--csv", str(out["csv"]), db=db) == 0
    )
    assert "<svg" in out["html"].read_text()
    assert re.search(r"\| getppid \| (1\.9[89]|2\.0[012])\*", out["md"].read_text())
    rows = out["csv"].read_text().splitlines()
    assert rows[0].startswith("run_id,") and len(rows) == 3
    assert vmtax("report", "nope", "--csv", "-", db=db) == 2


def test_list_json(capsys):
    assert vmtax("list", "--json") == 0
    rows = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in rows]
    assert len(rows) >= 30 and len(set(names)) == len(names)
    for r in rows:
        assert {"name", "suite", "unit", "direction", "description"} <= set(r)
        assert r["direction"] in ("lower", "higher")


@pytest.mark.e2e
def test_local_run_with_the_real_agent(tmp_path, db):
    out = tmp_path / "r.json"
    rc = vmtax(
        "run", "--bench", "null_call", "rdtsc", "--max-time", "20s", "--precision", "5%", "--json", str(out), db=db
    )
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["environment"]["cpus_online"] >= 1
    assert doc["targets"][0]["agent_hash"]
    for r in doc["results"]:
        # never stopped before --min-processes (3) fresh processes of --samples (3) each
        assert r["processes"] >= 3 and r["n"] >= 3 * 3
        assert 1 < r["mean"] < 100000 and r["stopped_by"] in ("precision", "budget")


@pytest.mark.e2e
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a CPU besides the measured one")
def test_a_pinned_compare_keeps_vmtax_off_the_measured_cpu(tmp_path, db):
    """The agents run on the run's CPU and vmtax itself, every thread, on the others while they do
    (proc.keep_off), recorded as config.controller_cpus; the CPUs are given back when it ends."""
    import threading

    mine = os.sched_getaffinity(0)
    cpu, others = max(mine), sorted(mine - {max(mine)})
    main_tid, seen, done = threading.get_native_id(), [], threading.Event()

    def watch() -> None:
        while not done.wait(0.01):
            seen.append((frozenset(os.sched_getaffinity(main_tid)), frozenset(os.sched_getaffinity(0))))

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    out = tmp_path / "c.json"
    try:
        rc = vmtax(
            "compare",
            "local",
            "local:label=b",
            "--bench",
            "getppid",
            "--max-time",
            "10s",
            "--cpu",
            str(cpu),
            "--json",
            str(out),
            db=db,
        )
    finally:
        done.set()
        w.join()
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["config"]["controller_cpus"] == others and all(r["processes"] >= 3 for r in doc["results"])
    # the watcher began before the run: it was moved too, with the main thread, and the CPUs given back
    assert (frozenset(others), frozenset(others)) in seen and os.sched_getaffinity(0) == mine
    con = sqlite3.connect(db)
    assert {c for (c,) in con.execute("SELECT DISTINCT cpu FROM samples WHERE run_id = ?", (doc["run_id"],))} == {cpu}


@pytest.mark.e2e
def test_ctrl_c_keeps_samples_and_kills_the_agent(db, tmp_path):
    agent = tmp_path / "private-agent"  # a path only this test's processes have
    shutil.copy(AGENT, agent)
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(db),
        "run",
        "--bench",
        "forkwait",
        "--max-time",
        "5m",
        "--precision",
        "0.01%",
        "--min-time-ms",
        "50",
    ]
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "VMTAX_AGENT": str(agent)}
    )
    n = wait_samples(db, 6, 60, proc=p)
    assert n >= 6, "no samples arrived"
    # between two agent processes there is a gap: wait for one
    assert wait_until(lambda: leftovers(str(agent)), 10, 0.01), (
        "expected an agent to be running"
    )  # (asking again could miss it: it may just have ended)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert "interrupted" in err and "samples kept" in err
    assert "forkwait" in out  # the partial table is printed
    assert wait_until(lambda: not leftovers(str(agent)), 2, 0.05), leftovers(str(agent))
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
    assert con.execute("SELECT count(*) FROM samples").fetchone()[0] >= n


def test_json_to_stdout_is_alone_on_stdout(capsys, db):
    """`vmtax run ... --json - | jq` works: the tables go to stderr."""
    assert (
        vmtax("run", "--target", "fake:noise=0.001", "--bench", "getppid", "--max-time", "5s", "--json", "-", db=db)
        == 0
    )
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["results"][0]["benchmark"] == "getppid" and "stopped by" in out.err


def test_show_notes_prints_the_notes_in_full_that_the_scoreboard_gives_a_line(capsys, db):
    """Rows whose processes fell in two modes: the scoreboard says which
    ratio each gives on one line; `vmtax show --notes` gives both sides'
    modes and every ratio in full, after the run's header."""
    assert (
        vmtax(
            "compare",
            "fake:seed=1,slow_share=0.3,slow_by=1.5",
            "fake:seed=2,scale=2,slow_share=0.3,slow_by=1.5",
            "--bench",
            "getppid",
            "segv",
            "--same-mode",
            "--precision",
            "0.01%",
            "--max-time",
            "4s",
            "--cpu",
            "none",
            db=db,
        )
        == 0
    )
    board = capsys.readouterr().out
    assert vmtax("show", db=db) == 0
    assert capsys.readouterr().out == board  # show prints what the run printed
    lines = board.splitlines()
    assert lines.index(next(x for x in lines if "reached the precision asked" in x)) < lines.index(
        next(x for x in lines if x.startswith("benchmark"))
    )  # the verdict first
    marked = [x for x in lines if x.startswith("~ ")]
    assert marked and len(marked) <= 2
    assert vmtax("show", "--notes", db=db) == 0
    notes = capsys.readouterr().out
    assert notes.startswith("\n".join(lines[:3])) and "benchmark" not in notes  # the run's header, then the notes
    flat = " ".join(notes.split())
    assert "~ getppid, fake:seed=2" in flat and "~ segv, fake:seed=2" in flat and "two modes" in flat


def test_small_ratios_keep_their_digits():
    from vmtax.report.units import fmt_ratio2

    assert fmt_ratio2(0.0109) == "0.0109" and fmt_ratio2(0.004) == "0.004" and fmt_ratio2(1.234) == "1.23"
    assert fmt_ratio2(81.37) == "81.4" and fmt_ratio2(123.4) == "123"


def test_a_compare_that_produced_no_ratio_says_so_and_exits_1(capsys, db):
    """Samples of a minute each against a 10 s budget: the budget is said to
    be too small before starting, no row is begun, and the run says it has
    no ratio (exit 1), not a silent 0."""
    code = vmtax(
        "compare", "fake", "fake:scale=2", "--bench", "getppid", "--min-time-ms", "60000", "--max-time", "10s", db=db
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "vmtax: a budget of 10s cannot buy two blocks of every row" in err
    assert re.search(r"vmtax: run \S+ produced no ratio", err)
    assert "Traceback" not in err


def test_a_candidate_with_two_modes_gets_the_fast_mode_ratio_in_its_json_and_scoreboard(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert (
        vmtax(
            "compare",
            "fake:slow_share=0.2,slow_by=1.3",
            "fake:label=b,scale=1.05,slow_share=0.3,slow_by=1.3",
            "--bench",
            "getppid",
            "--max-time",
            "5s",
            "--cpu",
            "none",
            "--json",
            out,
            db=tmp_path / "v.db",
        )
        == 0
    )
    doc = json.loads(out.read_text())
    (c,) = doc["comparisons"]
    assert c["fast_mode"]["ratio"] == pytest.approx(1.05, rel=0.01) and c["ratio"] > 1.06  # the mixes: 1.08
    assert 0.4 < c["fast_mode"]["blocks"] / c["fast_mode"]["of_blocks"] < 0.75  # 0.8 x 0.7 of them
    rows = {r["target"]: r["modes"] for r in doc["results"]}
    assert rows["fake:slow_share=0.2,slow_by=1.3"]["slow_share"] > 0.1
    assert rows["fake:label=b,scale=1.05,slow_share=0.3,slow_by=1.3"]["slow_share"] > 0.2
    text = capsys.readouterr().out
    assert "~ getppid: all-blocks ratio for fake:label=b,scale=1.05,slow_share=0.3,slow_by=1.3" in text.splitlines()
    assert vmtax("show", "--notes", db=tmp_path / "v.db") == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "~ getppid, fake:label=b" in text and "in which both ran in their fast mode it is 1.05" in text
    assert (
        vmtax(
            "compare",
            "fake:slow_share=0.2,slow_by=1.3",
            "fake:label=b,scale=1.05,slow_share=0.3,slow_by=1.3",
            "--bench",
            "getppid",
            "--same-mode",
            "--max-time",
            "5s",
            "--cpu",
            "none",
            "--json",
            out,
            db=tmp_path / "v.db",
        )
        == 0
    )
    (c,) = json.loads(out.read_text())["comparisons"]
    assert c["estimand"] == "same mode" and c["ratio"] == pytest.approx(1.05, rel=0.01)
    assert c["ratio"] == c["same_mode"]["ratio"] and c["same_mode"]["blocks"] >= c["fast_mode"]["blocks"]
    text = capsys.readouterr().out
    assert (
        " · --same-mode command: " in " ".join(text.split()) and "~ getppid: same-mode ratio for fake:label=b" in text
    )


def test_fast_mode_and_same_mode_are_one_choice(capsys, db):
    assert vmtax("compare", "local", "local:label=b", "--fast-mode", "--same-mode", db=db) == 2
    err = capsys.readouterr().err
    assert "--same-mode: not allowed with argument --fast-mode" in err and len(err.strip().splitlines()) == 1


def test_show_of_a_run_without_ratios_gives_each_rows_reason(capsys, db):
    """'no ratios; stopped by: budget 4' pointed to reasons it did not show."""
    assert (
        vmtax(
            "compare",
            "fake",
            "fake:scale=2",
            "--bench",
            "getppid",
            "segv",
            "--max-time",
            "10s",
            "--min-time-ms",
            "60000",
            "--cpu",
            "none",
            db=db,
        )
        == 1
    )
    capsys.readouterr()
    assert vmtax("show", db=db) == 1
    out = capsys.readouterr().out
    for bench in ("getppid", "segv"):  # each row's note, cut to a line
        assert f"{bench} on fake:scale=2: budget: left out: the budget could not finish it" in out, out
    assert vmtax("show", "--notes", db=db) == 1
    out = " ".join(capsys.readouterr().out.split())  # the notes in full
    for bench in ("getppid", "segv"):
        assert (
            f"{bench} on fake:scale=2: budget: left out: the budget could not finish it (its two blocks need "
            f"1440 s or more, 10 s were left); --max-time 2"
        ) in out, out


def test_median_keeps_each_row_to_the_blocks_its_rank_test_needs_to_call_it(tmp_path, db):
    """--median: a row stops on precision only once its signed-rank test
    could call it after Holm over the run's rows (4 rows, 2 candidates: 8
    tests, 11 blocks, past the default 10), however quickly its interval
    narrows; the configuration says so."""
    out = tmp_path / "m.json"
    argv = ["compare", "fake:noise=0.001", "fake:noise=0.001,scale=1.05,label=b", "fake:noise=0.001,label=c"]
    rows = ["getppid", "segv", "stat", "null_read"]
    quick = ["--min-time-ms", "1", "--samples", "2"]
    assert vmtax(*argv, "--bench", *rows, "--median", *quick, "--json", str(out), db=db) in (0, 1)
    doc = json.loads(out.read_text())
    assert doc["config"]["median_blocks"] and doc["config"]["min_processes"] == stats.blocks_to_call(8) == 11
    for r in doc["results"]:
        assert r["stopped_by"] == "precision" and r["processes"] >= 11, r
