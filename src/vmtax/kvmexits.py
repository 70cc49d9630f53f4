"""VM exits by reason, counted by KVM itself: its `kvm:kvm_exit` tracepoint,
which fires on every exit with the hardware's exit reason (the `exit_reason`
field) and the kind of hardware (`isa`: 1 VMX, Intel; 2 SVM, AMD).

One counting perf event per vCPU thread and reason, each filtered in the
kernel to `isa == I && exit_reason == R`, plus one unfiltered: the total.
The exits of reasons not counted one by one are `exits_other` (the total
less the rest), so the rows add up.  Counting, not sampling: no record is
ever lost, whatever the exit rate.  The reasons' codes and names are read
from the tracepoint's own format (its `__print_symbolic` tables, one per
isa), in the kernel's words: `cpuid`, `hlt`, `io`, `msr`, `npf` on AMD;
`cpuid`, `hlt`, `io_instruction`, `ept_violation` on Intel.

KVM's binary statistics (QMP `query-stats`, hostprobe.Qmp) count every exit
too, but by reason only for the few that reach QEMU or halt: the tracepoint
is what tells a CPUID from a nested page fault.  It needs root (or
CAP_PERFMON) and tracefs; where either is missing, the facts say why.
"""

from __future__ import annotations

import fcntl
import os
import re

from .perfevent import (
    IOC_DISABLE,
    IOC_ENABLE,
    IOC_SET_FILTER,
    TYPE_TRACEPOINT,
    ioctl_all,
    perf_open,
    perf_read,
    read_tracefs,
)

VMX, SVM = 1, 2  # the tracepoint's isa field (KVM_ISA_VMX, KVM_ISA_SVM)

# counted one by one (the kernel's names, normalized); the others add up to exits_other
COUNTED = {
    SVM: (
        "cpuid",
        "hlt",
        "io",
        "msr",
        "npf",
        "interrupt",
        "vintr",
        "nmi",
        "pause",
        "hypercall",
        "pf_excp",
        "invlpg",
        "write_cr3",
        "xsetbv",
        "rdtsc",
        "avic_incomplete_ipi",
        "avic_unaccelerated_access",
        "shutdown",
    ),
    VMX: (
        "cpuid",
        "hlt",
        "io_instruction",
        "msr_read",
        "msr_write",
        "ept_violation",
        "ept_misconfig",
        "external_interrupt",
        "interrupt_window",
        "exception_nmi",
        "pause_instruction",
        "vmcall",
        "preemption_timer",
        "apic_access",
        "apic_write",
        "eoi_induced",
        "cr_access",
        "xsetbv",
        "invlpg",
        "rdtsc",
        "tpr_below_threshold",
    ),
}

_TABLE = re.compile(r"__print_symbolic\(REC->exit_reason[^,]*,")
_ENTRY = re.compile(r'\{\s*([^,{}"]+?)\s*,\s*"([^"]*)"\s*\}')
_ISA_TEST = re.compile(r"REC->isa == (\d+)\)\s*\?\s*$")


