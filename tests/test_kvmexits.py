"""VM exits by reason (kvmexits.py), where no KVM runs a guest: the reasons
read from the kvm_exit tracepoint formats of real kernels (Debian's 6.1, in
the KVM rig's outer guest, and this project's hosts' 6.18), the counts'
arithmetic, the real kernel's filters where it has the tracepoint, KVM's
total from a real QEMU's query-stats reply, and how explain shows them.
Against a real KVM: tests/test_kvm.py (make test-kvm)."""

import json
import os
import socket
import threading
from pathlib import Path

import pytest

from vmtax import hostprobe, kvmexits, perfevent
from vmtax.kvmexits import SVM, VMX

DATA = Path(__file__).parent / "data"
FORMATS = ["kvm_exit-6.1.format", "kvm_exit-6.18.format"]


@pytest.mark.parametrize("name", FORMATS)
def test_exit_reasons_come_from_the_kernels_own_tables(name):
    table = kvmexits.reasons((DATA / name).read_text())
    svm, vmx = table[SVM], table[VMX]
    assert (svm["cpuid"], svm["hlt"], svm["io"], svm["msr"], svm["npf"]) == (0x72, 0x78, 0x7B, 0x7C, 0x400)
    assert svm["pf_excp"] == 0x40 + 14  # "{ 0x040 + 14, "PF excp" }": an expression, named as a key
    assert (vmx["cpuid"], vmx["hlt"], vmx["io_instruction"], vmx["ept_violation"]) == (10, 12, 30, 48)
    assert -1 not in svm.values() and "invalid_guest_state" not in svm  # "{ -1, ... }": no code a filter takes
    for isa in (SVM, VMX):  # what is counted one by one is in the table (else it would count as other)
        missing = set(kvmexits.COUNTED[isa]) - set(table[isa])
        assert missing <= {"idle_halt"}, missing


def test_a_format_without_tables_names_no_reason():
    assert kvmexits.reasons("") == {}
    assert kvmexits.reasons('print fmt: "vcpu %u", REC->vcpu_id') == {}


def test_the_counts_add_up_and_the_rest_is_other(monkeypatch):
    c = object.__new__(kvmexits.ExitCounter)
    c.fds = {"_total": [1, 2], "exits_cpuid": [3, 4], "exits_hlt": [5, 6]}
    values = {1: 700.0, 2: 300.0, 3: 500.0, 4: 250.0, 5: 10.0, 6: 0.0}
    monkeypatch.setattr(kvmexits, "perf_read", values.get)
    got = c.read()
    assert got == {"exits": 1000.0, "exits_cpuid": 750.0, "exits_hlt": 10.0, "exits_other": 240.0}
    values[1] = 0.0  # never below zero, whatever a race between the reads gives
    assert c.read()["exits_other"] == 0.0


def test_without_a_hardware_kvm_no_exit_is_counted_by_reason_and_the_facts_say_why(monkeypatch):
    real = os.path.isdir
    monkeypatch.setattr(
        kvmexits.os.path, "isdir", lambda p: False if p in ("/sys/module/kvm_amd", "/sys/module/kvm_intel") else real(p)
    )
    with pytest.raises(OSError, match="no kvm_amd or kvm_intel module"):
        kvmexits.ExitCounter([os.getpid()])
    p = hostprobe.HostProbe(lambda: [os.getpid()], vcpu_tids=[os.getpid()])
    try:
        assert p.kvm is None and "no kvm_amd or kvm_intel" in p.missing["exits_by_reason"]
        assert "exits_by_reason: no kvm_amd" in p.facts()["host_probe_missing"]
        assert "exits" not in p.read()
    finally:
        p.close()


def test_the_kernel_takes_the_filters_and_every_counter_closes(monkeypatch):
    """On a kernel with the kvm:kvm_exit tracepoint (this project's hosts
    have it, under kvm_pvm), as root: one counter per reason and thread,
    each with its filter set by the kernel (a wrong field name is EINVAL),
    none counting this thread, and none left open."""
    if os.geteuid() != 0:
        pytest.skip("perf on a tracepoint needs root")
    found, why = perfevent.read_tracefs("events/kvm/kvm_exit/id")
    if found is None:
        pytest.skip(f"no kvm:kvm_exit tracepoint here: {why}")
    for isa in (SVM, VMX):
        monkeypatch.setattr(kvmexits, "host_isa", lambda isa=isa: (isa, ""))
        before = set(os.listdir("/proc/self/fd"))
        c = kvmexits.ExitCounter([os.getpid(), threading.get_native_id()])
        try:
            assert len(c.reasons) == len(kvmexits.COUNTED[isa])
            assert all(len(fds) == 2 for fds in c.fds.values())
            c.enable()
            os.getppid()
            c.disable()
            assert c.read() == {"exits": 0.0, **{f"exits_{r}": 0.0 for r in c.reasons}, "exits_other": 0.0}
            assert "kvm:kvm_exit" in c.describe()
        finally:
            c.close()
        assert set(os.listdir("/proc/self/fd")) == before
    c = kvmexits.ExitCounter([os.getpid()], counted=())  # the total alone
    try:
        with pytest.raises(OSError, match="filter 'no_such_field == 1'"):
            c._open("x", os.getpid(), int(found[0]), "no_such_field == 1")
    finally:
        c.close()


