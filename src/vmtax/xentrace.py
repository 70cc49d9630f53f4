"""What a Xen guest costs its hypervisor per operation: hypercalls by type,
the PV events Xen handles on the guest's behalf (#PF bounces, emulated
page-table writes, emulated privileged instructions) and an HVM guest's VM
exits by reason, from xentrace's binary records of the guest's physical CPU.

xentrace (Xen's own tracer, run in dom0) records every PV entry into Xen,
every HVM exit and hypercall, and the scheduler's runstate changes, with the
TSC.  It cannot be read as a counter at an instant, so the window that is
counted is drawn in the trace itself: the agent, with --trace-marks, puts a
marker right before and right after each counted batch (a #DE that a PV
guest's trap bounces through Xen, a CPUID of leaf MARK_LEAF that an HVM
guest's exit traces with its leaf), and two more before the first batch, an
empty window whose counts (the markers' own cost) are taken from each
batch's.  Only records of the guest's own domain count (the runstate
changes say which domain runs on the CPU).  Counting never runs during a
timed sample: xentrace is started for a counting process and stopped after
it (XenTraceProbe).

The record format and event numbers are Xen's public trace.h (4.x).
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

MARK_LEAF = 0x564D5458  # agent/harness.h TRACE_MARK_LEAF ("VMTX")
# trace classes: PV (0x0020), HVM (0x0008), the scheduler (0x0002); sub-classes 1 and 2 of each
# (PV entries and multicall sub-calls, HVM exits and handlers, runstate changes)
EVENT_MASK = 0x002A3000
DOMID_IDLE = 0x7FFF
# counted whether or not a window met one: a count of none is a figure too
ALWAYS = ("hypercalls", "exits", "xen_pf_bounces", "xen_ptwr_emulations", "xen_privop_emulations")

GEN_LOST = 0x0001F001
GEN_CPU_CHANGE = 0x0001F003
SCHED_RUNSTATE = 0x00021001
RUNSTATE_MASK = 0xFFFFF00F
PV_HYPERCALL_V2 = 0x0020100D
PV_SUBCALL = 0x0020200E
PV_TRAP = 0x00201003
HVM_VMEXIT = 0x00081002
HVM_CPUID = 0x0008200E
HVM_VMMCALL = 0x00082012
FLAG_64 = 0x100
FLAG_NESTED = 0x400

# PV events counted by name, beside the hypercalls (their 32- and 64-bit records alike)
PV_EVENTS = {
    0x00201004: "xen_pf_bounces",
    0x00201005: "xen_forced_invalid_ops",
    0x00201006: "xen_privop_emulations",
    0x00201008: "xen_math_state_restores",
    0x00201009: "xen_paging_fixups",
    0x0020100A: "xen_gdt_ldt_faults",
    0x0020100B: "xen_ptwr_emulations",
    0x0020100C: "xen_ptwr_emulations",
}

HYPERCALLS = {
    0: "set_trap_table",
    1: "mmu_update",
    2: "set_gdt",
    3: "stack_switch",
    4: "set_callbacks",
    5: "fpu_taskswitch",
    6: "sched_op_compat",
    7: "platform_op",
    8: "set_debugreg",
    9: "get_debugreg",
    10: "update_descriptor",
    12: "memory_op",
    13: "multicall",
    14: "update_va_mapping",
    15: "set_timer_op",
    16: "event_channel_op_compat",
    17: "xen_version",
    18: "console_io",
    19: "physdev_op_compat",
    20: "grant_table_op",
    21: "vm_assist",
    22: "update_va_mapping_otherdomain",
    23: "iret",
    24: "vcpu_op",
    25: "set_segment_base",
    26: "mmuext_op",
    27: "xsm_op",
    28: "nmi_op",
    29: "sched_op",
    30: "callback_op",
    31: "xenoprof_op",
    32: "event_channel_op",
    33: "physdev_op",
    34: "hvm_op",
    35: "sysctl",
    36: "domctl",
    37: "kexec_op",
    38: "tmem_op",
    39: "argo_op",
    40: "xenpmu_op",
    41: "dm_op",
    42: "hypfs_op",
}

# VM exit reasons by vendor, in the names KVM's tracepoint uses (kvmexits.py) where it has one
SVM_EXITS = {
    0x40 + 14: "pf",
    0x60: "interrupt",
    0x61: "nmi",
    0x64: "vintr",
    0x6E: "rdtsc",
    0x72: "cpuid",
    0x77: "pause",
    0x78: "hlt",
    0x79: "invlpg",
    0x7B: "io",
    0x7C: "msr",
    0x81: "vmmcall",
    0x87: "rdtscp",
    0x89: "wbinvd",
    0x8D: "xsetbv",
    0x400: "npf",
}
VMX_EXITS = {
    0: "exception_nmi",
    1: "external_interrupt",
    7: "interrupt_window",
    10: "cpuid",
    12: "hlt",
    16: "rdtsc",
    18: "vmcall",
    28: "cr_access",
    30: "io_instruction",
    31: "msr_read",
    32: "msr_write",
    40: "pause_instruction",
    48: "ept_violation",
    49: "ept_misconfig",
    52: "preemption_timer",
}


@dataclass
class Record:
    event: int
    tsc: int | None
    extra: tuple[int, ...]


class Decoder:
    """xentrace's binary stream, fed in chunks of any size: a record is a
    header word (event: 28 bits, count of extra words: 3, TSC present: 1),
    the TSC (8 bytes) where present, then the extra words."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> Iterator[Record]:
        buf = self.buf + data
        i, n = 0, len(buf)
        while i + 4 <= n:
            (hdr,) = struct.unpack_from("<I", buf, i)
            words, has_tsc = (hdr >> 28) & 7, hdr >> 31
            size = 4 + 8 * has_tsc + 4 * words
            if i + size > n:
                break
            tsc = struct.unpack_from("<Q", buf, i + 4)[0] if has_tsc else None
            extra = struct.unpack_from(f"<{words}I", buf, i + 4 + 8 * has_tsc)
            yield Record(hdr & 0x0FFFFFFF, tsc, extra)
            i += size
        self.buf = buf[i:]


