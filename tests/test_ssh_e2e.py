"""The ssh target and a fleet, against real sshd servers: one on loopback,
two in network namespaces standing in for other hosts (tests/sshfleet.py).
Every test checks that nothing it started is left running: no ssh client
or control master, and (at the end of the module) no sshd, no namespace."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers import closed_port, leftovers, stored, vmtax_process, wait_samples, wait_until
from sshfleet import PRIVSEP, Fleet, _sshd_running, netns_works
from vmtax.agent import agent_hash
from vmtax.errors import TargetError
from vmtax.targets import parse_target
from vmtax.targets.sshlink import remote_command

pytestmark = pytest.mark.e2e

NETNS_OK, NETNS_WHY = netns_works()
needs_netns = pytest.mark.skipif(not NETNS_OK, reason=NETNS_WHY)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with Fleet(tmp_path_factory.mktemp("fleet"), with_netns=NETNS_OK) as f:
        yield f
    assert not [s for s in f.servers.values() if s.p is not None]
    assert not _lines(["ip", "netns", "list"], f"vmtax-t{os.getpid()}-")
    assert not _lines(["ip", "-o", "link"], f"vt{os.getpid()}")
    assert not f.made_privsep or not PRIVSEP.exists() or _sshd_running()  # /run/sshd: ours removed


def _lines(argv, marker):
    out = subprocess.run(argv, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "pgrep" not in line]


@pytest.fixture(autouse=True)
def nothing_left():
    yield
    assert wait_until(lambda: not leftovers("vmtax-ssh-", defunct=True), 5), "an ssh client or control master was left"


def results(path: Path) -> dict[tuple[str, str], dict]:
    return {(r["target"], r["benchmark"]): r for r in json.loads(path.read_text())["results"]}


QUICK = ["--bench", "getppid", "--max-time", "4s", "--min-processes", "3", "--precision", "50%"]


def test_a_remote_runs_the_agent_copied_once_by_its_hash(fleet, tmp_path):
    lo = fleet.servers["lo"]
    out = tmp_path / "r.json"
    p = vmtax_process("run", "--target", lo.target(), *QUICK, "--json", str(out), db=tmp_path / "v.db")
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    facts = doc["targets"][0]["facts"]
    assert facts["target_kind"] == "ssh" and facts["agent_copied"] is True
    assert facts["hostname"] and facts["tmpdir_fs"] == "tmpfs" and facts["ssh_port"] == lo.port
    row = results(out)[(doc["targets"][0]["name"], "getppid")]
    assert row["n"] >= 3 and row["mean"] > 0
    cached = lo.cache / "vmtax" / f"agent-{agent_hash()}"
    before = cached.stat()
    # the second time: the agent is there with the right hash, so nothing is copied
    t = parse_target(lo.target())
    with t:
        assert t.facts()["agent_copied"] is False
        lines = list(t.run_agent(["run", "getppid", "--samples", "1", "--warmup", "0"], 30))
        assert any('"sample"' in line for line in lines)
    after = cached.stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    # a damaged copy is replaced, not run
    cached.write_bytes(b"#!/bin/sh\necho not the agent\n")
    with parse_target(lo.target()) as t:
        assert t.facts()["agent_copied"] is True and t.facts()["agent_version"]
    assert (lo.cache / "vmtax").is_dir() and not [f for f in os.listdir(lo.cache / "vmtax") if f.startswith(".")]


def test_what_the_remote_shell_gets_is_single_quoted_words(fleet):
    """Arguments reach the remote program as they were, whatever they hold:
    the remote login shell parses single-quoted words only."""
    nasty = ["a b", "'", '"', "$(touch /tmp/pwned-vmtax)", "`id`", "; exit 3", "*", "~", "$HOME", "", "-n"]
    t = parse_target(fleet.servers["lo"].target())
    with t:
        argv = t.ssh_argv("-o", "ControlMaster=no") + [remote_command('printf "%s|" "$@"', nasty)]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "".join(f"{a}|" for a in nasty)
    assert not os.path.exists("/tmp/pwned-vmtax")


CASES = {
    "wrong host key": "is not the one",
    "unknown host key": "is not in",
    "authentication": "authentication failed",
    "unreachable": "Connection refused",
}


def _case_target(fleet, tmp_path, case: str) -> str:
    lo = fleet.servers["lo"]
    (tmp_path / "empty").write_text("")
    return {
        "wrong host key": lo.target(known_hosts=str(fleet.wrong_known_hosts("lo"))),
        "unknown host key": lo.target(known_hosts=str(tmp_path / "empty")),
        "authentication": lo.target(key=str(fleet.other_key)),
        "unreachable": lo.target(port=str(closed_port())),
    }[case]


@pytest.mark.parametrize("case", list(CASES))
def test_a_host_that_cannot_be_used_says_why_in_one_line(fleet, tmp_path, case):
    t = parse_target(_case_target(fleet, tmp_path, case))
    with pytest.raises(TargetError) as e:
        with t:
            pass
    assert CASES[case] in str(e.value) and "\n" not in str(e.value)
    assert t.master is None and t.workdir is None  # stopped: nothing left


def test_the_cli_says_it_in_one_line_without_a_traceback(fleet, tmp_path):
    p = vmtax_process(
        "run", "--target", _case_target(fleet, tmp_path, "wrong host key"), *QUICK, db=tmp_path / "v.db", timeout=60
    )
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    lines = [line for line in p.stderr.splitlines() if line.startswith("vmtax: ssh:")]
    assert len(lines) == 1 and CASES["wrong host key"] in lines[0], p.stderr


def test_accept_new_trusts_a_first_key_and_writes_it(fleet, tmp_path):
    known = tmp_path / "kh"
    with parse_target(fleet.servers["lo"].target(known_hosts=str(known), accept_new="yes")) as t:
        assert t.facts()["target_kind"] == "ssh"
    assert known.read_text().strip()  # now known: the default (strict) checking passes
    with parse_target(fleet.servers["lo"].target(known_hosts=str(known))) as t:
        assert t.facts()["hostname"]


INVENTORY_YAML = """\
all:
  vars:
    ansible_user: root
    ansible_ssh_private_key_file: {key}
  children:
    bench:
      hosts:
        a: {{ansible_host: {a}, vmtax_known_hosts: {kh_a}, vmtax_machine: host-a}}
        b: {{ansible_host: {b}, vmtax_known_hosts: {kh_b}, vmtax_machine: host-b}}
