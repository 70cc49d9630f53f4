"""The one Target interface.  A target starts, stops, runs the agent with
arguments and streams its output lines back, and reports facts about
itself.  Every concrete target cleans up its processes in stop(), which the
context manager calls on every exit path."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Iterator

from ..errors import UserError
from ..model import TargetInfo


class Target(ABC):
    kind: ClassVar[str]
    summary: ClassVar[str] = ""
    # every kind also takes label=TEXT, so that `local local:label=b` is an A/A pair
    allowed_options: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, name: str, options: dict[str, str]):
        unknown = set(options) - self.allowed_options - {"label"}
        if unknown:
            known = sorted(self.allowed_options | {"label"})
            raise UserError(f"target '{name}': unknown option(s) {', '.join(sorted(unknown))} "
                            f"(known: {', '.join(known)})")
        self.name = name
        self.options = options
        self.boot_s: float | None = None
        self._facts: dict | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """Whether this kind works on this machine, and why not."""
        return True, ""

    def start(self) -> None:
        """Bring the target up (boot a guest, open a connection)."""

    def stop(self) -> None:
        """Tear everything down; must be safe to call twice."""

    @abstractmethod
    def run_agent(self, args: list[str], timeout: float) -> Iterator[str]:
        """Run the agent with args; yield its stdout lines as they arrive.
        Raises proc.ChildFailed (or TargetError) when it fails."""

    def facts(self) -> dict:
        """The agent's --env report from inside the target, plus the
        target's own facts (cached: the environment of a run is fixed)."""
        if self._facts is None:
            from ..agent import parse_line
            from ..errors import AgentError, TargetError
            from ..proc import ChildFailed
            try:
                lines = [l for l in self.run_agent(["--env"], timeout=60) if l.strip()]
                self._facts = parse_line(lines[-1]) if lines else {}
            except (ChildFailed, AgentError) as e:
                raise TargetError(f"{self.name}: the agent could not report its environment: {e}") from None
            self._facts.pop("schema", None)
            self._facts.pop("type", None)
            self._facts.update(self.own_facts())
        return self._facts

    def own_facts(self) -> dict:
        return {"target_kind": self.kind}

    def info(self) -> TargetInfo:
        return TargetInfo(name=self.name, kind=self.kind, facts=self.facts(),
                          accel=self.options.get("accel"), boot_s=self.boot_s)

    def __enter__(self) -> "Target":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
