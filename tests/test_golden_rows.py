"""Fixed-seed fake compares, in turn and in lockstep, store the rows they
stored when the golden was taken (tests/golden/fake_compare_rows.json):
every sample's identity, value and metrics, every process's identity,
slot and outcome (and whether its first line was seen), every outcome and
its reason.  Wall-clock times are left out.  Samples are in the order of
their process, then as stored (a lockstep block's sides are read
together; which side's sample reached the store first is no figure).

A change that alters the rows on purpose says so in its commit and
rewrites the golden (VMTAX_GOLDEN=write)."""

import json
import os
import sqlite3
from pathlib import Path

import pytest

from helpers import Steps
from vmtax.model import BenchSpec
from vmtax.runner import RunConfig, Runner
from vmtax.store import Store
from vmtax.targets import parse_target

GOLDEN = Path(__file__).parent / "golden" / "fake_compare_rows.json"
A = BenchSpec("getppid", "kernel", "ns", "lower", "d")
B = BenchSpec("segv", "kernel", "ns", "lower", "d")

CASES = {
    # in turn, two rows, counting processes, a candidate that crashes on one row
    "blocks": (
        ["fake:seed=1,noise=0.02", "fake:seed=2,noise=0.02,scale=1.5", "fake:seed=3,noise=0.02,crash=segv"],
        RunConfig(precision=0.02, max_time=1e6, min_processes=4, seed=7, pairing="blocks"),
    ),
    # lockstep: two targets that step, one that does not (in turn after them); --step-ms 3 holds
    # every block at MIN_STEP_ROUNDS rounds whatever a go took, and the sides are alike in speed
    # (one visit a round each), so that no wall-clock reading sizes a block
    "lockstep": (
        ["fake:seed=1,noise=0.02,step=on", "fake:seed=2,noise=0.02,step=on,scale=1.3", "fake:seed=3,noise=0.02"],
        RunConfig(precision=0.02, max_time=1e6, min_processes=4, seed=5, step_ms=3.0),
    ),
}


def rows(db, run_id: str) -> dict:
    con = sqlite3.connect(db)
    out = {
        "samples": con.execute(
            "SELECT benchmark,target,process,instance,seq,warmup,counting,block,iters,ops,round(value,6),unit,"
            "round(overhead,6),round(tsc_per_op,6),cpu,"
            "(SELECT group_concat(name || '=' || round(value,6)) FROM (SELECT name, value FROM sample_metrics"
            " m WHERE m.sample_id = s.id ORDER BY name)) FROM samples s WHERE run_id=? ORDER BY process, id",
            (run_id,),
        ).fetchall(),
        "processes": con.execute(
            "SELECT process,target,benchmark,block,slot,outcome,first_line IS NULL FROM processes "
            "WHERE run_id=? ORDER BY process",
            (run_id,),
        ).fetchall(),
        "outcomes": con.execute(
            "SELECT target,benchmark,stopped_by,reason FROM outcomes WHERE run_id=? ORDER BY target,benchmark",
            (run_id,),
        ).fetchall(),
    }
    con.close()
    return json.loads(json.dumps(out))


def compare(db, case: str) -> dict:
    specs, cfg = CASES[case]
    store = Store(db)
    targets = [parse_target(s) for s in specs]
    store.new_run("r", "compare", "test", "0", {})
    for i, t in enumerate(targets):
        store.add_target("r", i, t.info(), "h")
    store.add_benchmarks("r", [A, B])
    assert Runner(cfg, [A, B], targets, store, "r", clock=Steps(0.001)).run() == "complete"
    store.close()
    return rows(db, "r")


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_fixed_seed_fake_compare_stores_the_golden_rows(tmp_path, case):
    got = compare(tmp_path / "v.db", case)
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("VMTAX_GOLDEN") == "write":
        GOLDEN.write_text(json.dumps({**golden, case: got}, indent=0) + "\n")
        golden[case] = got
    want = golden[case]
    for table in ("processes", "outcomes", "samples"):
        assert len(got[table]) == len(want[table]), table
        for i, (g, w) in enumerate(zip(got[table], want[table], strict=True)):
            assert g == w, f"{table} row {i}: {g} != golden {w}"


@pytest.mark.parametrize("pairing", ["blocks", "lockstep"])
def test_in_turn_and_lockstep_give_one_process_row_shape(tmp_path, pairing):
    """The executors differ in how a block's processes run, not in what is
    recorded of them: a calibration row per target, then in every block
    one process a target at slots 0..n-1 (every COUNT_EVERY-th block its
    counting processes after them), each row's times in order and its
    samples carrying its block."""
    store = Store(tmp_path / "v.db")
    targets = [parse_target(f"fake:seed={i},noise=0.02,step=on") for i in (1, 2)]
    store.new_run("r", "compare", "test", "0", {})
    store.add_benchmarks("r", [A])
    cfg = RunConfig(precision=0.05, max_time=1e6, min_processes=4, seed=3, pairing=pairing)
    assert Runner(cfg, [A], targets, store, "r", clock=Steps(0.001)).run() == "complete"
    rows = store.processes("r")
    samples = store.load("r").samples
    store.close()
    assert [(p["block"], p["slot"], p["outcome"]) for p in rows[:2]] == [(-1, 0, "calibration")] * 2
    blocks = sorted({p["block"] for p in rows[2:]})
    assert blocks == list(range(len(blocks))) and len(blocks) >= cfg.min_processes
    for b in blocks:
        got = sorted((p["slot"], p["outcome"]) for p in rows if p["block"] == b)
        want = [(slot, "ok") for slot in range(2 * (2 if b % Runner.COUNT_EVERY == 0 else 1))]
        assert got == want, (pairing, b, got)
    for p in rows:
        assert p["started"] <= p["first_line"] <= p["ended"], p
        assert {s.block for s in samples if s.process == p["process"]} <= {p["block"]}
