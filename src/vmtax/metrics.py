"""Every figure a sample carries besides its time, named once: what it
counts, per operation, and from which side of the virtualization boundary.

'target' metrics are counted by the agent inside the target (perf events,
else getrusage: agent/counters.c); 'host' metrics by vmtax on the host,
around the target's processes (hostprobe.py).  Adding a metric is adding a
line here and making one of those two produce it.  Names are a contract:
scripts read them from `--json` (`results[].metrics`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # of one operation's figure
    side: str  # 'target' or 'host'
    label: str  # short, for tables
    description: str


_ALL = [
    # inside the target
    Metric("page_faults", "faults", "target", "page faults", "page faults taken per operation"),
    Metric(
        "context_switches",
        "switches",
        "target",
        "context switches",
        "context switches of the agent's tasks per operation",
    ),
    Metric("cpu_migrations", "migrations", "target", "CPU migrations", "moves to another CPU per operation"),
    Metric("task_clock_ns", "ns", "target", "task clock", "CPU time of the agent's tasks per operation (perf)"),
    Metric(
        "syscalls", "syscalls", "target", "system calls", "system calls per operation (the raw_syscalls tracepoint)"
    ),
    Metric("cpu_user_ns", "ns", "target", "CPU user", "user-mode CPU time per operation (getrusage)"),
    Metric("cpu_sys_ns", "ns", "target", "CPU system", "kernel-mode CPU time per operation (getrusage)"),
    Metric("cycles", "cycles", "target", "cycles", "CPU cycles per operation (a PMU: real or virtual)"),
    Metric("instructions", "instructions", "target", "instructions", "instructions retired per operation"),
    Metric("cycles_user", "cycles", "target", "cycles, user", "CPU cycles in user mode per operation"),
    Metric(
        "instructions_user",
        "instructions",
        "target",
        "instructions, user",
        "instructions retired in user mode per operation",
    ),
    Metric("dtlb_misses", "misses", "target", "dTLB misses", "data-TLB load misses per operation"),
    Metric("llc_misses", "misses", "target", "LLC misses", "last-level cache misses per operation"),
    # on the host, for the target's processes
    Metric(
        "host_cpu_ns",
        "ns",
        "host",
        "host CPU",
        "host CPU time of the target's processes and threads per operation, less their idle rate",
    ),
    Metric("host_cpu_user_ns", "ns", "host", "host CPU user", "of which in user mode"),
    Metric("host_cpu_sys_ns", "ns", "host", "host CPU system", "of which in kernel mode"),
    Metric(
        "host_context_switches",
        "switches",
        "host",
        "host context switches",
        "context switches of the target's host processes and threads per operation",
    ),
    Metric(
        "host_syscalls",
        "syscalls",
        "host",
        "host syscalls",
        "system calls the target's host processes and threads made per operation",
    ),
    # gVisor's host processes apart (hostprobe.HostProbe's parts): its user-space kernel, the
    # Sentry (runsc-sandbox's own threads), and its file proxy, the Gofer (runsc-gofer); the rest
    # of the host CPU is the sandboxed program's own host processes (ptrace's stubs)
    Metric("host_cpu_sentry_ns", "ns", "host", "host CPU: Sentry", "host CPU time of gVisor's Sentry per operation"),
    Metric("host_cpu_gofer_ns", "ns", "host", "host CPU: Gofer", "host CPU time of gVisor's Gofer per operation"),
    Metric("host_syscalls_sentry", "syscalls", "host", "host syscalls: Sentry", "host system calls of gVisor's Sentry"),
    Metric("host_syscalls_gofer", "syscalls", "host", "host syscalls: Gofer", "host system calls of gVisor's Gofer"),
    Metric(
        "exits",
        "exits",
        "host",
        "VM exits",
        "VM exits per operation (KVM: its kvm:kvm_exit tracepoint, by reason; else QMP query-stats)",
    ),
    # under Xen, from xentrace on the guest's physical CPU (xentrace.py)
    Metric(
        "hypercalls",
        "hypercalls",
        "host",
        "hypercalls",
        "hypercalls into Xen per operation (xentrace; multicall sub-calls counted apart, by type)",
    ),
    Metric("xen_pf_bounces", "bounces", "host", "Xen: #PF bounced", "page faults Xen reflects into a PV guest"),
    Metric(
        "xen_ptwr_emulations",
        "writes",
        "host",
        "Xen: PTE writes emulated",
        "a PV guest's writes to its page tables that Xen traps and emulates, per operation",
    ),
    Metric(
        "xen_privop_emulations",
        "instructions",
        "host",
        "Xen: privops emulated",
        "privileged instructions of a PV guest that Xen emulates, per operation",
    ),
    Metric("xen_trap_bounces", "bounces", "host", "Xen: traps bounced", "other traps Xen reflects into a PV guest"),
    Metric(
        "xen_forced_invalid_ops",
        "ops",
        "host",
        "Xen: forced #UD",
        "a PV guest's forced-emulation prefixes (its CPUID) Xen handles",
    ),
    Metric(
        "xen_math_state_restores", "restores", "host", "Xen: FPU restores", "lazy FPU state restores, per operation"
    ),
    Metric("xen_paging_fixups", "fixups", "host", "Xen: paging fixups", "page faults Xen fixes up itself"),
    Metric("xen_gdt_ldt_faults", "faults", "host", "Xen: GDT/LDT faults", "GDT/LDT mapping faults, per operation"),
    # a workload's, per unit of the work it did (seed 003's figure of merit)
    # (units: per GB moved, or per 1000 transactions: WORK below)
    Metric(
        "host_cpu_per_unit",
        "s/GB",
        "host",
        "host CPU per unit",
        "host CPU per unit of the workload's work: the target's host processes (local: the tool "
        "itself), user and system, less their idle rate",
    ),
    Metric("host_cpu_user_per_unit", "s/GB", "host", "  host user", "of which in user mode"),
    Metric("host_cpu_sys_per_unit", "s/GB", "host", "  host system", "of which in kernel mode"),
    Metric(
        "host_context_switches_per_unit",
        "switches/GB",
        "host",
        "host ctx switches per unit",
        "context switches of the target's host processes and threads per unit of work, less their "
        "idle rate (/proc: no counter taxes the run): seed 003's world switches",
    ),
    Metric(
        "peer_cpu_per_unit",
        "s/GB",
        "host",
        "host peer CPU per unit",
        "host CPU of the workload's peer (the server on the host: the other end of the conversation) per unit of work",
    ),
]
METRICS: dict[str, Metric] = {m.name: m for m in _ALL}
EXIT_REASON = re.compile(r"^exits_[a-z0-9_]{1,40}$")  # exits_cpuid, exits_io, exits_npf, exits_other, ...
HYPERCALL = re.compile(r"^hypercalls_(mc_)?[a-z0-9_]{1,40}$")  # hypercalls_iret, hypercalls_mc_update_va_mapping


@dataclass(frozen=True)
class Work:
    """A unit of a workload's work, as its parser counts it (the key)."""

    key: str  # what the parser returns: bytes moved, transactions
    name: str  # the unit: GB, 1000tx
    size: float  # of the key's count per unit
    cpu_unit: str  # CPU time per unit in s or ms
    cpu_scale: float


