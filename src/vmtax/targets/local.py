"""The machine itself: the baseline of every comparison.

Option dir=PATH: the scratch directory's parent (default /dev/shm, a tmpfs
like a guest's /tmp); a directory on the host's disk (local:dir=/var/tmp) is
the baseline for guests with a disk (qemu:disk=virtio) and the disk suite."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from .. import proc
from ..agent import agent_path
from ..errors import TargetError, UserError
from ..hostproc import descendants
from .base import GATE, Target

SHM = "/dev/shm"  # tmpfs on every Linux with glibc: the same filesystem a guest's /tmp is
# a workload's tool held at the barrier (run_gated), as vmtax-shell's WAIT holds it in a guest
GATE_SH = f'echo {GATE}; IFS= read -r go; [ "$go" = go ] || exit 125; exec "$@" </dev/null'


# kernel interfaces that look like directories: nothing can be created in them
PSEUDO = frozenset(
    {
        "proc",
        "sysfs",
        "cgroup",
        "cgroup2",
        "debugfs",
        "tracefs",
        "securityfs",
        "configfs",
        "pstore",
        "bpf",
        "efivarfs",
        "devpts",
        "mqueue",
        "hugetlbfs",
        "fusectl",
    }
)


class LocalTarget(Target):
    capabilities = frozenset({"barrier", "step"})
    kind = "local"
    summary = "this machine, bare (or whatever it runs on)"
    mirror_host = True

    allowed_options = Target.allowed_options | {"dir"}

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        self.scratch: Path | None = None
        self.held = None  # the run held at the barrier (run_gated), until it ends
        self.parent = options.get("dir")
        if self.parent is not None and not (os.path.isdir(self.parent) and os.access(self.parent, os.W_OK)):
            raise UserError(f"target '{name}': dir={self.parent} is not a writable directory")
        if self.parent is not None and filesystem(self.parent) in PSEUDO:
            raise UserError(
                f"target '{name}': dir={self.parent} is on {filesystem(self.parent)}, not a filesystem "
                f"files can be made in (try /var/tmp or /dev/shm)"
            )

    def peer_address(self) -> str | None:
        return "127.0.0.1"  # the same pair over loopback: like for like

    def on_disk(self) -> bool:
        return filesystem(self.parent or SHM) not in ("tmpfs", "ramfs", "")

    def own_facts(self) -> dict:
        where = self.parent or SHM
        return {**super().own_facts(), "scratch_fs": filesystem(where) or "?", "scratch_parent": where}

    def start(self) -> None:
        parent = self.parent or (SHM if os.path.isdir(SHM) and os.access(SHM, os.W_OK) else None)
        proc.sweep(parent)
        self.scratch = proc.private_dir(self.kind, parent)

    def stop(self) -> None:
        held, self.held = self.held, None
        if held is not None and held.poll() is None:  # held at the barrier, or released and running
            proc.kill_group(held)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def scratch_dir(self) -> str | None:
        return str(self.scratch) if self.scratch else None

    def run_agent(self, args: list[str], timeout: float) -> Iterator[str]:
        return proc.stream_lines([str(agent_path()), *args], timeout=timeout)

    def run_gated(self, argv: list[str], timeout: float, tool: bool = False) -> Iterator[str]:
        cmd = ["/bin/sh", "-c", GATE_SH, "vmtax-gate", *argv] if tool else [str(agent_path()), *argv]
        return proc.stream_lines(
            cmd, timeout=timeout, cpu=self.host_cpu if tool else None, die_with_vmtax=tool, hold=self._hold
        )

    def _hold(self, p) -> None:
        self.held = p

    def go(self) -> None:
        p = self.held
        if p is None or p.poll() is not None:
            from ..errors import TargetError

            raise TargetError(f"{self.name}: no run is held at the barrier")
        try:
            p.stdin.write(b"go\n")
            p.stdin.close()
        except (OSError, ValueError) as e:
            from ..errors import TargetError

            raise TargetError(f"{self.name}: cannot release the held run ({e})") from None

    def step(self, warm: bool = False) -> None:
        self._send(b"warm\ngo\n" if warm else b"go\n")

    def release(self) -> None:
        p = self.held
        if p is not None and p.poll() is None:
            try:
                self._send(b"stop\n")
            except TargetError:
                proc.kill_group(p)

    def _send(self, line: bytes) -> None:
        """A line to the held run's stdin, left open for the next."""
        p = self.held
        if p is None or p.poll() is not None:
            raise TargetError(f"{self.name}: no run is held")
        try:
            p.stdin.write(line)
            p.stdin.flush()
        except (OSError, ValueError) as e:
            raise TargetError(f"{self.name}: cannot write to the held run ({e})") from None

    def host_pids(self) -> list[int]:
        p = self.held
        return descendants(p.pid) if p is not None and p.poll() is None else []

    def memory_need_mb(self) -> float:
        return 16.0  # the agent: a static binary, its working set is small

    def run_tool(self, argv: list[str], timeout: float) -> Iterator[str]:
        # the host's own tools, on the CPU a one-vCPU guest gets (like for like)
        # (a tool may leave a server behind it: it dies with vmtax, see workloads.PRELUDE)
        return proc.stream_lines(argv, timeout=timeout, cpu=self.host_cpu, die_with_vmtax=True)


def filesystem(path: str) -> str:
    """The type of the filesystem a path is on, as /proc/self/mountinfo
    says ('' when it cannot tell)."""
    real, best, kind = os.path.realpath(path), "", ""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                point = left.split()[4].replace("\\040", " ")
                if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                    best, kind = point, right.split()[0]
    except (OSError, IndexError):
        return ""
    return kind
