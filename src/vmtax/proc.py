"""Child processes that are always cleaned up.

Every child vmtax starts (agent, qemu, uml, ssh, podman) is started here, in
its own session so that a Ctrl-C at the terminal reaches vmtax alone, and is
killed with its whole process group on every exit path -- including the
one vmtax cannot see: a SIGKILL of vmtax itself, after which the kernel
kills each direct child (PR_SET_PDEATHSIG) and the next run sweeps what
was left (`sweep`).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO

from .errors import TargetError
from .hostproc import boot_id, descendants, pid_alive, pid_namespace, running, tasks

_live: weakref.WeakSet[subprocess.Popen] = weakref.WeakSet()
_given_back: set[int] | None = None  # while vmtax keeps off a CPU (keep_off): the CPUs it had
_PR_SET_PDEATHSIG = 1
_prctl: Callable[..., int] | None
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _prctl = None


def _child_setup(cpu: int | Collection[int] | None):
    """Runs in the child between fork and exec: die with vmtax (the
    spawning thread is always the main thread), and optionally pin (to one
    CPU, or to these)."""

    def setup() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if cpu is not None:
            os.sched_setaffinity(0, {cpu} if isinstance(cpu, int) else set(cpu))

    return setup


@contextmanager
def _as_before() -> Iterator[None]:
    """While vmtax keeps off a CPU (keep_off), a child it starts gets the
    CPUs vmtax had, as if it had not moved: the spawning thread has them
    for the moment it forks (a vfork'd child has no hook to set them in)."""
    back = _given_back
    if back is None:
        yield
        return
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, back)
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def spawn(
    argv: Sequence[str], cpu: int | Collection[int] | None = None, die_with_vmtax: bool = True, **kw
) -> subprocess.Popen:
    """Start argv in a session of its own; it dies when vmtax does.  With
    cpu, it (and every process it starts) runs on that host CPU alone (or
    on these CPUs).

    die_with_vmtax=False is for short-lived children that end on their own
    once vmtax is gone (an agent dies writing to its closed pipe): without a
    preexec hook, Python starts them with vfork, ~10 ms faster per process
    than forking the whole interpreter."""
    setup = _child_setup(cpu) if die_with_vmtax or cpu is not None else None
    with _as_before() if cpu is None else nullcontext():  # a pinned child pins itself
        p = subprocess.Popen(list(argv), start_new_session=True, preexec_fn=setup, **kw)
    _live.add(p)
    return p


# -- what a controller killed outright leaves behind ---------------------------------
def private_dir(kind: str, parent: str | None = None) -> Path:
    """A fresh private directory named after this controller's pid and the
    boot and PID namespace that pid belongs to, so that a later run can tell
    whether its owner is still alive (see sweep)."""
    return Path(tempfile.mkdtemp(prefix=f"vmtax-{kind}-{os.getpid()}-{_pid_scope()}-", dir=parent))


_OWNED = re.compile(r"^vmtax-[a-z]+-(\d+)-([0-9a-f]{12})-")


def _pid_scope() -> str:
    """Where this process's pid means this process: its host's boot and its
    PID namespace (another namespace sharing /tmp has pids of its own), as a
    short hash; "unknown" without /proc."""
    boot, ns = boot_id(), pid_namespace()
    if "?" in (boot, ns):
        return "unknown"
    return hashlib.sha256(f"{boot}|{ns}".encode()).hexdigest()[:12]


def sweep(parent: str | None = None) -> list[str]:
    """Remove the private directories of controllers that are provably gone
    (a SIGKILLed vmtax cannot clean up after itself): made in this boot and
    this PID namespace, by a pid that no process has now.  What another
    namespace or boot made is left alone: its pid means nothing here.
    Returns what it removed."""
    parent, scope = parent or tempfile.gettempdir(), _pid_scope()
    removed: list[str] = []
    try:
        entries = os.listdir(parent)
    except OSError:
        return removed
    for name in entries:
        m = _OWNED.match(name)
        path = os.path.join(parent, name)
        if not m or m.group(2) != scope or int(m.group(1)) == os.getpid() or pid_alive(int(m.group(1))):
            continue
        try:
            if os.stat(path).st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def other_cpus(cpu: int | None) -> list[int]:
    """The host CPUs this thread may use other than `cpu`, where what runs
    beside a target pinned there goes (vmtax itself, QEMU's emulator
    threads, a network peer, an ssh master); empty when unpinned or when
    there is no other.  Inside keep_off too: its CPUs are already these."""
    if cpu is None:
        return []
    return sorted(os.sched_getaffinity(0) - {cpu})


