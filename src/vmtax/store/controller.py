"""The controller of a run (the vmtax process that measures it), recorded
with the run so that a reader can tell a live run from one whose controller
is gone (killed, crashed, or the machine rebooted).  Reads Linux /proc;
where that tells nothing, a run reads as stored."""

from __future__ import annotations

import os
import pwd
import socket


def this_controller() -> dict:
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        user = str(os.getuid())
    pid = os.getpid()
    return {"host": socket.gethostname(), "user": user, "pid": pid, "pid_start": start_time(pid), "boot_id": boot_id()}


def effective_status(status: str, host: str | None, pid: int | None, pid_start: int | None, boot: str | None) -> str:
    """'abandoned' for a run stored as running whose controller ran on this
    host and is gone: another boot, or no process with its pid and start
    time.  On another host, or with nothing recorded, it cannot be known."""
    if status != "running" or host is None or host != socket.gethostname():
        return status
    now = boot_id()
    if boot and now and boot != now:
        return "abandoned"
    if not pid or pid < 0:
        return status
    started = start_time(pid)
    if started is None:
        return "abandoned" if _no_such_process(pid) else status
    return "abandoned" if pid_start is not None and started != pid_start else status


def boot_id() -> str | None:
    text = _read("/proc/sys/kernel/random/boot_id")
    return text.strip() if text else None


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: when the process started, in clock ticks
    after boot, which tells a reused pid apart."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    try:
        return int(text.rsplit(")", 1)[1].split()[19])  # fields from the 3rd on, after "(comm)"
    except (IndexError, ValueError):
        return None


def _no_such_process(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, but is not ours to signal
        pass
    return False


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None