def reason_name(text: str) -> str:
    """The kernel's name of a reason as a metric suffix: "PF excp" -> pf_excp."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _code(expr: str) -> int | None:
    try:
        value = sum(int(term.strip(), 0) for term in expr.split("+"))
    except ValueError:
        return None
    return value if value >= 0 else None


def reasons(fmt: str) -> dict[int, dict[str, int]]:
    """isa -> {reason name: exit_reason code}, from the kvm_exit format's
    print fmt: `(REC->isa == 1) ? __print_symbolic(REC->exit_reason & 0xffff,
    {VMX table}) : __print_symbolic(REC->exit_reason, {SVM table})`.  A table
    after `REC->isa == N) ?` is isa N's; the one after it, the other isa's."""
    out: dict[int, dict[str, int]] = {}
    starts = [m for m in _TABLE.finditer(fmt)]
    first: int | None = None
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(fmt)
        body = fmt[m.end() : end]
        body = body[: body.find(")")] if ")" in body else body  # the table ends at its closing parenthesis
        isa_m = _ISA_TEST.search(fmt[max(0, m.start() - 40) : m.start()])
        if isa_m:
            isa = first = int(isa_m.group(1))
        elif first is not None and i == 1:
            isa = SVM if first == VMX else VMX
        else:
            continue
        table = out.setdefault(isa, {})
        for expr, name in _ENTRY.findall(body):
            code = _code(expr)
            if code is not None:
                table.setdefault(reason_name(name), code)
    return out


def host_isa() -> tuple[int | None, str]:
    """Which hardware KVM drives here (its module), or None and why not."""
    if os.path.isdir("/sys/module/kvm_amd"):
        return SVM, ""
    if os.path.isdir("/sys/module/kvm_intel"):
        return VMX, ""
    others = (
        sorted(m for m in os.listdir("/sys/module") if m.startswith("kvm_")) if os.path.isdir("/sys/module") else []
    )
    return None, (
        "no kvm_amd or kvm_intel module: no hardware exit reasons to count"
        + (f" ({', '.join(others)} serves /dev/kvm)" if others else "")
    )


class ExitCounter:
    """The kvm_exit events of these vCPU threads, by reason, disabled until
    enable().  OSError (with why) when they cannot be counted."""

    def __init__(self, vcpu_tids: list[int], counted: tuple[str, ...] | None = None):
        isa, why = host_isa()
        if isa is None:
            raise OSError(why)
        found, why = read_tracefs("events/kvm/kvm_exit/id", "events/kvm/kvm_exit/format")
        if found is None:
            raise OSError(f"no kvm:kvm_exit tracepoint ({why})")
        try:
            tp = int(found[0])
        except ValueError:
            raise OSError("the kvm:kvm_exit tracepoint's id is unreadable") from None
        table = reasons(found[1]).get(isa, {})
        if not table:
            raise OSError("the kvm:kvm_exit format names no exit reasons for this hardware")
        self.isa = isa
        self.reasons = {r: table[r] for r in (counted if counted is not None else COUNTED[isa]) if r in table}
        self.fds: dict[str, list[int]] = {}
        try:
            for tid in vcpu_tids:
                self._open("_total", tid, tp, None)
                for name, code in self.reasons.items():
                    self._open(f"exits_{name}", tid, tp, f"isa == {isa} && exit_reason == {code}")
        except OSError:
            self.close()
            raise

    def _open(self, key: str, tid: int, tp: int, filt: str | None) -> None:
        fd = perf_open(tid, TYPE_TRACEPOINT, tp)
        self.fds.setdefault(key, []).append(fd)
        if filt is not None:
            try:
                fcntl.ioctl(fd, IOC_SET_FILTER, filt.encode() + b"\0")
            except OSError as e:
                raise OSError(e.errno, f"filter '{filt}': {e.strerror}") from None

    def read(self) -> dict[str, float]:
        """Cumulative counts: `exits` (all), `exits_<reason>` for each
        reason counted, `exits_other` (the rest)."""
        got = {k: sum(perf_read(fd) for fd in fds) for k, fds in self.fds.items()}
        total = got.pop("_total", 0.0)
        out = {"exits": total, **got}
        out["exits_other"] = max(0.0, total - sum(got.values()))
        return out

    def enable(self) -> None:
        for fds in self.fds.values():
            ioctl_all(fds, IOC_ENABLE)

    def disable(self) -> None:
        for fds in self.fds.values():
            ioctl_all(fds, IOC_DISABLE)

    def describe(self) -> str:
        return (
            f"exits by reason (kvm:kvm_exit, {'SVM' if self.isa == SVM else 'VMX'}: "
            f"{len(self.reasons)} reasons and the rest)"
        )

    def close(self) -> None:
        for fds in self.fds.values():
            for fd in fds:
                os.close(fd)
        self.fds = {}
