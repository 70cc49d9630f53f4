"""The xen target's builders and xentrace's decoder, without Xen: records
made here in Xen's binary format (public/trace.h), and traces recorded by
`make test-xen` in a PV and a PVH domU (tests/data/xentrace-*.bin)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from vmtax import metrics, xentrace
from vmtax.errors import UserError
from vmtax.report import explain
from vmtax.targets import parse_target
from vmtax.targets.xen import domain_config, parse_info, relay_argv
from vmtax.xentrace import MARK_LEAF, Counting, Decoder, xentrace_argv

DATA = Path(__file__).parent / "data"
DOMU, OTHER = 3, 4


def rec(event: int, *extra: int, tsc: int | None = 1000) -> bytes:
    hdr = event | (len(extra) << 28) | ((1 << 31) if tsc is not None else 0)
    return (
        struct.pack("<I", hdr)
        + (struct.pack("<Q", tsc) if tsc is not None else b"")
        + struct.pack(f"<{len(extra)}I", *extra)
    )


def cpu(n: int) -> bytes:
    return rec(xentrace.GEN_CPU_CHANGE, n, 4096, tsc=None)


def running(dom: int) -> bytes:
    return rec(xentrace.SCHED_RUNSTATE | 1 << 8 | 0 << 4, dom << 16)  # runnable (1) to running (0)


def hypercall(op: int) -> bytes:
    return rec(xentrace.PV_HYPERCALL_V2, op, tsc=None)


PV_MARK = rec(xentrace.PV_TRAP | xentrace.FLAG_64, 0x401000, 0, 0)  # rip (64-bit), trapnr 0
HVM_MARK = rec(xentrace.HVM_CPUID, MARK_LEAF, 0, 0, 0, 0, tsc=None)
PF_BOUNCE = rec(0x00201104, 0x1000, 0, 0x2000, 0, 6)


def decode(data: bytes, domid: int | None = DOMU, chunk: int = 7) -> Counting:
    c, d = Counting(1, domid), Decoder()
    for i in range(0, len(data), chunk):  # fed in pieces that split records
        for r in d.feed(data[i : i + chunk]):
            c.add(r)
    return c


def pv_trace(batches: list[int]) -> bytes:
    """An empty window (one iret: the marker's own return), then batches of
    n getppids (an iret each) and n page faults' worth of mmu_updates."""
    out = cpu(1) + running(DOMU) + hypercall(29)  # a sched_op before the first marker: not counted
    out += PV_MARK + hypercall(23) + PV_MARK
    for n in batches:
        out += PV_MARK + hypercall(23) + b"".join(hypercall(23) + hypercall(1) + PF_BOUNCE for _ in range(n))
        out += PV_MARK + hypercall(18)  # the sample's line on the console: between windows
    return out


def test_decoder_reads_records_split_anywhere():
    data = pv_trace([3, 5])
    whole = list(Decoder().feed(data))
    d, pieces = Decoder(), []
    for i in range(0, len(data), 5):
        pieces += list(d.feed(data[i : i + 5]))
    assert [(r.event, r.tsc, r.extra) for r in pieces] == [(r.event, r.tsc, r.extra) for r in whole]
    assert d.buf == b""


def test_windows_less_the_empty_one():
    c = decode(pv_trace([3, 5]))
    assert c.markers == 6
    assert c.per_batch(1) == {
        "hypercalls": 6.0,
        "hypercalls_iret": 3.0,
        "hypercalls_mmu_update": 3.0,
        "xen_pf_bounces": 3.0,
        "exits": 0.0,
        "xen_ptwr_emulations": 0.0,
        "xen_privop_emulations": 0.0,
    }
    assert c.per_batch(2)["hypercalls_iret"] == 5.0
    assert c.per_batch(3) is None  # not marked yet
    assert "hypercalls_console_io" not in c.per_batch(2)  # between the windows


def test_an_open_window_is_not_a_batch():
    c = decode(pv_trace([3])[:-10])  # cut inside the closing marker
    assert c.per_batch(1) is None and c.open


def test_other_domains_on_the_cpu_do_not_count():
    data = cpu(1) + running(DOMU) + PV_MARK + PV_MARK + PV_MARK + hypercall(23)
    data += running(OTHER) + hypercall(15) + hypercall(29) + running(DOMU) + hypercall(23) + PV_MARK
    c = decode(data)
    assert c.per_batch(1)["hypercalls"] == 2.0
    assert decode(data, domid=None).per_batch(1)["hypercalls"] == 4.0


def test_other_cpus_records_do_not_count():
    data = cpu(1) + running(DOMU) + PV_MARK + PV_MARK + PV_MARK + hypercall(23)
    data += cpu(0) + hypercall(1) + hypercall(1) + cpu(1) + PV_MARK
    assert decode(data).per_batch(1)["hypercalls"] == 1.0


def test_lost_records_spoil_their_window():
    data = cpu(1) + PV_MARK + PV_MARK + PV_MARK + rec(xentrace.GEN_LOST, 5, 0) + hypercall(23) + PV_MARK
    assert decode(data).per_batch(1) is None


def test_hvm_exits_by_reason_and_hypercalls():
    exit_ = rec(xentrace.HVM_VMEXIT | xentrace.FLAG_64, 0x72, 0x1000, 0)  # cpuid, rip
    vmmcall = rec(xentrace.HVM_VMMCALL, 29, tsc=None)
    data = cpu(1) + running(DOMU) + exit_ + HVM_MARK + exit_ + HVM_MARK
    data += exit_ + HVM_MARK + b"".join(exit_ + rec(xentrace.HVM_CPUID, 0, 1, 2, 3, 4, tsc=None) for _ in range(4))
    data += rec(xentrace.HVM_VMEXIT | xentrace.FLAG_64, 0x81, 0, 0) + vmmcall + exit_ + HVM_MARK
    got = decode(data).per_batch(1)
    assert got["exits_cpuid"] == 4.0 and got["exits_vmmcall"] == 1.0 and got["exits"] == 5.0
    assert got["hypercalls_sched_op"] == 1.0
    intel = Counting(1, DOMU, vendor="intel")
    for r in Decoder().feed(rec(xentrace.HVM_VMEXIT, 10, 0)):
        assert intel.names(r) == ["exits", "exits_cpuid"]


def test_multicall_subcalls_are_counted_apart():
    data = cpu(1) + PV_MARK + PV_MARK + PV_MARK + hypercall(13) + rec(xentrace.PV_SUBCALL, 14, tsc=None) + PV_MARK
    got = decode(data, domid=None).per_batch(1)
    assert got["hypercalls"] == 1.0 and got["hypercalls_multicall"] == 1.0
    assert got["hypercalls_mc_update_va_mapping"] == 1.0


def test_metric_names_are_known_and_ordered():
    for name in ("hypercalls", "hypercalls_iret", "hypercalls_mc_update_va_mapping", "xen_pf_bounces"):
        assert metrics.known(name), name
        assert metrics.describe(name).side == "host"
    assert metrics.order(["hypercalls_mc_x", "hypercalls_iret", "exits_cpuid", "hypercalls", "exits"]) == [
        "exits",
        "exits_cpuid",
        "hypercalls",
        "hypercalls_iret",
        "hypercalls_mc_x",
    ]
    assert any(row[0] == "hypercalls" for row in explain.ROWS)


def test_xentrace_argv_traces_one_cpu():
    argv = xentrace_argv("xentrace", Path("/tmp/t.bin"), 3)
    assert argv[argv.index("-c") + 1] == "0x8" and argv[argv.index("-e") + 1] == hex(xentrace.EVENT_MASK)
    assert "-D" in argv and argv[-1] == "/tmp/t.bin"


def test_domain_config():
    cfg = domain_config(
        name="vmtax-1-1", type_="pvh", kernel="/boot/vmlinuz", ramdisk="/c/i.gz", mem_mb=256, pcpu=1, tsc_mode="native"
    )
    lines = dict(line.split(" = ", 1) for line in cfg.strip().splitlines())
    assert lines["type"] == '"pvh"' and lines["cpus"] == '"1"' and lines["vcpus"] == "1"
    assert lines["tsc_mode"] == '"native"' and lines["on_crash"] == '"destroy"'
    assert "vmtax.chan=/dev/hvc0" in lines["extra"]
    with pytest.raises(UserError):
        domain_config(name="x", type_="pv", kernel='/a"b', ramdisk="/r", mem_mb=256, pcpu=0, tsc_mode="native")


def test_xl_info_parsed():
    info = parse_info("host                   : dom0\nxen_major              : 4\nxen_extra : .7\nvirt_caps : pv hvm\n")
    assert info == {"host": "dom0", "xen_major": "4", "xen_extra": ".7", "virt_caps": "pv hvm"}


def test_the_relay_copies_both_ways_without_echo_and_destroys_the_domain_at_the_end(tmp_path):
    """The relay on a real pty (its master plays xenconsoled), with stand-ins
    for xenstore-read and xl on PATH: lines cross both ways, nothing is
    echoed, a replaced pty is reopened, and when vmtax's end closes the
    domain is destroyed."""
    import os
    import select
    import subprocess
    import time

    def pty() -> tuple[int, str]:
        master, slave = os.openpty()
        name = os.ttyname(slave)
        os.close(slave)
        return master, name

    m1, p1 = pty()
    (tmp_path / "tty").write_text(p1)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "xenstore-read").write_text(f"#!/bin/sh\ncat {tmp_path / 'tty'}\n")
    (bin_ / "xl").write_text(  # `xl domid` fails: the domain is gone once destroyed
        f'#!/bin/sh\necho "$@" >> {tmp_path / "xl.log"}\n[ "$1" = domid ] && exit 1\nexit 0\n'
    )
    for f in bin_.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}
    r = subprocess.Popen(
        relay_argv("xl", "vmtax-1-1"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )

    def read(fd: int, want: bytes) -> bytes:
        got, deadline = b"", time.monotonic() + 10
        while want not in got and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                got += os.read(fd, 4096)
        return got

    try:
        r.stdin.write(b"/local/domain/7/console/tty\n")  # the domain is made: where its console is
        r.stdin.flush()
        assert read(r.stderr.fileno(), b"ready") == b"xenrelay: ready\n"
        r.stdin.write(b"RUN getppid\n")
        r.stdin.flush()
        assert read(m1, b"RUN getppid\n") == b"RUN getppid\n"  # to the guest, raw: no CR added
        os.write(m1, b"@@VMTAX-READY\n")
        out = read(r.stdout.fileno(), b"READY")
        assert out == b"@@VMTAX-READY\n"  # and back, with no echo of what went in
        m2, p2 = pty()  # xenconsoled replaces the pty
        (tmp_path / "tty").write_text(p2)
        os.close(m1)
        time.sleep(1.0)
        os.write(m2, b"again\n")
        assert read(r.stdout.fileno(), b"again") == b"again\n"
        r.stdin.close()  # vmtax's end closes: it stopped, or was killed
        r.wait(timeout=20)
        calls = (tmp_path / "xl.log").read_text().splitlines()
        assert calls[0] == "destroy vmtax-1-1" and calls.count("domid vmtax-1-1") == 2  # gone, and seen gone twice
    finally:
        if r.poll() is None:
            r.kill()
            r.wait()


@pytest.mark.parametrize(
    "text,why",
    [
        ("xen:type=hvm", "type must be one of pv, pvh"),
        ("xen:tsc_mode=fast", "tsc_mode must be one of"),
        ("xen:mem=64M", "mem must be at least 128M"),
        ("xen:pcpu=-1", "pcpu"),
        ("xen:kernel=/nonexistent/vmlinuz", "does not exist"),
        ("xen:disk=virtio", "unknown option"),
    ],
)
def test_bad_options_are_one_line(text, why):
    with pytest.raises(UserError, match=why):
        parse_target(text)


def test_a_xen_target_marks_its_counted_batches():
    from vmtax.engine.protocol import agent_argv
    from vmtax.model import BenchSpec

    t = parse_target("xen:type=pv")
    spec = BenchSpec("getppid", "kernel", "ns", "lower", "")
    assert "--trace-marks" in agent_argv(t, spec, warmup=1, count_settle_ms=500)
    assert "--trace-marks" not in agent_argv(t, spec, warmup=1, samples=2)
    assert "--trace-marks" not in agent_argv(parse_target("local"), spec, warmup=1, count_settle_ms=0)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("xentrace-*.bin.gz")))
def test_recorded_traces(name):
    """Traces recorded by make test-xen (VMTAX_XENTRACE_KEEP) in a PV and a
    PVH domU of Xen 4.17 nested in TCG, cut after the first counted batch,
    and what they must say (tests/data/xentrace.json: the batch's
    operations, and each count per op's range)."""
    import gzip
    import json

    want = json.loads((DATA / "xentrace.json").read_text())[name]
    c = Counting(want["cpu"], want["domid"], want.get("vendor", "amd"))
    for r in Decoder().feed(gzip.decompress((DATA / name).read_bytes())):
        c.add(r)
    got = c.per_batch(1)
    assert got is not None
    for key, (lo, hi) in want["per_op"].items():
        assert lo <= got.get(key, 0.0) / want["ops"] <= hi, (key, got.get(key), want["ops"])
