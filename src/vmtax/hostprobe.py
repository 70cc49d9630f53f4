"""What a target costs the host, read around its processes while the agent
runs in it: host CPU time (user and system), host context switches, the
system calls its host processes make, and, under KVM, VM exits by reason.

The runner reads a probe each time a line of the agent arrives, so the
difference between two readings is what the host spent on one timed batch
(and the little it takes to report it); less the target's idle rate, per
operation of the batch, that is the metric (metrics.py, side 'host').

Sources, each said in the target's facts when it is missing:
- perf_event_open(2) on every task of the target's host processes, with
  `inherit`, so that processes started later (a UML guest's processes are
  host processes) are counted too, even once they have exited: software
  events task-clock and context-switches, and the raw_syscalls:sys_enter
  tracepoint (root or CAP_PERFMON, and tracefs);
- /proc/PID/stat: user and system ticks, to split the CPU time;
- under KVM, the vCPU threads' exits by reason from KVM's kvm:kvm_exit
  tracepoint (kvmexits.py), else their total from QMP `query-stats`
  (QEMU >= 7.1: KVM's binary statistics).
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from .hostproc import TICK, descendants, tasks
from .kvmexits import ExitCounter
from .perfevent import (
    IOC_DISABLE,
    IOC_ENABLE,
    SW_CONTEXT_SWITCHES,
    SW_TASK_CLOCK,
    TYPE_SOFTWARE,
    TYPE_TRACEPOINT,
    ioctl_all,
    perf_open,
    perf_read,
    read_tracefs,
)


@functools.lru_cache(maxsize=1)
def syscall_tracepoint() -> tuple[int | None, str]:
    """The id of raw_syscalls:sys_enter, or None and why not (read_tracefs)."""
    found, why = read_tracefs("events/raw_syscalls/sys_enter/id")
    try:
        return (int(found[0]), "") if found else (None, why)
    except ValueError:
        return None, "no tracefs with raw_syscalls:sys_enter (kernel without tracepoints?)"


def ticks(pids: list[int]) -> tuple[int, int]:
    """(user, system) clock ticks of these processes and of the children they
    have reaped (so a process that has come and gone still counts)."""
    user = system = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            user += int(fields[11]) + int(fields[13])
            system += int(fields[12]) + int(fields[14])
        except (OSError, IndexError, ValueError):
            continue
    return user, system


def switches(pids: list[int]) -> int:
    """Context switches, voluntary and not, of every thread of these
    processes so far (/proc: free to read, unlike a counter)."""
    n = 0
    for t_pid in pids:
        for tid in tasks([t_pid]):
            try:
                with open(f"/proc/{t_pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                            n += int(line.split()[1])
            except (OSError, ValueError):
                continue
    return n


class Qmp:
    """The few QMP commands the probe needs, over QEMU's monitor socket."""

    def __init__(self, path: str, timeout: float = 5.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.buf = b""
        try:
            self.sock.connect(path)
            self._reply()  # the greeting
            self.execute("qmp_capabilities")
        except BaseException:
            self.sock.close()
            raise

    def _reply(self) -> dict:
        while True:
            while b"\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise OSError("QMP connection closed")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            msg = json.loads(line)
            if "event" not in msg:  # asynchronous events are not replies
                return msg

    def execute(self, command: str, arguments: dict | None = None) -> Any:  # the reply's JSON
        req = {"execute": command, **({"arguments": arguments} if arguments else {})}
        self.sock.sendall(json.dumps(req).encode() + b"\n")
        msg = self._reply()
        if "error" in msg:
            raise OSError(f"QMP {command}: {msg['error'].get('desc', msg['error'])}")
        return msg.get("return")

    def vcpu_exits(self) -> dict[str, float]:
        """KVM's `exits` counter summed over the vCPUs (query-stats, QEMU >=
        7.1), or {} where it has none.  Its `<kind>_exits` counters (halt,
        io, mmio, irq, signal...) are left out: they count exits that reach
        QEMU or halt, not the hardware's exit reasons, which kvmexits counts
        under names such a counter would clash with (`io`)."""
        out: dict[str, float] = {}
        for entry in self.execute("query-stats", {"target": "vcpu"}) or []:
            for stat in entry.get("stats", []):
                if stat.get("name") == "exits" and isinstance(stat.get("value"), (int, float)):
                    out["exits"] = out.get("exits", 0.0) + stat["value"]
        return out

    def close(self) -> None:
        self.sock.close()


def _host_events(trace: int | None) -> list[tuple[str, int, int]]:
    """(metric, perf type, config) of each count read of a target's host
    threads: their CPU time and context switches, and their system calls
    where the syscall tracepoint is there."""
    events = [
        ("host_cpu_ns", TYPE_SOFTWARE, SW_TASK_CLOCK),
        ("host_context_switches", TYPE_SOFTWARE, SW_CONTEXT_SWITCHES),
    ]
    return events + ([("host_syscalls", TYPE_TRACEPOINT, trace)] if trace is not None else [])


def _open_each(tids: list[int], type_: int, config: int) -> tuple[list[int], list[int], str]:
    """One counting event per thread: (their fds, the threads, ''); or,
    where one fails to open, ([], [], why) with the ones opened closed
    (a count that misses threads is no count)."""
    fds: list[int] = []
    for t in tids:
        try:
            fds.append(perf_open(t, type_, config))
        except OSError as e:
            for fd in fds:
                os.close(fd)
            return [], [], f"perf_event_open: {e.strerror or e}"
    return fds, list(tids), ""


class HostProbe:
    """Cumulative host-side counts of one target, at any moment (read()),
    and its idle rate per second (set after boot by measure_idle())."""

    def __init__(
        self,
        roots: Callable[[], list[int]],
        qmp: Qmp | None = None,
        vcpu_tids: list[int] | None = None,
        parts: dict[str, list[int]] | None = None,
    ):
        """roots: the target's long-lived host processes (their descendants
        are found here); parts: named processes among them whose own
        threads' CPU time and system calls are read apart as well
        (`host_cpu_PART_ns`, `host_syscalls_PART`: gVisor's Sentry and
        Gofer); vcpu_tids (KVM): the vCPU threads, whose system
        calls are almost all ioctl(KVM_RUN) -- one per exit that reaches
        user space, counted as exits_userspace -- and whose VM exits are
        counted by reason (kvmexits.ExitCounter)."""
        self.roots, self.qmp = roots, qmp
        self.kvm = None
        self.fds: dict[str, list[int]] = {
            "host_cpu_ns": [],
            "host_context_switches": [],
            "host_syscalls": [],
            "exits_userspace": [],
        }
        self.fd_tids: dict[str, list[int]] = {}  # the thread each of fds[name] counts, in order
        self.parts = {name: set(tasks(pids)) for name, pids in (parts or {}).items()}
        self.missing: dict[str, str] = {}
        self.idle: dict[str, float] = {}
        self.refresh()
        tid = tasks(self.pids)
        trace, why = syscall_tracepoint()
        if trace is None:
            self.missing["host_syscalls"] = why
        for name, type_, config in _host_events(trace):
            self.fds[name], self.fd_tids[name], failed = _open_each(tid, type_, config)
            if failed:
                self.missing[name] = failed
        if vcpu_tids and trace is not None:
            # a vCPU thread's system calls: almost all ioctl(KVM_RUN), one per exit that reaches user space
            self.fds["exits_userspace"], _, failed = _open_each(vcpu_tids, TYPE_TRACEPOINT, trace)
            if failed:
                self.missing["exits_userspace"] = failed
        if vcpu_tids:
            try:
                self.kvm = ExitCounter(vcpu_tids)
            except OSError as e:
                self.missing["exits_by_reason"] = e.strerror or str(e)

    def refresh(self) -> None:
        """Find the target's host processes again (a short-lived one missed
        still counts: its parent's reaped-children time includes it)."""
        self.pids = [p for r in self.roots() for p in descendants(r)]

    def _close(self, name: str) -> None:
        for fd in self.fds.get(name, []):
            os.close(fd)
        self.fds[name] = []
        self.fd_tids[name] = []

    def read(self) -> dict[str, float]:
        out = {name: sum(perf_read(fd) for fd in fds) for name, fds in self.fds.items() if fds}
        out.update(self._read_parts())
        user, system = ticks(self.pids)
        out["host_ticks_user"], out["host_ticks_sys"] = float(user), float(system)
        if self.qmp is not None:
            try:
                out.update(self.qmp.vcpu_exits())
            except (OSError, ValueError) as e:
                self.missing["exits"] = f"QMP query-stats: {e}"
                self.qmp.close()
                self.qmp = None
        if self.kvm is not None:  # every exit and each by reason, counted together: they add up
            out.update(self.kvm.read())
        return out

    PART_METRICS = (("host_cpu_ns", "host_cpu_{}_ns"), ("host_syscalls", "host_syscalls_{}"))

    def _read_parts(self) -> dict[str, float]:
        """Each part's own threads' share of the counts (threads it starts
        later count with the thread that started them: inherited)."""
        out = {}
        for part, tids in self.parts.items():
            for name, key in self.PART_METRICS:
                fds = [fd for fd, t in zip(self.fds[name], self.fd_tids.get(name, []), strict=False) if t in tids]
                if fds:
                    out[key.format(part)] = float(sum(perf_read(fd) for fd in fds))
        return out

    def _ioctl(self, request: int) -> None:
        for fds in self.fds.values():
            ioctl_all(fds, request)

    def enable(self) -> None:
        self._ioctl(IOC_ENABLE)
        if self.kvm is not None:
            self.kvm.enable()

    def disable(self) -> None:
        self._ioctl(IOC_DISABLE)
        if self.kvm is not None:
            self.kvm.disable()

    def measure_idle(self, seconds: float) -> None:
        """The target's own cost per second while its guest is idle, counted
        as in a counted batch: what every interval pays whatever runs in it."""
        self.enable()
        try:
            a, t0 = self.read(), time.monotonic()
            time.sleep(seconds)
            b, t1 = self.read(), time.monotonic()
        finally:
            self.disable()
        self.idle = {k: max(0.0, (b[k] - a.get(k, 0.0)) / (t1 - t0)) for k in b}

    def per_op(self, before: dict[str, float], after: dict[str, float], seconds: float, ops: float) -> dict[str, float]:
        """The host metrics of one interval, per operation: the difference of
        two readings less the idle rate over it, never below zero; the CPU
        time split into user and system by the ticks of the interval (or of
        the whole run, when the interval saw none)."""
        if ops <= 0:
            return {}
        d = {
            k: max(0.0, after[k] - before.get(k, 0.0) - self.idle.get(k, 0.0) * seconds)
            for k in after
            if not k.startswith("host_ticks")
        }
        out = {k: v / ops for k, v in d.items()}
        if "host_cpu_ns" in out:
            du = after["host_ticks_user"] - before.get("host_ticks_user", 0.0)
            ds = after["host_ticks_sys"] - before.get("host_ticks_sys", 0.0)
            if du + ds <= 0:
                du, ds = after["host_ticks_user"], after["host_ticks_sys"]
            share = du / (du + ds) if du + ds > 0 else 0.0
            out["host_cpu_user_ns"] = out["host_cpu_ns"] * share
            out["host_cpu_sys_ns"] = out["host_cpu_ns"] * (1 - share)
        return out

    def facts(self) -> dict:
        """What this probe counts, and why not the rest: for the target's facts."""
        have = [k for k, fds in self.fds.items() if fds] + (
            [self.kvm.describe()] if self.kvm else ["exits"] if self.qmp else []
        )
        return {
            "host_probe": ", ".join(have) or "nothing",
            **({"host_probe_missing": "; ".join(f"{k}: {v}" for k, v in self.missing.items())} if self.missing else {}),
        }

    def close(self) -> None:
        for name in list(self.fds):
            self._close(name)
        if self.kvm is not None:
            self.kvm.close()
            self.kvm = None
        if self.qmp is not None:
            self.qmp.close()
            self.qmp = None


TICK_NS = 1e9 / TICK
