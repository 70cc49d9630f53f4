"""Guests with a scratch disk, for real: a TCG guest with a virtio disk on a
loop device against the host's own disk, through fio with direct I/O; and
what is left after a run and after Ctrl-C (nothing: no image, no loop
device, no QEMU)."""

import glob
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers import left_behind, wait_samples, wait_until
from vmtax.hostproc import running
from vmtax.targets import devices
from vmtax.targets.local import filesystem
from vmtax.targets.qemu import QemuTarget

pytestmark = pytest.mark.e2e

QEMU_OK, QEMU_WHY = QemuTarget.available()
LOOP_OK = os.access("/dev/loop-control", os.R_OK | os.W_OK)
HOST_DISK = filesystem(devices.IMAGE_PARENT) not in ("tmpfs", "ramfs", "")
TAP_WHY = devices.tap_allowed()


@pytest.mark.skipif(not QEMU_OK, reason=QEMU_WHY)
@pytest.mark.skipif(not HOST_DISK, reason=f"{devices.IMAGE_PARENT} is not on a disk here")
def test_direct_io_on_a_guests_disk_against_the_hosts_disk(tmp_path):
    guest = "qemu:accel=tcg,disk=virtio" + (",backing=block" if LOOP_OK else "")
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(tmp_path / "d.db"),
        "compare",
        f"local:dir={devices.IMAGE_PARENT}",
        guest,
        "--bench",
        "disk_randread",
        "--tool-seconds",
        "1",
        "--min-processes",
        "6",  # 6 blocks: the fewest a 95% sign-flip interval needs
        "--precision",
        "50%",
        "--max-time",
        "2m",
        "--json",
        "-",
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-3000:]
    doc = json.loads(out)
    by = {(c["benchmark"], c["candidate"]): c for c in doc["comparisons"]}
    c = by[("disk_randread.iops", guest)]
    assert c["unit"] == "IOPS" and c["ratio"] > 0 and c["ratio_ci_low"] <= c["ratio"] <= c["ratio_ci_high"]
    facts = {t["name"]: t["facts"] for t in doc["targets"]}
    assert facts[guest]["disk"] == "virtio" and facts[guest]["image"] == "raw"
    assert facts[guest]["backing"] == ("block" if LOOP_OK else "file")
    # seed 003's figure of merit: host CPU per GB moved, the guest's QEMU against the tool itself
    rows = {(r["target"], r["benchmark"]): r for r in doc["results"]}
    for t in (f"local:dir={devices.IMAGE_PARENT}", guest):
        m = rows[(t, "disk_randread.iops")]["metrics"]["host_cpu_per_unit"]
        assert m["unit"] == "s/GB" and m["mean"] > 0, (t, m)
    assert (
        rows[(guest, "disk_randread.iops")]["metrics"]["host_cpu_per_unit"]["mean"]
        > rows[(f"local:dir={devices.IMAGE_PARENT}", "disk_randread.iops")]["metrics"]["host_cpu_per_unit"]["mean"]
    )
    # (a guest without a disk, only a tmpfs, skips it with the reason: tests/test_workloads.py)
    assert not left_behind(p.pid)


@pytest.mark.skipif(not QEMU_OK, reason=QEMU_WHY)
@pytest.mark.skipif(not LOOP_OK, reason="no loop devices for this user")
def test_ctrl_c_removes_the_image_the_loop_device_and_the_tap(tmp_path):
    db = tmp_path / "c.db"
    tap = ",nic=virtio,net=tap" if TAP_WHY is None else ""
    before = namespaces()
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(db),
        "compare",
        "local",
        f"qemu:accel=tcg,disk=ide,backing=block{tap}",
        "--bench",
        "getppid",
        "--precision",
        "0.01%",
        "--max-time",
        "5m",
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_samples(db, 1, 120, "target LIKE 'qemu%'", proc=p)
    held = left_behind(p.pid)
    assert any(h.startswith("loop") for h in held) and any(h.startswith("vmtax-qemu-") for h in held), held
    assert not tap or namespaces() - before, "the namespace of the guest's tap"
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=60)
    assert p.returncode != 0
    wait_until(lambda: not (left_behind(p.pid) or namespaces() - before), 10, 0.2)
    assert not left_behind(p.pid) and not namespaces() - before