WORK = {"GB": Work("_bytes", "GB", 1e9, "s", 1.0), "1000tx": Work("_tx", "1000tx", 1e3, "ms", 1e3)}
PER_UNIT = (
    "host_cpu_per_unit",
    "host_cpu_user_per_unit",
    "host_cpu_sys_per_unit",
    "host_context_switches_per_unit",
    "peer_cpu_per_unit",
)


def unit_of(name: str, work: str | None = None) -> str:
    """A metric's unit; a per-unit one's in the benchmark's unit of work."""
    if name in PER_UNIT and work in WORK:
        w = WORK[work]
        return f"switches/{w.name}" if "switches" in name else f"{w.cpu_unit}/{w.name}"
    return describe(name).unit


def known(name: str) -> bool:
    return name in METRICS or bool(EXIT_REASON.match(name)) or bool(HYPERCALL.match(name))


def describe(name: str) -> Metric:
    if name in METRICS:
        return METRICS[name]
    if EXIT_REASON.match(name):
        reason = name[len("exits_") :].replace("_", " ")
        return Metric(name, "exits", "host", f"exits: {reason}", f"VM exits for {reason} per operation")
    if HYPERCALL.match(name):
        op = name[len("hypercalls_") :]
        if op.startswith("mc_"):
            return Metric(name, "hypercalls", "host", f"in multicalls: {op[3:]}", f"{op[3:]} inside multicalls per op")
        return Metric(name, "hypercalls", "host", f"hypercalls: {op}", f"{op} hypercalls per operation")
    raise KeyError(name)


def order(names) -> list[str]:
    """Names in the registry's order, exits by reason after `exits`,
    hypercalls by type after `hypercalls` (sub-calls of multicalls last)."""
    rank = {n: i for i, n in enumerate(METRICS)}

    def key(n: str) -> tuple:
        if n.startswith("hypercalls_"):
            return (rank["hypercalls"], 1, n.startswith("hypercalls_mc_"), n)
        if n in rank:
            return (rank[n], 0, False, n)
        return (rank["exits"], 1, False, n)  # an exit reason

    return sorted(names, key=key)
