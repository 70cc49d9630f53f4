"""The machine itself: the baseline of every comparison."""
from __future__ import annotations

from typing import Iterator

from .. import proc
from ..agent import agent_path
from .base import Target


class LocalTarget(Target):
    kind = "local"
    summary = "this machine, bare (or whatever it runs on)"

    def run_agent(self, args: list[str], timeout: float) -> Iterator[str]:
        return proc.stream_lines([str(agent_path()), *args], timeout=timeout)
