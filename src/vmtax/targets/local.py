"""The machine itself: the baseline of every comparison."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

from .. import proc
from ..agent import agent_path
from .base import Target

SHM = "/dev/shm"  # tmpfs on every Linux with glibc: the same filesystem a guest's /tmp is


class LocalTarget(Target):
    kind = "local"
    summary = "this machine, bare (or whatever it runs on)"
    mirror_host = True

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        self.scratch: Path | None = None

    def start(self) -> None:
        parent = SHM if os.path.isdir(SHM) and os.access(SHM, os.W_OK) else None
        proc.sweep(parent)
        self.scratch = proc.private_dir(self.kind, parent)

    def stop(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def scratch_dir(self) -> str | None:
        return str(self.scratch) if self.scratch else None

    def run_agent(self, args: list[str], timeout: float) -> Iterator[str]:
        return proc.stream_lines([str(agent_path()), *args], timeout=timeout)

    def run_tool(self, argv: list[str], timeout: float) -> Iterator[str]:
        # the host's own tools, on the CPU a one-vCPU guest gets (like for like)
        # (a tool may leave a server behind it: it dies with vmtax, see workloads.PRELUDE)
        return proc.stream_lines(argv, timeout=timeout, cpu=self.host_cpu, die_with_vmtax=True)
