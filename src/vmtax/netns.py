"""Network namespaces vmtax makes for itself: the host side of a guest's tap
and of a container's bridge lives in one, with the peers that serve the net
suite, never in the host's own namespace.  The host's interfaces, addresses
and routing table are never touched, and no benchmark traffic leaves
loopback or a namespace vmtax made.

A namespace is anonymous: a holder process (`unshare --net`, which dies with
vmtax through proc.spawn) keeps it alive, and so does every socket and tap
opened in it.  When the holder and those descriptors are gone, the kernel
removes the namespace with every device in it: nothing needs sweeping, on
any exit path.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from . import proc
from .errors import TargetError

_CLONE_NEWNET = 0x40000000
_setns: Callable[..., int] | None
try:
    _setns = ctypes.CDLL(None, use_errno=True).setns
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _setns = None


def netns_allowed() -> str | None:
    """Why this user cannot make a network namespace, or None."""
    if os.geteuid() != 0:
        return "a network namespace and its devices need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
    if _setns is None:
        return "this C library has no setns()"
    return None


class NetNs:
    """A network namespace of vmtax's own, with loopback up."""

    def __init__(self, what: str):
        self.what = what
        self.holder: subprocess.Popen | None = None
        why = netns_allowed()
        if why:
            raise TargetError(f"{what}: {why}")
        try:
            # the holder says it is inside before it sleeps: no race with its unshare
            self.holder = proc.spawn(
                ["unshare", "--net", "--", "/bin/sh", "-c", "echo in; exec sleep infinity"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as e:
            raise TargetError(f"{what}: cannot start unshare for a network namespace: {e.strerror}") from None
        assert self.holder.stdout is not None and self.holder.stderr is not None, "both piped"
        line = self.holder.stdout.readline()
        if line.strip() != b"in":
            err = (
                self.holder.stderr.read(300).decode(errors="replace").strip()
                if self.holder.poll() is not None
                else "no word from it"
            )
            self.close()
            raise TargetError(f"{what}: unshare --net failed: {err or 'no message'}")
        self.path = f"/proc/{self.holder.pid}/ns/net"
        try:
            self.inode = os.stat(self.path).st_ino
            self.run(["ip", "link", "set", "lo", "up"])
        except (OSError, TargetError) as e:
            self.close()
            raise TargetError(f"{what}: {e}") from None

    @property
    def pid(self) -> int:
        assert self.holder is not None, "open until closed"
        return self.holder.pid

    def argv(self, argv: Sequence[str]) -> list[str]:
        """argv to run inside this namespace (nsenter execs it: same pid)."""
        return ["nsenter", f"--net={self.path}", "--", *argv]

    def run(self, argv: Sequence[str]) -> str:
        """Run a short command inside; TargetError with its message if it fails."""
        try:
            p = subprocess.run(self.argv(argv), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as e:
            raise TargetError(f"{self.what}: {' '.join(argv[:3])}: {e}") from None
        if p.returncode != 0:
            raise TargetError(f"{self.what}: {' '.join(argv)} failed: {(p.stderr or p.stdout).strip()[:300]}")
        return p.stdout

    @contextmanager
    def entered(self) -> Iterator[None]:
        """This thread inside the namespace (what it opens is created there),
        back in its own afterwards."""
        assert _setns is not None, "__init__ checked it (netns_allowed)"
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        ours = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if _setns(ours, _CLONE_NEWNET) != 0:
                e = ctypes.get_errno()
                raise TargetError(f"{self.what}: cannot enter its network namespace: {os.strerror(e)}")
            try:
                yield
            finally:
                if _setns(own, _CLONE_NEWNET) != 0:  # pragma: no cover - setns back to our own cannot fail
                    raise SystemExit("vmtax: cannot return to the host's network namespace")
        finally:
            os.close(ours)
            os.close(own)

    def describe(self) -> str:
        return f"net:[{self.inode}]"

    def close(self) -> None:
        """End the holder: the namespace goes once nothing else holds it."""
        if self.holder is not None:
            proc.kill_group(self.holder)
            for f in (self.holder.stdout, self.holder.stderr):
                if f is not None:
                    f.close()
            self.holder = None
