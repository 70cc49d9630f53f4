"""Real targets, really started: a TCG guest, containers, UML where it
runs.  Every test checks that nothing it started is left running."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile

import pytest

from helpers import left_behind, leftovers, stored, wait_samples, wait_until
from vmtax.errors import TargetError
from vmtax.targets import parse_target
from vmtax.targets.container import ContainerTarget, podman_works
from vmtax.targets.qemu import QemuTarget
from vmtax.targets.uml import UmlTarget

pytestmark = pytest.mark.e2e

QEMU_OK, QEMU_WHY = QemuTarget.available()
needs_qemu = pytest.mark.skipif(not QEMU_OK, reason=QEMU_WHY)


def samples(lines):
    return [json.loads(line) for line in lines if '"sample"' in line]


@needs_qemu
@pytest.mark.parametrize("spec", ["qemu:accel=tcg", "qemu:accel=tcg,machine=microvm,smp=2,mem=512M"])
def test_tcg_guest_boots_runs_and_goes_away(spec):
    t = parse_target(spec)
    with t:
        workdir = str(t.workdir)
        facts = t.facts()
        assert facts["accel"] == "tcg" and facts["hypervisor_vendor"] == "TCGTCGTCGTCG"
        assert facts["cpus_online"] == int(t.options.get("smp", 1))
        # the vCPU threads are found by their names (debug-threads=on): unpinned, they may run anywhere
        assert facts["vcpu_threads_on"] == sorted(os.sched_getaffinity(0))
        s = samples(t.run_agent(["run", "getppid", "--samples", "2", "--warmup", "0"], 60))
        assert len(s) == 2 and all(x["value"] > 0 for x in s)
        info = t.info()
        assert 0 < info.boot_s < 60 and info.idle_cpu_pct is not None
        assert info.mem_overhead_mb > 1
        assert leftovers(workdir)
    assert not leftovers(workdir) and not os.path.exists(workdir)


@needs_qemu
def test_guest_that_hangs_while_booting_is_killed():
    t = parse_target("qemu:accel=tcg,boot_timeout=0.3")  # far less than a boot: looks like a hang
    with pytest.raises(TargetError, match="did not become ready"):
        with t:
            pass
    assert not leftovers("vmtax-qemu-")


@needs_qemu
def test_error_inside_the_session_and_in_guest_timeout_clean_up():
    t = parse_target("qemu:accel=tcg")
    with pytest.raises(TargetError, match="no answer within"):
        with t:
            workdir = str(t.workdir)
            list(t.run_agent(["run", "fork_sh", "--samples", "1000", "--warmup", "0"], 1.0))
    assert not leftovers(workdir)


@needs_qemu
def test_ctrl_c_during_compare_kills_the_guest_and_keeps_samples(tmp_path):
    db = tmp_path / "v.db"
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(db),
        "compare",
        "local",
        "qemu:accel=tcg",
        "--bench",
        "getppid",
        "--precision",
        "0.01%",
        "--max-time",
        "5m",
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    n = wait_samples(db, 4, 90, "target = 'qemu:accel=tcg'", proc=p)
    assert n >= 4, "the guest never delivered samples"
    assert left_behind(p.pid)
    p.send_signal(signal.SIGINT)
    _out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert wait_until(lambda: not left_behind(p.pid), 5, 0.2), left_behind(p.pid)
    assert stored(db) >= n


@needs_qemu
def test_short_compare_local_qemu_container(short_compare):
    """The session's short comparison (conftest.short_compare: local, the
    TCG guest, UML and a container where they run): its scoreboard, JSON and
    Markdown, and where the guest ran."""
    doc = short_compare.doc
    names = [t["name"] for t in doc["targets"]]
    assert names[:2] == ["local", "qemu:accel=tcg"]
    q = doc["targets"][1]
    assert q["accel"] == "tcg" and q["boot_s"] > 0 and q["mem_overhead_mb"] > 0
    cpu = q["facts"]["host_cpu"]  # --cpu auto: the last CPU where there are two or more
    if cpu is not None:  # the guest runs where the run says, its emulator threads on the other CPUs
        assert q["facts"]["vcpu_threads_on"] == [cpu]
        assert q["facts"]["emulator_threads_on"] == sorted(set(os.sched_getaffinity(0)) - {cpu})
    cands = {c["candidate"] for c in doc["comparisons"]}
    assert "qemu:accel=tcg" in cands
    for c in doc["comparisons"]:
        assert c["ratio_ci_low"] <= c["ratio"] <= c["ratio_ci_high"]
    # TCG translates the guest's syscall path: slower than the host's
    gp = next(c for c in doc["comparisons"] if c["benchmark"] == "getppid" and c["candidate"].startswith("qemu"))
    assert gp["ratio"] > 1 and gp["significant"]
    assert "Ratios to local (lower is better" in short_compare.proc.stdout and "| benchmark |" in short_compare.markdown
    assert not leftovers("vmtax-qemu-") and not leftovers("vmtax-uml-")


CONTAINER_OK, CONTAINER_WHY = ContainerTarget.available()


@pytest.mark.skipif(not CONTAINER_OK, reason=CONTAINER_WHY)
@pytest.mark.parametrize("engine", ["auto", "unshare"])
def test_container_runs_the_agent(engine):
    t = parse_target(f"container:engine={engine}")
    with t:
        assert t.facts()["engine"] in ("podman", "unshare")
        for bench in ("null_read", "select_tcp", "fork_sh"):
            s = samples(t.run_agent(["run", bench, "--samples", "1", "--warmup", "0"], 60))
            assert s and s[0]["value"] > 0, bench
    if t.engine == "podman":
        ps = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True).stdout
        assert t.container_name not in ps


PODMAN_OK, PODMAN_WHY = podman_works()


@pytest.mark.skipif(not PODMAN_OK, reason=PODMAN_WHY)
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nowhere to keep the relay apart")
def test_a_pinned_podman_container_keeps_its_relay_off_the_measured_cpu():
    """podman's client and conmon relay every line of the channel; pinned,
    they run on the other CPUs and only the container on the measured one."""
    t = parse_target("container:engine=podman")
    cpu = max(os.sched_getaffinity(0))
    others = sorted(os.sched_getaffinity(0) - {cpu})
    t.pin(cpu)
    with t:
        assert t.facts()["relay_on"] == others
        pids = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.ConmonPid}} {{.State.Pid}}", t.container_name],
            capture_output=True,
            text=True,
        ).stdout.split()
        conmon, inside = (int(x) for x in pids)
        assert os.sched_getaffinity(t.p.pid) == set(others)  # the podman client
        assert os.sched_getaffinity(conmon) == set(others)
        assert os.sched_getaffinity(inside) == {cpu}  # the container's shell, and the agents it starts
        s = samples(t.run_agent(["run", "getppid", "--samples", "1", "--warmup", "0", "--cpu", str(cpu)], 60))
        assert s and s[0]["cpu"] == cpu


UML_OK, UML_WHY = UmlTarget.available()


@pytest.mark.skipif(not UML_OK, reason=f"UML does not run here: {UML_WHY}")
def test_uml_boots_and_runs():
    t = parse_target("uml")
    with t:
        workdir = str(t.workdir)
        assert t.facts()["target_kind"] == "uml"
        assert samples(t.run_agent(["run", "getppid", "--samples", "2", "--warmup", "0"], 60))
    assert not leftovers(workdir)


@pytest.mark.skipif(UML_OK, reason="UML works here; its failure path is not reachable")
def test_uml_that_cannot_boot_says_why_and_leaves_nothing():
    t = parse_target("uml")
    with pytest.raises(TargetError) as e:
        with t:
            pass
    # the start's own words are the probe's (it boots the same way): a reason, said the same each time
    assert str(e.value) == UML_WHY and str(e.value).startswith("User-mode Linux "), (str(e.value), UML_WHY)
    assert wait_until(lambda: not leftovers("linux.uml"), 5), leftovers("linux.uml")


@needs_qemu
def test_sigkill_of_the_controller_leaves_no_guest_and_the_run_reads_abandoned(tmp_path):
    """kill -KILL vmtax mid-compare: the kernel kills QEMU and UML (and UML's
    helpers, in their PID namespace) with it; the container ends with its
    channel; the run reads 'abandoned'; the next run sweeps the work dirs."""
    db = tmp_path / "k.db"
    targets = ["local", "qemu:accel=tcg"] + (["uml"] if UML_OK else []) + (["container"] if CONTAINER_OK else [])
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(db),
        "compare",
        *targets,
        "--bench",
        "getppid",
        "--precision",
        "0.01%",
        "--max-time",
        "5m",
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(
        lambda: stored(db, what="count(DISTINCT target)") >= len(targets), 120, 0.5, alive=lambda: p.poll() is None
    )
    mine = f"-{p.pid}-"
    assert leftovers(f"vmtax-qemu{mine}"), "the guest never came up"
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    assert wait_until(lambda: not left_behind(p.pid, files=False), 15, 0.5), left_behind(p.pid, files=False)
    assert not leftovers("linux.uml")
    out = subprocess.run(
        [sys.executable, "-m", "vmtax.cli", "--db", str(db), "runs", "--json"], capture_output=True, text=True
    )
    assert json.loads(out.stdout)[0]["status"] == "abandoned"
    stale = [d for d in os.listdir(tempfile.gettempdir()) if mine in d and d.startswith("vmtax-")]
    assert stale  # left by the killed controller ...
    from vmtax import proc

    proc.sweep()  # ... and removed by the next one (every target's start() sweeps)
    assert not [d for d in os.listdir(tempfile.gettempdir()) if mine in d and d.startswith("vmtax-")]


@pytest.mark.skipif(not (UML_OK or QEMU_OK), reason=f"neither UML ({UML_WHY}) nor QEMU ({QEMU_WHY}) runs here")
def test_compare_reboot_boots_the_guests_afresh_each_round_and_leaves_nothing(tmp_path):
    """compare --reboot on real guests (UML where it runs, else TCG): every
    round's blocks on fresh boots, each boot's processes and files gone."""
    guest, twin, budget = (
        ("uml", "uml:label=b", "15s") if UML_OK else ("qemu:accel=tcg", "qemu:accel=tcg,label=b", "30s")
    )
    db = tmp_path / "r.db"
    argv = ["compare", guest, twin, "--bench", "getppid", "--max-time", budget, "--reboot"]
    p = subprocess.Popen(
        [sys.executable, "-m", "vmtax.cli", "--db", str(db), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, err[-2000:]
    assert "fresh boots of the guests (--reboot:" in " ".join((err + out).split())
    boots = stored(db, "counting = 0", what="count(DISTINCT block)")
    con = sqlite3.connect(db)
    facts = [json.loads(f) for (f,) in con.execute("SELECT facts_json FROM run_targets ORDER BY position")]
    con.close()
    assert boots >= 2 and [f["boots"] for f in facts] == [boots, boots]
    assert not left_behind(p.pid)
    kind = guest.split(":")[0]
    assert not [d for d in os.listdir(tempfile.gettempdir()) if d.startswith(f"vmtax-{kind}-{p.pid}-")]
