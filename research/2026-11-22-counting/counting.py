#!/usr/bin/env python3
"""Does counting move the timing? (benchmark script, not a test)

vmtax counts (perf events, getrusage, the host probe) only in extra
counting processes, never in a timed sample: an open counter cost 8-14% of
the timed figure on system calls and context switches here.  This checks
the whole arrangement, side by side in one run:

    vmtax compare local:counters=off local --max-time 6m

The baseline runs no counting process; the candidate runs one every few
blocks, between its timed ones.  Every ratio is the candidate's timed figure
over the baseline's: the goal is within 1% of 1, with no more rows flagged
than chance allows.  Writes results/counting.md and the JSON beside it.

Usage: .venv/bin/python bench/counting.py [--max-time 6m] [--reuse]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-time", default="6m")
    ap.add_argument("--reuse", action="store_true", help="re-analyse the stored JSON only")
    args = ap.parse_args()
    doc_path = OUT / "counting.json"
    cmd = [VMTAX, "--db", "/tmp/vmtax-counting.db", "compare", "local:counters=off", "local",
           "--max-time", args.max_time, "--json", str(doc_path)]
    if not args.reuse:
        print("$ " + " ".join(cmd), file=sys.stderr)
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode not in (0, 3):
            sys.exit(f"failed ({p.returncode}): {p.stderr[-2000:]}")
    doc = json.loads(doc_path.read_text())
    cs = doc["comparisons"]
    dev = [abs(c["ratio"] - 1) for c in cs]
    flagged = [c for c in cs if c["significant"]]
    lines = ["# Does counting move the timing?", "",
             f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/counting.py`: "
             f"`{' '.join(['vmtax', *cmd[3:-2]])}` (run `{doc['run_id']}`, JSON in "
             "`results/counting.json`; pinned as its header says).", "",
             f"{len(cs)} rows; the timed figure with counting processes among the timed ones, over the "
             f"same without: median |ratio − 1| **{statistics.median(dev) * 100:.2f}%**, largest "
             f"{max(dev) * 100:.2f}%; rows whose ratio is within 1% of 1: {sum(d <= 0.01 for d in dev)}; "
             f"flagged at 5%: {len(flagged)} (about {0.05 * len(cs):.1f} expected by chance).", "",
             "| benchmark | ratio | 95% CI | flagged |", "|---|---:|---:|---|"]
    for c in cs:
        ci = (f"{c['ratio_ci_low']:.3f}–{c['ratio_ci_high']:.3f}"
              if c["ratio_ci_low"] is not None and c["ratio_ci_high"] is not None else "unbounded")
        lines.append(f"| {c['benchmark']} | {c['ratio']:.3f} | {ci} | {'*' if c['significant'] else ''} |")
    (OUT / "counting.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