def controller_cpus(cpu: int | Collection[int] | None) -> list[int]:
    """The host CPUs vmtax itself keeps to while its targets run on host
    CPU `cpu` (or on these CPUs: scale's copies spread over them;
    keep_off): every other CPU it may use; empty (it stays where it is)
    when unpinned, when there is no other, or when a CPU given is not one
    it may use."""
    pinned = {cpu} if isinstance(cpu, int) else set(cpu or ())
    mine = os.sched_getaffinity(0)
    return sorted(mine - pinned) if pinned and pinned <= mine else []


@contextmanager
def keep_off(cpu: int | Collection[int] | None) -> Iterator[list[int]]:
    """While the targets run on host CPU `cpu` (or on these CPUs), every
    thread of this process runs on the other CPUs (controller_cpus;
    yielded), as QEMU's emulator
    threads do (qemu.pin_emulator_apart): vmtax reads each sample line as
    the agent writes it, and a reader woken by a writer on one CPU is
    often put there, where it took the CPU from the agent's next sample
    (an A/A compare of the bare machine pinned to CPU 1: its agent was
    preempted by a Python task 2249-3689 times in 90 s with vmtax placed
    anywhere, 39-69 times with vmtax kept off; research/2026-11-27-keepoff/keepoff.md).  A child
    proc.spawn starts unpinned gets the CPUs vmtax had (_as_before); the
    programs vmtax runs for itself (subprocess.run: podman ps, qemu-img)
    keep to its own.  The CPUs it had are given back to every thread on
    every exit path (the moves themselves hold Ctrl-C: signals_held).  Not
    nested: a second keep_off inside one does nothing."""
    global _given_back
    others = controller_cpus(cpu)
    if not others or _given_back is not None:
        yield []
        return
    before = os.sched_getaffinity(0)
    try:
        with signals_held():
            _given_back = before
            _set_own_threads(set(others))
        yield others
    finally:
        with signals_held():
            _set_own_threads(before)
            _given_back = None


def _set_own_threads(cpus: set[int]) -> None:
    for tid in tasks([os.getpid()]) or [0]:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # a thread that has just ended
            continue


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is done, then act as
    they would have: a run's record is written whole or not at all, never
    cut between its row and its finish.  (Its Python handlers are swapped,
    not the signal mask: any thread may take a process's signal.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: got.append(signum)) for s in STOPS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if got:
            handler = old[signal.Signals(got[0])]
            if callable(handler):
                handler(got[0], None)  # vmtax's own: KeyboardInterrupt, here
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), got[0])


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
    # killed is not yet gone: a process tearing down its memory (UML's, a guest's) still runs for
    # a moment; return once every one has exited (a zombie waits only to be reaped), 3 s at most
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any(running(pid) for pid in tree if pid != p.pid):
        time.sleep(0.02)
    _live.discard(p)


