"""gVisor (container:runtime=runsc) really started, where runsc runs here:
a short compare against the bare machine gives every row a ratio, the
target's facts name gVisor's version, platform and what it counts inside,
explain shows its host system calls and context switches per operation
with the platform named, and nothing of the sandbox is left running."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers import left_behind

pytestmark = pytest.mark.e2e

ROWS = ("getppid", "page_fault")


def gvisor_usable() -> tuple[bool, str]:
    if not shutil.which("runsc"):
        return False, "runsc is not installed (make setup installs it)"
    from vmtax.targets import parse_target

    return parse_target("container:runtime=runsc").usable()


GV_OK, GV_WHY = gvisor_usable()


def runsc_pids() -> set[int]:
    out = subprocess.run(["pgrep", "-f", "^runsc"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


@pytest.fixture(scope="module")
def gvisor_run(tmp_path_factory):
    if not GV_OK:
        pytest.skip(f"gVisor cannot run here: {GV_WHY}")
    db = tmp_path_factory.mktemp("gvisor") / "g.db"
    before = runsc_pids()
    base = [sys.executable, "-m", "vmtax.cli", "--db", str(db)]
    compare = subprocess.run(
        [*base, "compare", "local", "container:runtime=runsc", "--bench", *ROWS, "--max-time", "12s", "--json", "-"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = db.with_name("explain.json")
    explain = subprocess.run([*base, "explain", "--json", str(out)], capture_output=True, text=True, timeout=60)
    return compare, (explain, json.loads(out.read_text()) if out.exists() else None), before


def test_a_gvisor_container_gives_every_row_a_ratio(gvisor_run):
    compare, _, _ = gvisor_run
    assert compare.returncode == 0, compare.stderr[-3000:]
    doc = json.loads(compare.stdout)
    ratios = {c["benchmark"]: c["ratio"] for c in doc["comparisons"] if c["candidate"] == "container:runtime=runsc"}
    assert set(ratios) == set(ROWS) and all(r is not None and r > 0 for r in ratios.values()), ratios
    assert ratios["getppid"] > 3  # every system call taken by the Sentry: measured 80-160x under ptrace


def test_its_facts_name_gvisor_its_platform_and_what_counts_inside(gvisor_run):
    compare, _, _ = gvisor_run
    doc = json.loads(compare.stdout)
    facts = next(t["facts"] for t in doc["targets"] if t["name"] == "container:runtime=runsc")
    assert facts["gvisor_version"] and facts["gvisor_platform"] in facts["gvisor_platforms"].split(", ")
    assert facts["gvisor_network"] == "none" and facts["host_cpu"] is not None
    assert "the agent inside pins nothing" in facts["gvisor_pinned"]
    assert "page_faults" in facts["gvisor_counters"]  # getrusage's, where gVisor has no perf events
    assert facts.get("lockstep_go_ms") is not None  # its go's round trip, said in the header


def test_explain_shows_its_host_round_trips_per_operation_with_the_platform(gvisor_run):
    compare, (explain, doc), _ = gvisor_run
    assert explain.returncode == 0 and doc, explain.stderr[-2000:]
    platform = next(
        t["facts"]["gvisor_platform"]
        for t in json.loads(compare.stdout)["targets"]
        if t["name"] == "container:runtime=runsc"
    )
    blocks = {b["benchmark"]: b for b in doc["benchmarks"]}
    for bench in ROWS:
        rows = {r["key"]: r["values"] for r in blocks[bench]["rows"]}
        assert rows["host_syscalls"]["container:runtime=runsc"]["mean"] is not None, bench
        assert rows["host_context_switches"]["container:runtime=runsc"]["mean"] is not None, bench
        assert "host_cpu_sentry_ns" in rows, bench
        said = [r for r in blocks[bench]["readings"] if r.startswith("container:runtime=runsc")]
        assert said and f"gVisor on platform {platform}" in said[0], blocks[bench]["readings"]
    # a getppid is one system call natively; in gVisor several host ones (ptrace: ~6, its stub's round trip)
    assert rows_of(blocks, "getppid", "host_syscalls") > 1.5


def rows_of(blocks, bench, key):
    return next(r for r in blocks[bench]["rows"] if r["key"] == key)["values"]["container:runtime=runsc"]["mean"]


def test_nothing_of_the_sandbox_is_left_running(gvisor_run):
    _, _, before = gvisor_run
    assert not (runsc_pids() - before)  # the Sentry, the Gofer, their conmon: all gone with the run
    assert not left_behind(os.getpid())


def test_a_sandbox_whose_start_fails_or_hangs_leaves_nothing(monkeypatch):
    """A start on gVisor's KVM platform, with 3 s to boot: where it spins
    without booting (a nested /dev/kvm, as on this project's machines) or
    fails, the start times out or errs and takes the Sentry, the Gofer,
    runsc's create and its conmon with it: they leave podman's process
    group, so podman rm alone would leave them (gvisor.kill_leftovers).
    The remembered probe, which refuses such a start at once, is set
    aside; where KVM boots the sandbox, there is nothing to check."""
    if not GV_OK:
        pytest.skip(f"gVisor cannot run here: {GV_WHY}")
    from vmtax.errors import TargetError
    from vmtax.targets import gvisor, parse_target

    if "kvm" not in gvisor.runsc(shutil.which("runsc")).platforms:
        pytest.skip("this runsc has no KVM platform")
    before = runsc_pids()
    monkeypatch.setattr(gvisor, "known_failure", lambda info, platform: "")
    t = parse_target("container:runtime=runsc,platform=kvm,boot_timeout=3")
    t.pin(1)
    try:
        with t:
            booted = True
    except TargetError:
        booted = False
    assert not (runsc_pids() - before)
    assert not left_behind(os.getpid())
    if booted:
        pytest.skip("gVisor's KVM platform boots here: no failed start to clean up after")
