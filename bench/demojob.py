"""The main job as the Makefile runs it (`make demo`), for the benchmark
scripts that run it themselves: one place reads it, so they follow the
Makefile when it changes."""
from __future__ import annotations

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