def exit_name(reason: int, vendor: str) -> str:
    table = VMX_EXITS if vendor == "intel" else SVM_EXITS
    return table.get(reason, "other")


@dataclass
class Window:
    counts: Counter = field(default_factory=Counter)
    lost: bool = False


class Counting:
    """Records of one physical CPU in, windows between the agent's markers
    out: windows[0] the empty one, windows[k] the k-th counted batch.
    `domid`: the guest whose records count (None: every domain's)."""

    def __init__(self, cpu: int, domid: int | None = None, vendor: str = "amd"):
        self.cpu, self.domid, self.vendor = cpu, domid, vendor
        self.on_cpu: int | None = None  # the CPU whose records follow (xentrace's CPU-change records)
        self.running: int | None = None  # the domain running there (None: not known yet)
        self.markers = 0
        self.windows: list[Window] = []
        self.lost = 0

    @property
    def open(self) -> bool:
        return self.markers % 2 == 1

    def add(self, r: Record) -> None:
        ev = r.event
        if ev == GEN_CPU_CHANGE:
            self.on_cpu = r.extra[0] & 0xFFFF if r.extra else None
            return
        if self.on_cpu is not None and self.on_cpu != self.cpu:
            return
        if ev == GEN_LOST:
            self._lost()
            return
        if ev & RUNSTATE_MASK == SCHED_RUNSTATE and r.extra:
            self._runstate(r)
            return
        if self.domid is not None and self.running is not None and self.running != self.domid:
            return
        if self._is_marker(r):
            self.markers += 1
            if self.open:
                self.windows.append(Window())
            return
        if self.open:
            for name in self.names(r):
                self.windows[-1].counts[name] += 1

    def _lost(self) -> None:
        """Records lost: the window open now counts as partial."""
        self.lost += 1
        if self.open:
            self.windows[-1].lost = True

    def _runstate(self, r: Record) -> None:
        """A domain's runstate change on this CPU (the states are in the event: old << 8, new << 4)."""
        dom, new = (r.extra[0] >> 16) & 0xFFFF, (r.event >> 4) & 3
        if new == 0:  # RUNSTATE_running
            self.running = dom
        elif self.running == dom:
            self.running = DOMID_IDLE

    def _is_marker(self, r: Record) -> bool:
        base = r.event & ~FLAG_64
        if base == PV_TRAP and r.extra:
            vector = r.extra[-1] & 0x7FFF  # trapnr:15 in the last word (after the 32- or 64-bit EIP)
            return vector == 0
        return (r.event & ~FLAG_NESTED) == HVM_CPUID and bool(r.extra) and r.extra[0] == MARK_LEAF

    def names(self, r: Record) -> list[str]:
        """The metrics one record counts toward (metrics.py names them)."""
        ev = r.event
        if ev == PV_HYPERCALL_V2 and r.extra:
            return ["hypercalls", f"hypercalls_{HYPERCALLS.get(r.extra[0] & 0xFFFFF, 'other')}"]
        if ev == PV_SUBCALL and r.extra:
            return [f"hypercalls_mc_{HYPERCALLS.get(r.extra[0] & 0xFFFFF, 'other')}"]
        base = ev & ~FLAG_64
        if base in PV_EVENTS:
            return [PV_EVENTS[base]]
        if base == PV_TRAP:
            return ["xen_trap_bounces"]
        hvm = ev & ~FLAG_NESTED & ~FLAG_64
        if hvm == HVM_VMEXIT and r.extra:
            return ["exits", f"exits_{exit_name(r.extra[0], self.vendor)}"]
        if hvm == HVM_VMMCALL and r.extra:
            return ["hypercalls", f"hypercalls_{HYPERCALLS.get(r.extra[0] & 0xFFFFF, 'other')}"]
        return []

    def batches(self) -> list[Window]:
        """The counted batches' windows whose closing marker has been seen."""
        closed = self.markers // 2
        return self.windows[1:closed]

    def per_batch(self, k: int) -> dict[str, float] | None:
        """Counts of batch k (1-based) less the empty window's, never below
        zero; None where a record was lost in either."""
        if k < 1 or self.markers < 2 * (k + 1):
            return None
        w, empty = self.windows[k], self.windows[0]
        if w.lost or empty.lost:
            return None
        keys = set(w.counts) | set(empty.counts) | set(ALWAYS)
        return {key: float(max(0, w.counts[key] - empty.counts[key])) for key in keys}