def namespaces() -> set[str]:
    """The network namespaces alive on this host (a tap lives in one vmtax makes)."""
    out = subprocess.run(["lsns", "-t", "net", "-n", "-o", "NS"], capture_output=True, text=True).stdout
    return set(out.split())


def host_network() -> tuple[str, ...]:
    """The host namespace's interfaces, addresses and routes: what vmtax never touches."""
    return tuple(
        subprocess.run(["ip", *a], capture_output=True, text=True).stdout
        for a in (["-br", "addr"], ["route"], ["-6", "route"])
    )


def wildcard_peers() -> list[str]:
    """The peers vmtax started that listen on a wildcard address (none should)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    return [
        line
        for line in out.splitlines()
        if ("iperf3" in line or "sockperf" in line) and line.split()[3].rsplit(":", 1)[0] in ("0.0.0.0", "*", "[::]")
    ]


def watched(cmd: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run cmd while watching the host's network: what changed in the
    host's namespace and which peers listened on a wildcard address."""
    before, seen = host_network(), []
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = [], []
    readers = [
        threading.Thread(target=lambda f=f, acc=acc: acc.append(f.read()), daemon=True)
        for f, acc in ((p.stdout, out), (p.stderr, err))
    ]
    for r in readers:
        r.start()
    deadline = time.time() + timeout
    while p.poll() is None and time.time() < deadline:
        now = host_network()
        if now != before:
            seen.append(f"host network changed: {now}")
        seen += [f"wildcard peer: {line}" for line in wildcard_peers()]
        time.sleep(0.3)
    if p.poll() is None:
        p.kill()
    p.wait()
    for r in readers:
        r.join()
    done = subprocess.CompletedProcess(cmd, p.returncode, "".join(out), "".join(err))
    done.pid = p.pid  # what the controller's leftovers are named after
    return done, seen


def a_kernel_with(symbol: str) -> bool:
    return any(
        f"CONFIG_{symbol}=" in open(f"/boot/config-{devices.kernel_release(Path(k))}").read()
        for k in glob.glob("/boot/vmlinuz-*")
        if os.path.exists(f"/boot/config-{devices.kernel_release(Path(k))}")
    )


