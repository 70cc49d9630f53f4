"""Durations for people and from people: '1h05m', '6m', '90s'.  In the base
layer, so the planner and the runner can say a budget without importing the
report (report.units re-exports both)."""

from __future__ import annotations

import re


def fmt_duration(s: float) -> str:
    s = max(0, round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def parse_duration(text: str) -> float:
    """'6m', '90s', '1h30m', '500ms', '2.5m' or a plain number of seconds."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", t)
    if not parts or "".join(n + u for n, u in parts) != t:
        raise ValueError(f"malformed duration '{text}' (try 90s, 6m, 1h30m)")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * scale[u] for n, u in parts)
