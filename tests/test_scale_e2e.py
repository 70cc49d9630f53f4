"""vmtax scale with real copies: TCG guests, UML kernels, containers and
local processes, released together at the barrier; and when one copy
fails to boot or dies mid-run, or on Ctrl-C, every copy is stopped and
nothing of this controller's is left running.  Small N, tiny budgets."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import left_behind
from vmtax import scale, suite
from vmtax.store import Store
from vmtax.targets import parse_target
from vmtax.targets.container import ContainerTarget
from vmtax.targets.qemu import QemuTarget
from vmtax.targets.uml import UmlTarget

pytestmark = pytest.mark.e2e

QEMU_OK, QEMU_WHY = QemuTarget.available()
needs_qemu = pytest.mark.skipif(not QEMU_OK, reason=QEMU_WHY)
TCG = "qemu:accel=tcg,mem=256M"
QUICK = ["--round-time", "0.3s", "--rounds", "2", "--max-rounds", "2"]


def start(db, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vmtax.cli", "--db", str(db), "scale", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(p: subprocess.Popen, needle: str, timeout: float = 120) -> list[str]:
    """stderr lines until one holds needle."""
    seen, deadline = [], time.time() + timeout
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"never saw {needle!r}: {''.join(seen)}")


@needs_qemu
def test_two_tcg_guests_boot_in_parallel_give_the_contract_and_go_away(tmp_path, db):
    out = tmp_path / "s.json"
    p = start(db, TCG, "--instances", "2", "--bench", "getppid", *QUICK, "--json", str(out))
    stdout, stderr = p.communicate(timeout=180)
    assert p.returncode == 0, stderr
    assert "(2 in parallel)" in stderr
    doc = json.loads(out.read_text())
    assert doc["target"] == TCG and [x["n"] for x in doc["instances"]] == [2]
    two = doc["instances"][0]
    assert two["vcpus"] == 2 and len(two["per_instance"]) == 2 and two["aggregate"]["value"] > 0
    assert two["host_mem_per_instance"]["value"] > 64  # a 256M guest's QEMU, really resident
    assert "unpinned" in stdout and "2/2 (1x)" in stdout.replace(f"2/{os.cpu_count()} (", "2/2 (")
    assert not left_behind(p.pid)


@needs_qemu
def test_a_guest_killed_mid_run_stops_the_other_and_keeps_the_rounds(db):
    p = start(db, TCG, "--instances", "2", "--bench", "pi", "--round-time", "1s", "--rounds", "6", "--max-rounds", "6")
    try:
        wait_for(p, "round 1:")
        qemus = [int(line.split()[0]) for line in left_behind(p.pid) if "qemu-system" in line]
        assert len(qemus) == 2
        time.sleep(0.3)  # inside round 2
        os.kill(qemus[1], signal.SIGKILL)
        _, stderr = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 1, stderr
    assert "failed" in stderr and "every instance was stopped" in stderr and "Traceback" not in stderr
    assert not left_behind(p.pid)
    with Store(db, readonly=True) as store:
        data = store.load(store.resolve(None))
    assert data.status == "failed"
    assert {s.block for s in data.samples} >= {0}  # the complete round is kept


@needs_qemu
def test_a_guest_that_does_not_boot_stops_the_others_even_mid_boot(db):
    def make(i):
        # the third copy gives up far sooner than a guest boots; the second is booting beside it
        return parse_target(f"{TCG},boot_timeout=0.5" if i == 2 else TCG)

    cfg = scale.ScaleConfig(instances=(3,), round_time=0.3, min_rounds=2, max_rounds=2)
    with Store(db) as store:
        _run_id, status, failure = scale.run_scale(
            TCG, make, cfg, suite.select(None, ["getppid"]), store, "test", lambda text: None
        )
    assert status == "failed" and "instance 3 of 3" in failure and "did not boot" in failure
    time.sleep(0.3)
    assert not left_behind(os.getpid())


CONTAINER_OK, CONTAINER_WHY = ContainerTarget.available()


@pytest.mark.skipif(not CONTAINER_OK, reason=CONTAINER_WHY)
def test_ctrl_c_stops_every_container_and_keeps_the_rounds(db):
    p = start(
        db,
        "container",
        "--instances",
        "2",
        "--bench",
        "getppid",
        "--round-time",
        "0.5s",
        "--rounds",
        "20",
        "--max-rounds",
        "20",
    )
    try:
        wait_for(p, "round 1:")
        p.send_signal(signal.SIGINT)
        _, stderr = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130, stderr
    assert not left_behind(p.pid)
    with Store(db, readonly=True) as store:
        data = store.load(store.resolve(None))
    assert data.status == "interrupted" and {s.block for s in data.samples} >= {0}


UML_OK, UML_WHY = UmlTarget.available()


@pytest.mark.skipif(not UML_OK, reason=UML_WHY)
def test_uml_kernels_boot_in_parallel_and_go_away(tmp_path, db):
    p = start(db, "uml:mem=128M", "--instances", "3", "--bench", "getppid", *QUICK)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 0, stderr
    assert "3 instance(s) of uml:mem=128M started" in stderr and "(3 in parallel)" in stderr
    assert "3/" in stdout
    assert not left_behind(p.pid)


@pytest.mark.skipif(not shutil.which("sysbench"), reason="sysbench is not installed (make setup installs it)")
def test_local_copies_run_a_workload_and_an_agent_row_released_together(tmp_path, db):
    out = tmp_path / "s.json"
    p = start(
        db,
        "local",
        "--instances",
        "2",
        "--bench",
        "sysbench_cpu",
        "getppid",
        "--round-time",
        "0.5s",
        "--rounds",
        "2",
        "--max-rounds",
        "2",
        "--json",
        str(out),
    )
    _stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 0, stderr
    docs = {d["benchmark"]: d for d in json.loads(out.read_text())}
    assert set(docs) == {"getppid", "sysbench_cpu.events_per_s"}
    sb = docs["sysbench_cpu.events_per_s"]["instances"]
    assert sb[0]["aggregate"]["unit"] == "events/s" and len(sb[0]["per_instance"]) == 2
    assert all(e["value"] > 0 for e in sb[0]["per_instance"])
    left = subprocess.run(["pgrep", "-f", "vmtax-sysbench_cpu"], capture_output=True, text=True).stdout.split()
    assert not [
        x
        for x in left
        if os.path.exists(f"/proc/{x}")
        and Path(f"/proc/{x}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(p.pid)
    ]
