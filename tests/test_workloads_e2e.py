"""Real workloads in real targets: the host's tools, copied with their
libraries into a TCG guest, User-mode Linux (where it runs) and a
container, each run to a ratio; the servers a workload starts end with it."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from helpers import leftovers
from vmtax.targets.container import ContainerTarget
from vmtax.targets.qemu import QemuTarget
from vmtax.targets.uml import UmlTarget

pytestmark = pytest.mark.e2e

QEMU_OK, QEMU_WHY = QemuTarget.available()
UML_OK, UML_WHY = UmlTarget.available()
CONTAINER_OK, _ = ContainerTarget.available()


@pytest.mark.skipif(not QEMU_OK, reason=QEMU_WHY)
@pytest.mark.skipif(not shutil.which("sysbench"), reason="sysbench is not installed (make setup installs it)")
def test_sysbench_in_every_target(short_compare):
    """The session's short comparison (conftest.short_compare) runs sysbench
    cpu, 1-second runs, in every target that works here."""
    targets = short_compare.targets
    assert targets[:2] == ["local", "qemu:accel=tcg"] and "sysbench_cpu" in short_compare.rows
    by = {(c["benchmark"], c["candidate"]): c for c in short_compare.doc["comparisons"]}
    for t in targets[1:]:
        c = by[("sysbench_cpu.events_per_s", t)]
        assert c["direction"] == "higher" and c["unit"] == "events/s"
        # a 95% sign-flip interval needs 6 blocks: the stop waits for the interval the report
        # gives (engine.stop), so fewer processes are not enough to end on precision
        assert c["stopped_by"] == "precision", c
        assert 0 < c["ratio_ci_low"] <= c["ratio"] <= c["ratio_ci_high"], c
        assert (c["ratio_ci_high"] - c["ratio_ci_low"]) / 2 / c["ratio"] <= 0.5, c
    # TCG emulates every instruction: sysbench cpu is far slower there
    assert by[("sysbench_cpu.events_per_s", "qemu:accel=tcg")]["ratio"] < 0.8
    # this session's guests boot from its private cache (conftest): nothing of theirs is left
    assert not leftovers(os.environ["XDG_CACHE_HOME"])


@pytest.mark.skipif(not CONTAINER_OK, reason="no container runtime works here")
@pytest.mark.skipif(not shutil.which("tbench"), reason="dbench is not installed (make setup installs it)")
def test_tbench_serves_itself_inside_a_container_and_its_server_ends_with_it(tmp_path):
    """tbench against tbench_srv, both inside the target (the server a
    workload starts there): a ratio to the bare machine's, nothing left."""
    cmd = [sys.executable, "-m", "vmtax.cli", "--db", str(tmp_path / "t.db"), "compare", "local", "container"]
    cmd += ["--bench", "tbench", "--tool-seconds", "1", "--min-processes", "2", "--max-time", "40s", "--json", "-"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    (c,) = [c for c in json.loads(p.stdout)["comparisons"] if c["benchmark"] == "tbench.mb_per_s"]
    assert c["candidate"] == "container" and c["unit"] == "MB/s" and c["ratio"] > 0, c
    assert not leftovers("tbench_srv")


@pytest.mark.skipif(not CONTAINER_OK, reason="no container runtime works here")
@pytest.mark.skipif(
    not os.path.isfile("/usr/local/src/vmtax/lua5.4/src/lua.c"),
    reason="the Lua source is not fetched (make setup runs scripts/fetch-sources.sh)",
)
def test_a_compile_in_a_container_with_the_toolchain_copied_in(tmp_path):
    """The toolchain the trace found (gcc, cc1, as, ld, headers, crt files)
    is all a root needs: the build in the container's busybox root makes an
    interpreter that computes 6*7 (the script checks)."""
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(tmp_path / "c.db"),
        "run",
        "--target",
        "container",
        "--bench",
        "compile_lua",
        "--min-processes",
        "2",
        "--precision",
        "50%",
        "--max-time",
        "2m",
        "--json",
        "-",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    (r,) = [r for r in doc["results"] if r["benchmark"] == "compile_lua.seconds"]
    assert r["unit"] == "s" and r["direction"] == "lower" and r["processes"] >= 2
    assert 1 < r["mean"] < 120, r  # a real build (~8 s here), not an instant failure
    assert not leftovers(os.environ["XDG_CACHE_HOME"])


def test_a_cold_first_use_trace_ends_with_the_budget_and_says_what_it_needs(tmp_path):
    """compile_lua's first use on a host traces its build once (10-35 s
    here, then cached): with an empty cache and a short budget it ran
    past --max-time and its grace and measured nothing.  The trace now
    ends with the budget, and the row says what it needs."""
    from vmtax.engine.budget import grace_s
    from vmtax.suite.workloads import BY_NAME

    why = BY_NAME["compile_lua"].missing()
    if why:
        pytest.skip(why)
    db, max_time = tmp_path / "v.db", 3.0
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cold-cache")}
    cmd = [sys.executable, "-m", "vmtax.cli", "--db", str(db), "run", "--target", "local"]
    cmd += ["--bench", "compile_lua", "--max-time", f"{max_time:g}s"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    took = time.monotonic() - t0
    # the interpreter's start (a few seconds on a loaded host) comes before the budget's
    assert took < max_time + grace_s(max_time) + 6, (took, p.stderr[-2000:])
    said = p.stdout + p.stderr  # the row's reason, in its table
    assert "skipped: its first use traces its build once" in said and "longer --max-time" in said, said[-3000:]