def xentrace_argv(binary: str, path: Path, cpu: int) -> list[str]:
    """xentrace on one physical CPU, the events EVENT_MASK names, its
    buffers polled every 10 ms, the records of before it started dropped."""
    return [binary, "-D", "-e", hex(EVENT_MASK), "-c", hex(1 << cpu), "-S", "256", "-s", "10", str(path)]


class XenTraceProbe:
    """A Xen guest's host probe (the HostProbe interface the engine reads,
    hostprobe.py): enable() starts xentrace on the guest's physical CPU,
    read() gives the counts of the counted batches whose windows have
    closed so far (cumulative, so a difference of two readings is one
    batch's), disable() stops it.  The k-th read() after enable() waits
    until the (k-1)-th batch's closing marker is in the trace."""

    WAIT_S = 5.0  # for a batch's closing marker to reach the trace file, and for xentrace to start

    def __init__(self, binary: str, workdir: Path, cpu: int, domid: int, vendor: str):
        self.binary, self.workdir, self.cpu, self.domid, self.vendor = binary, workdir, cpu, domid, vendor
        self.p: subprocess.Popen | None = None
        self.missing: dict[str, str] = {}
        self.idle: dict[str, float] = {}
        self.pids: list[int] = []
        self._reset()

    def _reset(self) -> None:
        self.decoder, self.reads = Decoder(), 0
        self.counting: Counting | None = None
        self.f: BinaryIO | None = None
        self.total: Counter = Counter()
        self.summed = 0

    @property
    def path(self) -> Path:
        return self.workdir / "xentrace.bin"

    def refresh(self) -> None:
        """Nothing to find: the guest has no host processes of its own."""

    def enable(self) -> None:
        self.disable()
        self._reset()
        self.path.unlink(missing_ok=True)
        self.counting = Counting(self.cpu, self.domid, self.vendor)
        try:
            with open(self.workdir / "xentrace.log", "ab") as log:
                self.p = subprocess.Popen(
                    xentrace_argv(self.binary, self.path, self.cpu),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
        except OSError as e:
            self.missing["hypercalls"] = f"xentrace: {e.strerror or e}"
            self.p = None
            return
        deadline = time.monotonic() + self.WAIT_S
        while time.monotonic() < deadline:  # tracing once it has written: the guest's CPU always has records
            if self.p.poll() is not None:
                self.missing["hypercalls"] = f"xentrace exited with status {self.p.returncode}: {self._log_tail()}"
                self.p = None
                return
            if self.path.exists() and self.path.stat().st_size > 0:
                self.f = open(self.path, "rb")  # noqa: SIM115 - kept open across reads, closed by disable()
                return
            time.sleep(0.01)
        self.missing["hypercalls"] = f"xentrace wrote nothing within {self.WAIT_S:.0f} s"

    def _log_tail(self) -> str:
        try:
            lines = (self.workdir / "xentrace.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "?"
        return lines[-1][:200] if lines else "no message"

    def _pull(self) -> None:
        if self.f is None or self.counting is None:
            return
        for r in self.decoder.feed(self.f.read()):
            self.counting.add(r)

    def read(self) -> dict[str, float]:
        want = self.reads  # batches that must have closed: none at the counting line, then one more a read
        self.reads += 1
        if self.f is None or self.counting is None or want == 0:
            return {}
        deadline = time.monotonic() + self.WAIT_S
        while True:
            self._pull()
            if self.counting.markers // 2 >= want + 1 or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        while self.summed < min(want, len(self.counting.batches())):
            self.summed += 1
            got = self.counting.per_batch(self.summed)
            if got is None:
                self.missing["hypercalls"] = "xentrace lost records in a counted batch (its buffers: -S)"
                continue
            self.total.update(got)
        if self.counting.markers // 2 < want + 1:
            self.missing["hypercalls"] = (
                "a counted batch's markers did not reach the trace (the agent's --trace-marks; "
                "a trace started after them?)"
            )
        return dict(self.total)

    def per_op(self, before: dict[str, float], after: dict[str, float], seconds: float, ops: float) -> dict[str, float]:
        if ops <= 0:
            return {}
        return {k: max(0.0, v - before.get(k, 0.0)) / ops for k, v in after.items()}

    def disable(self) -> None:
        if self.p is not None:
            try:
                os.killpg(self.p.pid, signal.SIGINT)  # xentrace flushes and exits on it
                self.p.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.p.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.p.wait()
            self.p = None
        if self.f is not None:
            self.f.close()
            self.f = None
        keep = os.environ.get("VMTAX_XENTRACE_KEEP")  # a directory: each counting process's trace kept there
        if keep and self.path.exists():
            shutil.copyfile(self.path, Path(keep) / f"xentrace-dom{self.domid}-{time.time_ns()}.bin")
        self.path.unlink(missing_ok=True)

    def measure_idle(self, seconds: float) -> None:
        """The windows hold the batch alone: no idle rate to take off."""

    def facts(self) -> dict:
        out = {"host_probe": f"xentrace on pCPU {self.cpu} (hypercalls, PV events, HVM exits by reason)"}
        if self.missing:
            out["host_probe_missing"] = "; ".join(f"{k}: {v}" for k, v in self.missing.items())
        return out

    def close(self) -> None:
        self.disable()