@pytest.mark.skipif(not QEMU_OK, reason=QEMU_WHY)
@pytest.mark.skipif(
    not (shutil.which("iperf3") and shutil.which("sockperf")),
    reason="iperf3 and sockperf are needed (make setup installs them)",
)
def test_a_guests_nic_reaches_the_peer_on_the_host(tmp_path):
    """sockperf in TCG guests, against the server vmtax starts on
    the host: a virtio NIC on QEMU's user-mode network; where root and a
    generic kernel allow, an e1000 on a tap vmtax makes, with an AHCI disk
    (that kernel's drivers, loaded and mounted; both guests then boot it).
    The bare machine runs the same pair over loopback.  No peer and no tap
    is left after.  (iperf3's streams and their s/GB: the parser and unit
    tests, and results/net.md.)"""
    user = "qemu:accel=tcg,nic=virtio"
    tap = "qemu:accel=tcg,nic=e1000,net=tap,disk=ahci"
    guests = [user] + ([tap] if TAP_WHY is None and a_kernel_with("E1000") and a_kernel_with("SATA_AHCI") else [])
    before = namespaces()
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(tmp_path / "n.db"),
        "compare",
        "local",
        *guests,
        "--bench",
        "net_rr",
        "--tool-seconds",
        "1",
        "--min-processes",
        "3",
        "--precision",
        "50%",
        "--max-time",
        "75s",
        "--json",
        "-",
    ]  # ratios, not their intervals: a short run.  The budget holds the guests' boots
    # (10-13 s each on a loaded host) and a first block with each tool's warmup run: 55 s
    # left one block, no ratio, on a loaded CI host
    p, seen = watched(cmd, 600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not seen, seen[:3]
    doc = json.loads(p.stdout)
    by = {(c["benchmark"], c["candidate"]): c for c in doc["comparisons"]}
    facts = {t["name"]: t["facts"] for t in doc["targets"]}
    rows = {(r["target"], r["benchmark"]): r for r in doc["results"]}
    for guest in guests:
        for name, unit in (("net_rr.tx_per_s", "tx/s"), ("net_rr.p50_us", "us")):
            c = by[(name, guest)]
            assert c["unit"] == unit and c["ratio"] > 0, c
        # through an emulated NIC and QEMU's TCP stack or a tap: slower than loopback
        assert by[("net_rr.tx_per_s", guest)]["ratio"] < 1 and by[("net_rr.p50_us", guest)]["ratio"] > 1
        assert rows[(guest, "net_rr.tx_per_s")]["metrics"]["host_cpu_per_unit"]["unit"] == "ms/1000tx"
        assert rows[(guest, "net_rr.tx_per_s")]["metrics"]["host_context_switches_per_unit"]["mean"] > 0
    assert facts[user]["nic"] == "virtio" and facts[user]["net"] == "user"
    if tap in guests:
        assert facts[tap]["nic"] == "e1000" and facts[tap]["net"] == "tap" and facts[tap]["disk"] == "ahci"
        assert facts[tap]["tap"].startswith("vmtax0 in network namespace net:[")
        # one kernel for both guests: the one with e1000 and ahci
        assert facts[user]["guest_kernel_image"] == facts[tap]["guest_kernel_image"]
    deadline = time.time() + 10
    while namespaces() - before and time.time() < deadline:
        time.sleep(0.2)
    assert not namespaces() - before
    left = subprocess.run(["pgrep", "-af", "iperf3 -s|sockperf server"], capture_output=True, text=True).stdout
    assert not [line for line in left.splitlines() if "pgrep" not in line]


@pytest.mark.skipif(not shutil.which("sockperf"), reason="sockperf is needed (make setup installs it)")
def test_a_containers_network_reaches_the_peer_on_the_host(tmp_path):
    """A bridge in podman's shape, its host side in a namespace vmtax makes
    (the peer at the bridge's address there), and slirp4netns (the host's
    loopback at 10.0.2.2), side by side: sockperf in the container against
    the server vmtax starts; the host's own network untouched, no peer on a
    wildcard address, nothing left after (container, slirp4netns, peer,
    namespaces)."""
    from vmtax.targets.container import podman_works

    ok, why = podman_works()
    if not ok:
        pytest.skip(why)
    nets = ["bridge"] + (["slirp4netns"] if shutil.which("slirp4netns") else [])
    targets = [f"container:net={n}" for n in nets]
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(tmp_path / "c.db"),
        "compare",
        *targets,
        "--bench",
        "net_rr",
        "--tool-seconds",
        "1",
        "--min-processes",
        "2",
        "--max-time",
        "25s",
        "--json",
        "-",
    ]
    before = namespaces()  # 25 s: two blocks (a ratio) on a loaded host; with none the run exits 1
    p, seen = watched(cmd, 300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not seen, seen[:3]
    doc = json.loads(p.stdout)
    rows = {(r["target"], r["benchmark"]): r for r in doc["results"]}
    facts = {t["name"]: t["facts"] for t in doc["targets"]}
    for t, n in zip(targets, nets, strict=True):
        r = rows[(t, "net_rr.tx_per_s")]
        assert r["mean"] > 0 and r["metrics"]["host_cpu_per_unit"]["unit"] == "ms/1000tx"
        assert facts[t]["net"] == n
    assert "vmtaxbr0 10.213.0.1/24 in network namespace net:[" in facts["container:net=bridge"]["bridge"]

    def left() -> list[str]:  # (an exited slirp4netns is reaped by podman's cleanup a moment later)
        out = subprocess.run(
            ["podman", "ps", "-a", "--format", "{{.Names}}", "--filter", f"name=^vmtax-{p.pid}-"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.split()
        return (
            out
            + subprocess.run(["pgrep", "-a", "slirp4netns"], capture_output=True, text=True).stdout.split("\n")[:-1]
            + sorted(namespaces() - before)
        )

    deadline = time.time() + 15
    while left() and time.time() < deadline:
        time.sleep(0.5)
    assert not left()


def test_a_uml_guest_gets_a_ubd_disk_and_leaves_no_image(tmp_path):
    from vmtax.targets.uml import UmlTarget

    ok, why = UmlTarget.available()
    if not ok:
        pytest.skip(why)
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(tmp_path / "u.db"),
        "run",
        "--target",
        "uml:disk=ubd",
        "--bench",
        "disk_randread",
        "--tool-seconds",
        "1",
        "--min-processes",
        "2",
        "--precision",
        "50%",  # a mean, not a narrow one: it may end before its budget
        "--max-time",
        "25s",  # a UML boot and fio's first-use trace come out of it (a fresh cache)
        "--json",
        "-",
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    doc = json.loads(out)
    assert {r["benchmark"]: r for r in doc["results"]}["disk_randread.iops"]["mean"] > 0
    assert doc["targets"][0]["facts"]["disk"] == "ubd"
    assert not left_behind(p.pid)


@pytest.mark.skipif(not QEMU_OK, reason=QEMU_WHY)
@pytest.mark.skipif(not LOOP_OK or TAP_WHY is not None, reason="needs loop devices and a tap (root)")
def test_a_guest_that_hangs_while_booting_leaves_no_image_loop_device_or_tap():
    from vmtax.errors import TargetError
    from vmtax.targets import parse_target

    before = namespaces()
    t = parse_target("qemu:accel=tcg,disk=virtio,backing=block,nic=virtio,net=tap,boot_timeout=0.5")
    with pytest.raises(TargetError, match="did not become ready"):
        with t:
            pass
    wait_until(lambda: not (left_behind(os.getpid()) or namespaces() - before), 10, 0.2)
    assert not left_behind(os.getpid()) and not namespaces() - before  # the tap's namespace went with it


def test_an_a_b_of_two_container_runtimes_names_each_with_its_version(tmp_path):
    """runc against crun (two OCI runtimes: a real A/B) where crun can
    start a container: each target runs its own and says its version."""
    from vmtax import guest
    from vmtax.targets.container import podman_run, podman_works

    ok, why = podman_works()
    if not ok or not shutil.which("crun"):
        pytest.skip(why if not ok else "crun is not installed (make setup installs it)")
    probe = subprocess.run(
        podman_run(shutil.which("crun"))
        + ["--network", "none", "--rootfs", str(guest.rootfs_dir()), "/bin/busybox", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    if probe.returncode != 0:  # seen: "cgroups in hybrid mode not supported" (crun 1.8 on a cgroup v1+v2 host)
        pytest.skip(f"crun cannot start a container here: {(probe.stderr or probe.stdout).strip()[-200:]}")
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(tmp_path / "ab.db"),
        "compare",
        "container:runtime=runc",
        "container:runtime=crun",
        "--bench",
        "getppid",
        "--max-time",
        "15s",
        "--gate",
        "5%",
        "--json",
        "-",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1, 3), p.stderr[-3000:]
    doc = json.loads(p.stdout)
    facts = {t["name"]: t["facts"] for t in doc["targets"]}
    assert facts["container:runtime=runc"]["runtime_version"].startswith("runc version")
    assert facts["container:runtime=crun"]["runtime_version"].startswith("crun version")
    assert doc["gate"]["rows"][0]["candidate"] == "container:runtime=crun"
    assert doc["gate"]["verdict"] in ("pass", "regressed", "inconclusive")


# -- a runtime that hangs (issue 58) ---------------------------------------------------
def _own_podman_names(pid: int) -> list[str]:
    out = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True).stdout
    return [n for n in out.split() if n.startswith(f"vmtax-{pid}-")]


def _sleeping_runtime(tmp_path: Path) -> tuple[Path, Path]:
    """An OCI runtime that answers --version as runc and sleeps on create,
    and the file where it writes its sleep's pid."""
    runtime, pids = tmp_path / "sleeprt", tmp_path / "pids"
    runtime.write_text(
        f'#!/bin/sh\nif [ "$1" = "--version" ]; then exec runc --version; fi\nsleep 100000 & echo $! >> {pids}\nwait\n'
    )
    runtime.chmod(0o755)
    return runtime, pids


def test_a_runtime_hung_on_create_ends_by_the_hard_stop_and_leaves_nothing(tmp_path):
    """An OCI runtime that answers --version and sleeps on create: the
    wait for the container's ready line ends at the run's hard stop
    (--max-time and its grace, 5 s at least), not at the 60 s boot timeout,
    and conmon, the runtime and its sleep are ended with it (conmon leaves
    podman's session: killing podman's client alone left all three)."""
    from vmtax.engine.budget import grace_s
    from vmtax.targets.container import podman_works

    ok, why = podman_works()
    if not ok:
        pytest.skip(why)
    runtime, pids = _sleeping_runtime(tmp_path)
    cmd = [sys.executable, "-m", "vmtax.cli", "--db", str(tmp_path / "t.db"), "run"]
    cmd += ["--target", f"container:runtime={runtime}", "--bench", "getppid", "--max-time", "3s"]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=120)
    took = time.monotonic() - t0
    left = [
        line
        for line in subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout.splitlines()
        if str(runtime) in line and not line.startswith("Z")
    ]
    assert p.returncode == 1, err[-2000:]
    assert "did not become ready" in err and "hard stop" in err, err[-2000:]
    # the hard stop is 3 s + grace from when vmtax began: the run's record, from its start to its end (its
    # targets stopped), holds it and their teardown; the interpreter's start comes before (2.5-6 s here)
    con = sqlite3.connect(tmp_path / "t.db")
    (stored,) = con.execute("SELECT finished - started FROM runs").fetchone()
    con.close()
    assert stored < 3 + grace_s(3) + 2 and took < 40, (stored, took, err[-1000:])
    assert left == [], left
    sleeps = [int(x) for x in pids.read_text().split()] if pids.exists() else []
    assert [pid for pid in sleeps if running(pid)] == []
    assert _own_podman_names(p.pid) == []
    assert left_behind(p.pid) == []


def test_the_conmon_of_a_killed_controllers_hung_runtime_is_swept_by_the_next_run(tmp_path, monkeypatch):
    """vmtax killed outright while a runtime hangs on create: podman's
    client dies with it, conmon and the runtime do not (conmon left
    podman's session), and no list of podman's has the container.  The
    next run's sweep ends them (a conmon named for a controller that is gone)."""
    from vmtax.targets import container, podman

    ok, why = container.podman_works()
    if not ok:
        pytest.skip(why)
    runtime, pids = _sleeping_runtime(tmp_path)
    cmd = [sys.executable, "-m", "vmtax.cli", "--db", str(tmp_path / "t.db"), "run"]
    cmd += ["--target", f"container:runtime={runtime}", "--bench", "getppid", "--max-time", "1m"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: pids.exists(), 60), "the runtime's create never ran"
    finally:
        p.kill()
        p.wait()
    conmons = wait_until(lambda: podman.conmon_pids(lambda n: n.startswith(f"vmtax-{p.pid}-")), 5)
    assert conmons, "no conmon outlived the controller: nothing for the sweep to do"
    monkeypatch.setattr(podman, "_swept", False)
    podman.sweep_containers()
    sleeps = [int(x) for x in pids.read_text().split()]
    assert wait_until(lambda: not any(running(pid) for pid in conmons + sleeps), 5)
    assert left_behind(p.pid, files=False) == []
