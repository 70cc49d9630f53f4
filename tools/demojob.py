"""The main job as the Makefile runs it (`make demo`), for the benchmark
scripts that run it themselves: one place reads it, so they follow the
Makefile when it changes; and the ways those scripts run a compare side by
side (its mode flag), named once."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

MAKEFILE = Path(__file__).resolve().parents[1] / "Makefile"


def demo_args(makefile: Path = MAKEFILE) -> list[str]:
    """The words after $(VMTAX) in the demo recipe, $(DEMO_BENCH) expanded."""
    make = makefile.read_text().replace("\\\n", " ")
    bench = re.search(r"^DEMO_BENCH\s*:=\s*(.+)$", make, re.M)
    recipe = re.search(r"^demo:.*\n\t\$\(VMTAX\) (.+)$", make, re.M)
    if not (bench and recipe):
        raise SystemExit(f"{makefile}: no DEMO_BENCH or demo recipe running $(VMTAX)")
    words = recipe.group(1).split()
    out = []
    for w in words:
        out += bench.group(1).split() if w == "$(DEMO_BENCH)" else [w]
    return out


WAY_FLAG = {"plain": [], "fast": ["--fast-mode"], "same": ["--same-mode"]}  # a way: the compare's mode flag
WAY_NAME = {"plain": "as before", "fast": "with --fast-mode", "same": "with --same-mode"}


def ways_arg(value: str) -> list[str]:
    """--ways WAY,WAY for argparse: each of WAY_FLAG at most once."""
    ways = value.split(",")
    if not set(ways) <= set(WAY_FLAG) or len(set(ways)) != len(ways):
        raise argparse.ArgumentTypeError(f"each of {', '.join(WAY_FLAG)} at most once, got {value}")
    return ways


def rotated(ways: list[str], r: int) -> list[str]:
    """Round r's order of the ways: rotated round by round (ABBA with two ways), so drift falls on each alike."""
    k = r % len(ways)
    return ways[k:] + ways[:k]