def qmp_server(path: str, replies: list[dict]) -> threading.Thread:
    """A QMP monitor that answers as QEMU does: its greeting, then one
    reply per command, in order, and events between them."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        with conn, conn.makefile("rwb") as f:
            f.write(b'{"QMP": {"version": {}, "capabilities": ["oob"]}}\n')
            f.flush()
            for reply in replies:
                if "event" not in reply:  # an event comes unasked, before the reply
                    f.readline()
                f.write(json.dumps(reply).encode() + b"\n")
                f.flush()
        srv.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_kvm_s_own_total_is_read_from_query_stats_and_nothing_else(tmp_path):
    """A real reply of QEMU 7.2 under KVM (one vCPU; here twice, as two):
    `exits` summed, its `<kind>_exits` counters not taken for reasons."""
    real = json.loads((DATA / "query-stats-vcpu.json").read_text())
    one = real["return"][0]
    exits = next(s["value"] for s in one["stats"] if s["name"] == "exits")
    two = {"return": [one, {**one, "qom-path": "/machine/unattached/device[1]"}]}
    t = qmp_server(str(tmp_path / "qmp.sock"), [{"return": {}}, {"event": "RESUME"}, two])
    q = hostprobe.Qmp(str(tmp_path / "qmp.sock"))
    try:
        assert q.vcpu_exits() == {"exits": 2.0 * exits}
    finally:
        q.close()
        t.join(5)


def test_explain_shows_the_reasons_met_and_reads_the_main_one(monkeypatch):
    import reportdata
    from vmtax.analysis import analyse
    from vmtax.report import explain

    monkeypatch.setitem(
        reportdata.COUNTS,
        "qemu:accel=kvm",
        {
            "syscalls": 1.0,
            "task_clock_ns": 120.0,
            "host_cpu_ns": 150.0,
            "host_cpu_user_ns": 20.0,
            "host_cpu_sys_ns": 130.0,
            "host_context_switches": 0.0,
            "host_syscalls": 0.02,
            "exits": 1.04,
            "exits_cpuid": 1.0,
            "exits_msr": 0.03,
            "exits_npf": 0.0,
            "exits_other": 0.01,
            "exits_userspace": 3.0,
        },
    )
    data = reportdata.run(names=("local", "qemu:accel=kvm"), counts=True)
    blocks = explain.view(data, *analyse(data))
    b = next(b for b in blocks if b.benchmark == "getppid")
    keys = [k for k, *_ in b.rows]
    assert {"exits", "exits_cpuid", "exits_msr", "exits_other", "exits_userspace"} <= set(keys)
    assert "exits_npf" not in keys  # no target met one: no row
    assert any("VM exits per op, mostly cpuid" in r for r in b.readings), b.readings  # not "userspace"


def test_the_agent_waits_for_a_slow_host_before_its_counted_batch():
    """The pause between the agent's "counting" line and its batch: the
    channel's own 20 ms, or twice a PING's round trip and a probe reading
    where the host is slower (vmtax under TCG: 165-241 ms), capped."""
    import time
    from types import SimpleNamespace

    from vmtax.targets.channel import ChannelTarget

    class Guest:  # what settle_for_the_host uses of a started channel target
        count_settle_ms = ChannelTarget.count_settle_ms
        PINGS, MAX_SETTLE_MS = ChannelTarget.PINGS, ChannelTarget.MAX_SETTLE_MS
        settle_for_the_host = ChannelTarget.settle_for_the_host

        def __init__(self, ping_s: float):
            self.pings = []
            self.host_probe = SimpleNamespace(enable=lambda: None, read=lambda: {}, disable=lambda: None)
            self.channel = SimpleNamespace(command=lambda line, timeout: self._answer(line, ping_s))

        def _answer(self, line, ping_s):
            self.pings.append(line)
            time.sleep(ping_s)
            return iter(())

    fast, slow = Guest(0.0), Guest(0.06)
    assert fast.settle_for_the_host() == 20 and fast.pings == ["PING"] * 3
    assert 120 <= slow.settle_for_the_host() < 400
    slow.MAX_SETTLE_MS = 100
    assert slow.settle_for_the_host() == 100
