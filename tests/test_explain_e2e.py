"""The counts vmtax explains with, checked against what they must be on
real targets (issue 8's invariants), from real runs."""

import json
import subprocess
import sys

import pytest

from vmtax.targets.container import ContainerTarget
from vmtax.targets.qemu import QemuTarget
from vmtax.targets.uml import UmlTarget

pytestmark = pytest.mark.e2e

AGENT_ROWS = {"getppid", "page_fault", "threadswitch"}  # conftest.SHORT_AGENT_ROWS

QEMU_OK, QEMU_WHY = QemuTarget.available()
UML_OK, UML_WHY = UmlTarget.available()
CONTAINER_OK, CONTAINER_WHY = ContainerTarget.available()


@pytest.fixture(scope="module")
def counted(short_compare):
    """The session's short comparison of every target that works here
    (conftest.short_compare); its agent rows' results by (target, benchmark)."""
    doc = short_compare.doc
    return {(r["target"], r["benchmark"]): r for r in doc["results"] if r["benchmark"] in AGENT_ROWS}, doc


def metric(row, name):
    m = row["metrics"].get(name)
    assert m is not None, f"{row['target']} {row['benchmark']}: no {name} in {sorted(row['metrics'])}"
    return m["mean"]


def test_a_page_fault_is_one_page_fault_on_every_target(counted):
    rows, _ = counted
    for (target, bench), row in rows.items():
        if bench == "page_fault":
            assert 0.9 < metric(row, "page_faults") < 1.2, target


def test_getppid_switches_no_context_natively(counted):
    rows, _ = counted
    assert metric(rows[("local", "getppid")], "context_switches") < 0.01


def test_a_thread_switch_is_a_context_switch(counted):
    rows, _ = counted
    for (target, bench), row in rows.items():
        if bench == "threadswitch":
            assert metric(row, "context_switches") >= 0.95, target


@pytest.mark.skipif(not UML_OK, reason=f"UML does not run here: {UML_WHY}")
def test_uml_pays_host_context_switches_for_each_guest_syscall(counted):
    rows, _ = counted
    assert metric(rows[("uml", "getppid")], "host_context_switches") > 1
    assert metric(rows[("local", "getppid")], "host_context_switches") < 0.01


@pytest.mark.skipif(not QEMU_OK, reason=QEMU_WHY)
def test_tcg_host_user_time_is_about_the_guest_time(counted):
    rows, _doc = counted
    for bench in ("getppid", "threadswitch"):
        row = rows[("qemu:accel=tcg", bench)]
        # the host's CPU time is the guest's CPU time, in the same counted
        # batches (counting slows the guest: not the timed mean)
        assert 0.7 < metric(row, "host_cpu_ns") / metric(row, "task_clock_ns") < 2.0, bench
    # getppid's host time is user time: emulation, not kernel entries.  Not
    # asked of threadswitch: its guest scheduler's work makes QEMU enter the
    # host's kernel too, by an amount that moves with the host's load (its sys
    # time above its user time in some runs on a loaded host)
    gp = rows[("qemu:accel=tcg", "getppid")]
    assert metric(gp, "host_cpu_user_ns") > metric(gp, "host_cpu_sys_ns")
    assert "exits" not in rows[("qemu:accel=tcg", "getppid")]["metrics"]  # TCG has no VM exits


def test_counted_batches_are_never_timed(counted):
    """The time figures come from processes that ran with no counter open."""
    rows, _ = counted
    assert len(rows) >= 3
    for (target, bench), r in rows.items():
        assert r["n"] >= 3 and r["metrics"], (target, bench)


def test_explain_prints_the_counts_side_by_side(counted, short_compare, tmp_path):
    _, doc = counted
    db = str(short_compare.db)
    p = subprocess.run(
        [sys.executable, "-m", "vmtax.cli", "--db", db, "explain", doc["run_id"], "--json", str(tmp_path / "e.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert "host ctx switches / op" in p.stdout and "page faults / op" in p.stdout
    ex = json.loads((tmp_path / "e.json").read_text())
    assert {b["benchmark"] for b in ex["benchmarks"]} >= AGENT_ROWS
    if UML_OK:
        assert any("ptrace" in r for b in ex["benchmarks"] for r in b["readings"])
