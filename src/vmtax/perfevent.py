"""Counting perf events on the tasks vmtax watches (perf_event_open(2),
without perf), and the tracefs files that name tracepoints: what the host
probe (hostprobe.py) and the VM-exit counter (kvmexits.py) count with."""

from __future__ import annotations

import ctypes
import fcntl
import os
import struct
import subprocess

_SYS_PERF_EVENT_OPEN = 298  # x86_64
_PERF_FLAG_FD_CLOEXEC = 8
TYPE_SOFTWARE, TYPE_TRACEPOINT = 1, 2
SW_TASK_CLOCK, SW_CONTEXT_SWITCHES = 1, 3
_DISABLED, _INHERIT = 1 << 0, 1 << 1
IOC_ENABLE, IOC_DISABLE = 0x2400, 0x2401
IOC_SET_FILTER = 0x40082406  # PERF_EVENT_IOC_SET_FILTER: _IOW('$', 6, char *)
_READ_FORMAT = 1 | 2  # total time enabled, total time running
_TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")

try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _libc = None


def perf_open(pid: int, type_: int, config: int) -> int:
    """A counting event on one task, inherited by what it starts, disabled
    until enable(): counting costs the counted time (a syscall tracepoint
    sends every system call down the kernel's slow path), so it runs only
    around the counted batches.  Raises OSError with the kernel's reason."""
    if _libc is None:
        raise OSError(0, "no libc")
    # struct perf_event_attr's first 64 bytes: type, size, config, sample period and type, read format,
    # flags, wakeup, breakpoint type and address
    fields = (type_, 64, config, 0, 0, _READ_FORMAT, _DISABLED | _INHERIT, 0, 0, 0)
    attr = struct.pack("<IIQQQQQIIQ", *fields)
    buf = ctypes.create_string_buffer(attr, 64)
    fd = _libc.syscall(
        _SYS_PERF_EVENT_OPEN,
        buf,
        ctypes.c_int(pid),
        ctypes.c_int(-1),
        ctypes.c_int(-1),
        ctypes.c_ulong(_PERF_FLAG_FD_CLOEXEC),
    )
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return fd


def perf_read(fd: int) -> float:
    try:
        value, enabled, running = struct.unpack("<QQQ", os.read(fd, 24))
    except OSError:
        return 0.0
    return value * enabled / running if running and running < enabled else float(value)


def read_tracefs(*names: str) -> tuple[list[str] | None, str]:
    """These files of tracefs (paths under its root), or None and why not.
    Where tracefs is not mounted, root reads them from a tracefs mounted in
    a private mount namespace of a short-lived child: nothing stays mounted."""
    for base in _TRACEFS:
        try:
            return [open(f"{base}/{n}").read() for n in names], ""
        except OSError:
            continue
    if os.geteuid() != 0:
        return None, "no tracefs mounted, and mounting one needs root"
    sep = "--vmtax-tracefs--\n"
    try:
        out = subprocess.run(
            [
                "unshare",
                "--mount",
                "sh",
                "-c",
                'mount -t tracefs tracefs "$1" && shift && for f; do cat "$f" && echo "$SEP"; done',
                "sh",
                _TRACEFS[0],
                *[f"{_TRACEFS[0]}/{n}" for n in names],
            ],
            capture_output=True,
            text=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "SEP": sep.strip()},
        )
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"cannot mount tracefs: {e}"
    parts = out.stdout.split(sep)
    if out.returncode != 0 or len(parts) != len(names) + 1:
        return None, (out.stderr.strip().splitlines() or ["not in tracefs"])[-1][:200]
    return parts[:-1], ""


def ioctl_all(fds, request: int) -> None:
    """One ioctl (IOC_ENABLE, IOC_DISABLE) on each counter, whatever one fails."""
    for fd in fds:
        try:
            fcntl.ioctl(fd, request, 0)
        except OSError:
            pass
