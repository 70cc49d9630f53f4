"""compare --shared-boot on real TCG guests: one boot's state live-migrated
into every guest (targets/migration.py), nothing left behind."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest

from helpers import left_behind
from vmtax.engine import session
from vmtax.engine.session import TargetPool
from vmtax.targets import parse_target
from vmtax.targets.qemu import QEMU, QemuTarget

pytestmark = pytest.mark.e2e

QEMU_OK, QEMU_WHY = QemuTarget.available()
needs_qemu = pytest.mark.skipif(not QEMU_OK, reason=QEMU_WHY)


def boot_id(t) -> str:
    """The guest kernel's boot id: the same in two guests only where one holds the other's state."""
    (line,) = [x for x in t.run_tool(["cat", "/proc/sys/kernel/random/boot_id"], 30) if x.strip()]
    return line.strip()


def btime(t) -> int:
    """When the guest's kernel booted (s since the epoch, /proc/stat): one
    boot's in two guests that hold its state.  (Its boot id is drawn when
    first read, so two guests that took a state before anyone read it each
    draw their own.)"""
    lines = [x for x in t.run_tool(["cat", "/proc/stat"], 30) if x.startswith("btime ")]
    return int(lines[0].split()[1])


def getppid_samples(t) -> list:
    lines = t.run_agent(["run", "getppid", "--samples", "2", "--warmup", "0"], 60)
    return [json.loads(x) for x in lines if '"sample"' in x]


@needs_qemu
def test_guests_take_one_boots_state_and_the_old_qemus_go():
    """share: both guests then run the first one's boot (one boot id), in
    new QEMU processes, the old ones gone and the agent answering;
    restart_shared: the second one booted afresh and its state in both."""
    a, b = parse_target("qemu:accel=tcg"), parse_target("qemu:accel=tcg,label=b")
    with TargetPool() as pool:
        pool.add([a, b], [None, None])
        pool.start(a)
        pool.start(b)
        first, booted = boot_id(a), btime(a)
        assert boot_id(b) != first  # two boots (the ids read before the share: it carries them)
        old = [a.p.pid, b.p.pid]
        assert session.share([a, b]) == {}
        assert boot_id(a) == boot_id(b) == first
        assert {a.p.pid, b.p.pid}.isdisjoint(old) and not any(os.path.exists(f"/proc/{pid}") for pid in old)
        assert len(getppid_samples(b)) == 2 and b.host_probe is not None
        assert session.restart_shared(pool, [b, a]) == {}
        again = btime(b)
        assert again > booted and btime(a) == again  # b booted afresh (seconds later), a holds its state
        moves = [len(list(t.workdir.glob("move*"))) for t in (a, b)]
        assert moves == [2, 1]  # a took b's fresh state (its second move); b moved itself
        workdirs = [str(a.workdir), str(b.workdir)]
    assert not any(os.path.exists(w) for w in workdirs)
    assert not left_behind(os.getpid())


@needs_qemu
def test_compare_shared_boot_runs_rounds_on_one_boot_and_leaves_nothing(tmp_path):
    """Two QEMU binaries (the second a wrapper of the first: another path,
    as a second build is): both boot the versioned machine type they share."""
    db, other = tmp_path / "r.db", tmp_path / "qemu-b"
    other.write_text(f'#!/bin/sh\nexec {shutil.which(QEMU)} "$@"\n')
    other.chmod(0o755)
    # two binaries: a named CPU model on both (the default, max, is whatever each build can do)
    base, cand = "qemu:accel=tcg,cpu=qemu64", f"qemu:accel=tcg,cpu=qemu64,binary={other}"
    argv = ["compare", base, cand, "--bench", "getppid", "--max-time", "30s"]
    p = subprocess.Popen(
        [sys.executable, "-m", "vmtax.cli", "--db", str(db), *argv, "--shared-boot"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, err[-2000:]
    assert "its state live-migrated into every guest (--shared-boot:" in " ".join((err + out).split())
    con = sqlite3.connect(db)
    facts = [json.loads(f) for (f,) in con.execute("SELECT facts_json FROM run_targets ORDER BY position")]
    (config,) = [json.loads(c) for (c,) in con.execute("SELECT config_json FROM runs")]
    con.close()
    assert config["shared_boot"] and config["reboot"]
    assert facts[0]["boots"] == facts[1]["boots"] >= 2
    assert facts[0]["machine_type"] == facts[1]["machine_type"] and facts[0]["machine_type"].startswith("pc-i440fx-")
    assert facts[1]["qemu_binary"] == str(other)
    assert not left_behind(p.pid)
    assert not [d for d in os.listdir(tempfile.gettempdir()) if d.startswith(f"vmtax-qemu-{p.pid}-")]


@needs_qemu
def test_shared_boot_refuses_what_cannot_share_a_state_in_one_line(tmp_path):
    for targets, said in [
        (["qemu:accel=tcg", "qemu:accel=tcg,mem=512M,label=b"], "differs from qemu:accel=tcg in mem_mb"),
        (["qemu:accel=tcg", "qemu:accel=tcg,nic=virtio,label=b"], "has a NIC"),
        (["local", "qemu:accel=tcg"], "two QEMU guests or more"),
        (["qemu:accel=tcg", "uml"], "uml cannot take it"),
    ]:
        p = subprocess.run(
            [sys.executable, "-m", "vmtax.cli", "--db", str(tmp_path / "x.db"), "compare", *targets, "--shared-boot"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 2 and said in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