"""


@needs_netns
def test_compare_local_with_two_hosts_of_an_inventory_into_postgresql(fleet, tmp_path, pg_url):
    """The two namespaces stand in for two machines (vmtax_machine says so:
    one kernel runs them all here): their processes run at the same time,
    the local ones one at a time, and every sample is stored, in a real
    PostgreSQL server (conftest's pg_server)."""
    import psycopg

    a, b = fleet.servers["a"], fleet.servers["b"]
    inv = tmp_path / "fleet.yml"
    inv.write_text(
        INVENTORY_YAML.format(key=fleet.user_key, a=a.address, b=b.address, kh_a=a.known_hosts, kh_b=b.known_hosts)
    )
    out = tmp_path / "c.json"
    p = vmtax_process(
        "compare",
        "local",
        "@bench",
        "--inventory",
        str(inv),
        "--bench",
        "getppid",
        "null_read",
        "--max-time",
        "5s",
        "--min-processes",
        "4",
        "--precision",
        "50%",
        "--json",
        str(out),
        db=pg_url,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert [t["name"] for t in doc["targets"]] == ["local", "ssh:a", "ssh:b"]
    assert [t["facts"]["hostname"] for t in doc["targets"][1:]] == ["host-a", "host-b"]
    rows = results(out)
    for target in ("local", "ssh:a", "ssh:b"):
        for bench in ("getppid", "null_read"):
            assert rows[(target, bench)]["n"] >= 4, (target, bench)
    with psycopg.connect(pg_url) as db:
        spans = db.execute("SELECT target, started, ended FROM processes WHERE block >= 0").fetchall()
        stored = db.execute("SELECT count(*) FROM samples WHERE warmup = 0 AND counting = 0").fetchone()[0]
    assert stored == sum(r["n"] for r in rows.values())
    by = {t: [(s, e) for n, s, e in spans if n == t] for t in ("local", "ssh:a", "ssh:b")}
    assert _overlaps(by["ssh:a"], by["ssh:b"]) > 0  # two machines at once
    assert _overlaps(by["local"], by["ssh:a"]) > 0
    # no two processes of one machine ever at once
    assert all(_overlaps(by[t], by[t], same=True) == 0 for t in by)


def _overlaps(xs, ys, same=False) -> int:
    return sum(
        1
        for i, (s1, e1) in enumerate(xs)
        for j, (s2, e2) in enumerate(ys)
        if not (same and i == j) and s1 < e2 and s2 < e1
    )


@needs_netns
def test_hosts_on_one_kernel_one_at_a_time_and_one_that_cannot_log_in(fleet, tmp_path):
    """Without vmtax_machine, the namespaces' boot id is this machine's:
    they share its CPUs, so nothing runs at the same time.  A host whose
    login fails is recorded as failed, and the others are measured (an
    INI inventory)."""
    a, b = fleet.servers["a"], fleet.servers["b"]
    inv = tmp_path / "hosts"
    inv.write_text(
        f"[bench]\na ansible_host={a.address} vmtax_known_hosts={a.known_hosts}\n"
        f"b ansible_host={b.address} vmtax_known_hosts={b.known_hosts}\n"
        f"c ansible_host={b.address} vmtax_known_hosts={b.known_hosts} "
        f"ansible_ssh_private_key_file={fleet.other_key}\n\n"
        f"[bench:vars]\nansible_user=root\nansible_ssh_private_key_file={fleet.user_key}\n"
    )
    db, out = tmp_path / "v.db", tmp_path / "c.json"
    p = vmtax_process("compare", "@a", "@b", "@c", "--inventory", str(inv), *QUICK, "--json", str(out), db=db)
    assert p.returncode == 3, p.stderr
    assert "Traceback" not in p.stderr
    assert [
        line
        for line in p.stderr.splitlines()
        if "ssh:c: authentication failed" in line and "measuring the others" in line
    ]
    rows = results(out)
    assert rows[("ssh:a", "getppid")]["n"] >= 3 and rows[("ssh:b", "getppid")]["n"] >= 3
    assert rows[("ssh:c", "getppid")]["stopped_by"] == "error"
    assert "authentication failed" in rows[("ssh:c", "getppid")]["reason"]
    spans = sqlite3.connect(db).execute("SELECT started, ended FROM processes WHERE block >= 0").fetchall()
    assert len(spans) >= 6 and _overlaps(spans, spans, same=True) == 0


@needs_netns
def test_a_host_that_dies_mid_run_is_recorded_and_the_others_kept(fleet, tmp_path):
    a, b = fleet.servers["a"], fleet.servers["b"]
    db, out = tmp_path / "v.db", tmp_path / "c.json"
    ta = a.target(machine="host-a")
    tb = b.target(machine="host-b")
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(db),
        "compare",
        "local",
        ta,
        tb,
        "--bench",
        "getppid",
        "null_read",
        "--max-time",
        "8s",  # the hosts' starts are in it: on a loaded host 3 s measured one benchmark or none
        "--min-processes",
        "3",
        "--precision",
        "0.01%",
        "--json",
        str(out),
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = threading.Event()

    def kill_b_once_it_measured():
        if wait_until(lambda: stored(db, "target = ?", (tb,)) >= 4, 30, 0.05):
            b.kill()
            killed.set()

    watcher = threading.Thread(target=kill_b_once_it_measured)
    watcher.start()
    try:
        _stdout, stderr = p.communicate(timeout=90)
    finally:
        watcher.join()
        b.start()  # the host comes back for the tests after this one
    assert killed.is_set(), "host b never measured"
    assert p.returncode == 3, stderr
    assert "Traceback" not in stderr
    rows = results(out)
    assert rows[("local", "getppid")]["n"] > 0 and rows[(ta, "getppid")]["n"] > 0
    assert rows[("local", "null_read")]["n"] > 0 and rows[(ta, "null_read")]["n"] > 0
    failed = [rows[(tb, bench)] for bench in ("getppid", "null_read")]
    assert any(r["stopped_by"] == "error" for r in failed)
    assert all("connection" in r["reason"] for r in failed if r["stopped_by"] == "error"), failed


@needs_netns
def test_sigkill_of_the_controller_leaves_no_ssh_behind(fleet, tmp_path):
    db = tmp_path / "v.db"
    a = fleet.servers["a"]
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(db),
        "run",
        "--target",
        a.target(),
        "--bench",
        "getppid",
        "--max-time",
        "1m",
        "--precision",
        "0.001%",
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_samples(db, 3, 30, proc=p)
    assert leftovers(f"vmtax-ssh-{p.pid}-", defunct=True), "no control master seen"
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    assert wait_until(lambda: not leftovers(f"vmtax-ssh-{p.pid}-", defunct=True), 10)
    # nor an agent on the host, once it has written its next line into the closed session
    assert wait_until(lambda: _lines(["ip", "netns", "pids", a.netns], "") == _sshd_only(a), 10)
    # its private directory (the control socket's) is left, and the next run's start() sweeps it
    import tempfile

    from vmtax import proc

    mine = f"vmtax-ssh-{p.pid}-"
    assert [d for d in os.listdir(tempfile.gettempdir()) if d.startswith(mine)]
    proc.sweep()
    assert not [d for d in os.listdir(tempfile.gettempdir()) if d.startswith(mine)]


def _sshd_only(server) -> list[str]:
    return [str(server.p.pid)]