def kill_tree(pid: int) -> None:
    """Kill a process that is not vmtax's child (a daemon its child left:
    podman's conmon), its process group and every descendant."""
    tree = descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for each in tree:
        try:
            os.kill(each, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_bounded(argv: Sequence[str], timeout: float) -> tuple[int | None, str]:
    """Run a short program for vmtax itself (no stdin), in a session of its
    own: (its exit status, its stdout); (None, what it wrote) when it ran
    past `timeout`, then killed with its whole process group and every
    descendant (what it started dies with it, not only the program)."""
    p = spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, ""
    finally:
        kill_group(p)
    return p.returncode, out.decode("utf-8", "replace")


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """Last resort on exit: kill every child still alive."""
    for p in list(_live):
        kill_group(p)


def stream_lines(
    argv: Sequence[str],
    timeout: float,
    stdin_data: bytes | None = None,
    env: dict | None = None,
    cpu: int | None = None,
    die_with_vmtax: bool = False,
    hold: Callable[[subprocess.Popen], None] | None = None,
) -> Iterator[str]:
    """Run argv, yield its stdout lines as they come.  The child is killed
    when the consumer stops early, on any exception (Ctrl-C included), and
    after `timeout` seconds.  A non-zero exit raises ChildFailed with the
    tail of its stderr.  hold: its stdin is a pipe left open, and hold gets
    the child as soon as it runs (to write its go line; see Target.go)."""
    p = spawn(
        argv,
        cpu=cpu,
        die_with_vmtax=die_with_vmtax,
        stdin=subprocess.PIPE if stdin_data is not None or hold else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    out, err_out = p.stdout, p.stderr
    assert out is not None and err_out is not None, "both piped"
    if hold is not None:
        hold(p)
    timer = threading.Timer(timeout, _signal_group, (p, signal.SIGKILL))
    timer.daemon = True
    timer.start()
    err_tail = bytearray()
    reader = threading.Thread(target=_keep_tail, args=(err_out, err_tail), daemon=True)
    reader.start()
    try:
        if stdin_data is not None:
            assert p.stdin is not None, "piped when there is data"
            p.stdin.write(stdin_data)
            p.stdin.close()
        for raw in read_lines(out):
            yield raw.decode("utf-8", "replace").rstrip("\n")
        p.wait()
        reader.join(timeout=5)
        _raise_on_failure(p, timer, err_tail)
    finally:
        timer.cancel()
        kill_group(p)
        if hold is not None:
            _close_stdin(p)


def _raise_on_failure(p: subprocess.Popen, timer: threading.Timer, err_tail: bytearray) -> None:
    """ChildFailed with the tail of its stderr where an ended child exited non-zero
    (timed out: the timer's kill ended it)."""
    timed_out = not timer.is_alive() and p.returncode == -signal.SIGKILL
    if p.returncode != 0:
        err = bytes(err_tail).decode("utf-8", "replace").strip()
        raise ChildFailed(p.returncode, err[-2000:], timed_out)


def _close_stdin(p: subprocess.Popen) -> None:
    """A held child's stdin closed (piped when held), whatever state the pipe is in."""
    if p.stdin is not None:
        try:
            p.stdin.close()
        except OSError:
            pass


MAX_LINE = 1 << 20  # bytes of one line of a child's output
TAIL = 64 << 10  # bytes kept of a child's stderr or a console log: what an error message quotes comes from its end


def _keep_tail(stream: IO[bytes], tail: bytearray, limit: int = TAIL) -> None:
    """Read a stream to its end keeping only its last `limit` bytes in
    tail (a child writing a GB to stderr costs the controller 64 KiB)."""
    while chunk := stream.read1(limit) if hasattr(stream, "read1") else stream.read(limit):
        tail += chunk
        del tail[: max(0, len(tail) - limit)]


def read_tail(path: str | os.PathLike, limit: int = TAIL) -> str:
    """The last `limit` bytes of a file (a console log that grew without
    bound), as text; OSError where it cannot be read."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - limit))
        return f.read(limit).decode("utf-8", "replace")


def read_lines(stream: IO[bytes], limit: int = MAX_LINE) -> Iterator[bytes]:
    """The lines of a binary stream, each read whole but never more than
    limit bytes of one: TargetError at the first longer line, the rest
    left unread (a target that prints 300 MB without a newline costs the
    controller a MiB, not 300 MB)."""
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise TargetError(f"a line of output longer than {limit} bytes, refused: {raw[:60]!r}...")
        yield raw


class ChildFailed(Exception):
    def __init__(self, returncode: int, stderr: str, timed_out: bool = False):
        self.returncode, self.stderr, self.timed_out = returncode, stderr, timed_out
        what = "timed out" if timed_out else f"exited with status {returncode}"
        tail = stderr.splitlines()[-1] if stderr else ""
        super().__init__(f"{what}{': ' + tail if tail else ''}")
