"""Live progress on stderr: one redrawn line with an ETA on a terminal, one
line per finished benchmark otherwise."""

from __future__ import annotations

import sys
from typing import TextIO

from .safe import inert, one_line
from .units import fmt_duration, fmt_pct


class TerminalProgress:
    def __init__(self, stream: TextIO | None = None, goal: float = 0.01):
        self.stream, self.goal = stream or sys.stderr, goal  # sys.stderr now, not at import
        self.tty = self.stream.isatty()
        self._drawn = False

    def update(self, index, total, job, states, precision_now, elapsed, eta) -> None:
        if not self.tty:
            return
        n = sum(len(st.values) for st in states.values())
        msg = (
            f"[{index + 1}/{total}] {job.name:<14} n={n:<5} ±{fmt_pct(precision_now, 2):>7}"
            f" (goal {fmt_pct(self.goal)})  elapsed {fmt_duration(elapsed)}  ETA {fmt_duration(eta)}"
        )
        self.stream.write("\r\x1b[2K" + inert(msg[:120]))
        self.stream.flush()
        self._drawn = True

    def finished(self, index, total, spec, outcome) -> None:
        if self.tty:
            return
        how = ", ".join(f"{t}: {o}" for t, o in outcome.items())
        self.stream.write(one_line(f"[{index + 1}/{total}] {spec.name}: {how}") + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        """One line of its own (a host that could not be reached)."""
        self.close()
        self.stream.write(inert(text) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False
