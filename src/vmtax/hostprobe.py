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
- QMP `query-stats` (QEMU >= 7.1) for the KVM vCPUs' exit counters.
"""
from __future__ import annotations

import ctypes
import fcntl
import functools
import json
import os
import socket
import struct
import subprocess
import time
from typing import Callable

from .hostproc import TICK, descendants, tasks

_SYS_PERF_EVENT_OPEN = 298  # x86_64
_PERF_FLAG_FD_CLOEXEC = 8
_TYPE_SOFTWARE, _TYPE_TRACEPOINT = 1, 2
_SW_TASK_CLOCK, _SW_CONTEXT_SWITCHES = 1, 3
_DISABLED, _INHERIT = 1 << 0, 1 << 1
_IOC_ENABLE, _IOC_DISABLE = 0x2400, 0x2401
_READ_FORMAT = 1 | 2  # total time enabled, total time running
_TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _libc = None


def _perf_open(pid: int, type_: int, config: int) -> int:
    """A counting event on one task, inherited by what it starts, disabled
    until enable(): counting costs the counted time (a syscall tracepoint
    sends every system call down the kernel's slow path), so it runs only
    around the counted batches.  Raises OSError with the kernel's reason."""
    if _libc is None:
        raise OSError(0, "no libc")
    attr = struct.pack("<IIQQQQQIIQ", type_, 64, config, 0, 0, _READ_FORMAT, _DISABLED | _INHERIT, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, 64)
    fd = _libc.syscall(_SYS_PERF_EVENT_OPEN, buf, ctypes.c_int(pid), ctypes.c_int(-1),
                       ctypes.c_int(-1), ctypes.c_ulong(_PERF_FLAG_FD_CLOEXEC))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return fd


def _perf_read(fd: int) -> float:
    try:
        value, enabled, running = struct.unpack("<QQQ", os.read(fd, 24))
    except OSError:
        return 0.0
    return value * enabled / running if running and running < enabled else float(value)


@functools.lru_cache(maxsize=1)
def syscall_tracepoint() -> tuple[int | None, str]:
    """The id of raw_syscalls:sys_enter, or None and why not.  Where tracefs
    is not mounted, root reads it from a tracefs mounted in a private mount
    namespace of a short-lived child: nothing stays mounted."""
    for base in _TRACEFS:
        try:
            with open(f"{base}/events/raw_syscalls/sys_enter/id") as f:
                return int(f.read()), ""
        except (OSError, ValueError):
            continue
    if os.geteuid() != 0:
        return None, "no tracefs mounted, and mounting one needs root"
    try:
        out = subprocess.run(["unshare", "--mount", "sh", "-c",
                              'mount -t tracefs tracefs "$1" && cat "$1/events/raw_syscalls/sys_enter/id"',
                              "sh", _TRACEFS[0]], capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL)
        return int(out.stdout), ""
    except (OSError, ValueError, subprocess.SubprocessError):
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
        self.sock.connect(path)
        self.buf = b""
        self._reply()  # the greeting
        self.execute("qmp_capabilities")

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

    def execute(self, command: str, arguments: dict | None = None) -> object:
        req = {"execute": command, **({"arguments": arguments} if arguments else {})}
        self.sock.sendall(json.dumps(req).encode() + b"\n")
        msg = self._reply()
        if "error" in msg:
            raise OSError(f"QMP {command}: {msg['error'].get('desc', msg['error'])}")
        return msg.get("return")

    def vcpu_exits(self) -> dict[str, float]:
        """Sums over the vCPUs of KVM's exit counters: `exits`, and each
        `<reason>_exits` as `exits_<reason>` (query-stats, QEMU >= 7.1)."""
        out: dict[str, float] = {}
        for entry in self.execute("query-stats", {"target": "vcpu"}) or []:
            for stat in entry.get("stats", []):
                name, value = stat.get("name", ""), stat.get("value")
                if not isinstance(value, (int, float)):
                    continue
                if name == "exits":
                    out["exits"] = out.get("exits", 0.0) + value
                elif name.endswith("_exits"):
                    key = "exits_" + name[:-len("_exits")]
                    out[key] = out.get(key, 0.0) + value
        return out

    def close(self) -> None:
        self.sock.close()


class HostProbe:
    """Cumulative host-side counts of one target, at any moment (read()),
    and its idle rate per second (set after boot by measure_idle())."""

    def __init__(self, roots: Callable[[], list[int]], qmp: Qmp | None = None,
                 vcpu_tids: list[int] | None = None):
        """roots: the target's long-lived host processes (their descendants
        are found here); vcpu_tids (KVM): the vCPU threads, whose system
        calls are almost all ioctl(KVM_RUN) -- one per exit that reaches
        user space, counted as exits_userspace."""
        self.roots, self.qmp = roots, qmp
        self.fds: dict[str, list[int]] = {"host_cpu_ns": [], "host_context_switches": [],
                                          "host_syscalls": [], "exits_userspace": []}
        self.missing: dict[str, str] = {}
        self.idle: dict[str, float] = {}
        self.refresh()
        tid = tasks(self.pids)
        trace, why = syscall_tracepoint()
        events = [("host_cpu_ns", _TYPE_SOFTWARE, _SW_TASK_CLOCK),
                  ("host_context_switches", _TYPE_SOFTWARE, _SW_CONTEXT_SWITCHES)]
        if trace is not None:
            events.append(("host_syscalls", _TYPE_TRACEPOINT, trace))
        else:
            self.missing["host_syscalls"] = why
        for name, type_, config in events:
            for t in tid:
                try:
                    self.fds[name].append(_perf_open(t, type_, config))
                except OSError as e:
                    self.missing[name] = f"perf_event_open: {e.strerror or e}"
                    break
            if name in self.missing:
                self._close(name)
        if vcpu_tids and trace is not None:
            for t in vcpu_tids:
                try:
                    self.fds["exits_userspace"].append(_perf_open(t, _TYPE_TRACEPOINT, trace))
                except OSError as e:  # the ones already open are closed: none is read
                    self.missing["exits_userspace"] = f"perf_event_open: {e.strerror or e}"
                    self._close("exits_userspace")
                    break

    def refresh(self) -> None:
        """Find the target's host processes again (a short-lived one missed
        still counts: its parent's reaped-children time includes it)."""
        self.pids = [p for r in self.roots() for p in descendants(r)]

    def _close(self, name: str) -> None:
        for fd in self.fds.get(name, []):
            os.close(fd)
        self.fds[name] = []

    def read(self) -> dict[str, float]:
        out = {name: sum(_perf_read(fd) for fd in fds) for name, fds in self.fds.items() if fds}
        user, system = ticks(self.pids)
        out["host_ticks_user"], out["host_ticks_sys"] = float(user), float(system)
        if self.qmp is not None:
            try:
                out.update(self.qmp.vcpu_exits())
            except (OSError, ValueError) as e:
                self.missing["exits"] = f"QMP query-stats: {e}"
                self.qmp.close()
                self.qmp = None
        return out

    def _ioctl(self, request: int) -> None:
        for fds in self.fds.values():
            for fd in fds:
                try:
                    fcntl.ioctl(fd, request, 0)
                except OSError:
                    pass

    def enable(self) -> None:
        self._ioctl(_IOC_ENABLE)

    def disable(self) -> None:
        self._ioctl(_IOC_DISABLE)

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

    def per_op(self, before: dict[str, float], after: dict[str, float], seconds: float,
               ops: float) -> dict[str, float]:
        """The host metrics of one interval, per operation: the difference of
        two readings less the idle rate over it, never below zero; the CPU
        time split into user and system by the ticks of the interval (or of
        the whole run, when the interval saw none)."""
        if ops <= 0:
            return {}
        d = {k: max(0.0, after[k] - before.get(k, 0.0) - self.idle.get(k, 0.0) * seconds)
             for k in after if not k.startswith("host_ticks")}
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
        have = [k for k, fds in self.fds.items() if fds] + (["exits"] if self.qmp else [])
        return {"host_probe": ", ".join(have) or "nothing",
                **({"host_probe_missing": "; ".join(f"{k}: {v}" for k, v in self.missing.items())}
                   if self.missing else {})}

    def close(self) -> None:
        for name in list(self.fds):
            self._close(name)
        if self.qmp is not None:
            self.qmp.close()
            self.qmp = None


TICK_NS = 1e9 / TICK
