"""Child processes that are always cleaned up.

Every child vmtax starts (agent, qemu, uml, ssh, podman) is started here, in
its own session so that a Ctrl-C at the terminal reaches vmtax alone, and is
killed with its whole process group on every exit path.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import weakref
from typing import Iterator, Sequence

from .hostproc import descendants

_live: "weakref.WeakSet[subprocess.Popen]" = weakref.WeakSet()


def spawn(argv: Sequence[str], **kw) -> subprocess.Popen:
    p = subprocess.Popen(list(argv), start_new_session=True, **kw)
    _live.add(p)
    return p


def kill_group(p: subprocess.Popen, grace: float = 0.0) -> None:
    """Kill p, everything in its process group and every descendant that
    left the group (UML's host processes, say), then reap p."""
    tree = descendants(p.pid) if p.poll() is None else []
    if p.poll() is None and grace > 0:
        _signal_group(p, signal.SIGTERM)
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(p, signal.SIGKILL)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a D-state child
        pass
    _live.discard(p)


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """Last resort on exit: kill every child still alive."""
    for p in list(_live):
        kill_group(p)


def stream_lines(argv: Sequence[str], timeout: float, stdin_data: bytes | None = None,
                 env: dict | None = None) -> Iterator[str]:
    """Run argv, yield its stdout lines as they come.  The child is killed
    when the consumer stops early, on any exception (Ctrl-C included), and
    after `timeout` seconds.  A non-zero exit raises ChildFailed with the
    tail of its stderr."""
    p = spawn(argv, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    timer = threading.Timer(timeout, _signal_group, (p, signal.SIGKILL))
    timer.daemon = True
    timer.start()
    err_chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: err_chunks.append(p.stderr.read()), daemon=True)
    reader.start()
    try:
        if stdin_data is not None:
            p.stdin.write(stdin_data)
            p.stdin.close()
        for raw in p.stdout:
            yield raw.decode("utf-8", "replace").rstrip("\n")
        p.wait()
        reader.join(timeout=5)
        timed_out = not timer.is_alive() and p.returncode == -signal.SIGKILL
        if p.returncode != 0:
            err = b"".join(err_chunks).decode("utf-8", "replace").strip()
            raise ChildFailed(p.returncode, err[-2000:], timed_out)
    finally:
        timer.cancel()
        kill_group(p)


class ChildFailed(Exception):
    def __init__(self, returncode: int, stderr: str, timed_out: bool = False):
        self.returncode, self.stderr, self.timed_out = returncode, stderr, timed_out
        what = "timed out" if timed_out else f"exited with status {returncode}"
        tail = stderr.splitlines()[-1] if stderr else ""
        super().__init__(f"{what}{': ' + tail if tail else ''}")
