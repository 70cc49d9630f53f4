#!/usr/bin/env python3
"""How long should a lockstep sample be? (benchmark script, not a test)

Runs one compare at each --step-ms in turn, the order reversed every
other pass (ABBA: the host's drift falls on every length alike), and
says, per candidate and length, what a row's ±1% would cost: over the
rows, the geometric mean of (variance of the block log ratios x a block's
seconds), times (2 / 0.01)^2 -- the seconds of blocks that give a 95%
interval of ±1% (t about 2), whatever the budget let each run reach.

Usage: .venv/bin/python research/2026-11-28-step-ms/step_sweep.py [--steps 0.25,0.5,1,2] [--rounds 2]
           [--max-time 90s] [--out step-ms] -- local local:label=aa container uml --bench getppid stat
       .venv/bin/python research/2026-11-28-step-ms/step_sweep.py --read DB [DB ...]      (sweeps' databases read again, a table each)

Writes results/OUT.db (the runs) and results/OUT.md (the table, the
commands, the time).  --precision 0.2% by default, so that every run
spends its budget rather than stopping at ±1%.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VMTAX = REPO / ".venv" / "bin" / "vmtax"


def order(steps: list[float], rounds: int) -> list[float]:
    """ABBA: each pass over the lengths, every other one reversed."""
    return [s for r in range(rounds) for s in (steps if r % 2 == 0 else steps[::-1])]


def costs(db_paths: list[str]) -> dict[str, dict[float, list[float]]]:
    """candidate -> step -> each row's variance of block log ratios x mean block seconds."""
    out: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in db_paths:
        db = sqlite3.connect(path)
        for run, cfg in db.execute("SELECT id, config_json FROM runs WHERE kind = 'compare'"):
            step = float(json.loads(cfg).get("step_ms", 1.0))
            names = [
                n for (n,) in db.execute("SELECT name FROM run_targets WHERE run_id = ? ORDER BY position", (run,))
            ]
            spans = {
                (b, k): s
                for b, k, s in db.execute(
                    "SELECT benchmark, block, MAX(ended) - MIN(started) FROM processes WHERE run_id = ? "
                    "GROUP BY benchmark, block",
                    (run,),
                )
            }
            means: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
            for b, k, t, m in db.execute(
                "SELECT benchmark, block, target, AVG(value) FROM samples WHERE run_id = ? AND warmup = 0 "
                "AND block IS NOT NULL GROUP BY benchmark, block, target",
                (run,),
            ):
                means[(b, k)][t] = m
            for cand in names[1:]:
                rows: dict[str, list[tuple[float, float]]] = defaultdict(list)
                for (b, k), m in means.items():
                    if cand in m and names[0] in m and (b, k) in spans:
                        rows[b].append((math.log(m[cand] / m[names[0]]), spans[(b, k)]))
                for blocks in rows.values():
                    if len(blocks) >= 6:
                        ys = [y for y, _ in blocks]
                        out[cand][step].append(statistics.variance(ys) * statistics.mean(s for _, s in blocks))
    return out


def table(c: dict[str, dict[float, list[float]]]) -> list[str]:
    lines = [
        "| candidate | --step-ms | rows | seconds of blocks for ±1% (geometric mean over rows) |",
        "|---|---|---|---|",
    ]
    for cand, by in c.items():
        for step in sorted(by):
            g = math.exp(statistics.mean(math.log(v) for v in by[step]))
            lines.append(f"| {cand} | {step:g} | {len(by[step])} | {(2 / 0.01) ** 2 * g:.1f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="0.25,0.5,1,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-time", default="90s")
    ap.add_argument("--precision", default="0.2%")
    ap.add_argument("--out", default="step-ms")
    ap.add_argument("--read", nargs="+", metavar="DB", help="only read these sweep databases again")
    ap.add_argument("compare", nargs="*", help="after --: compare's targets and options")
    a = ap.parse_args()
    if a.read:  # one table a sweep: sweeps an hour apart met other noise
        for path in a.read:
            print("\n".join([path, *table(costs([path])), ""]))
        return 0
    if not a.compare:
        ap.error("give compare's targets after --")
    steps = [float(s) for s in a.steps.split(",")]
    db, md = REPO / "results" / f"{a.out}.db", REPO / "results" / f"{a.out}.md"
    started, commands = time.strftime("%Y-%m-%d %H:%M"), []
    for step in order(steps, a.rounds):
        argv = [
            str(VMTAX),
            "--db",
            str(db),
            "compare",
            *a.compare,
            "--precision",
            a.precision,
            "--max-time",
            a.max_time,
            "--step-ms",
            f"{step:g}",
        ]
        commands.append("vmtax " + " ".join(argv[1:]))
        print(f"[{time.strftime('%H:%M:%S')}] --step-ms {step:g}", flush=True)
        rc = subprocess.run(argv, stdout=subprocess.DEVNULL).returncode
        if rc not in (0, 1):
            print(f"step_sweep: vmtax exited {rc}; stopping", file=sys.stderr)
            return rc
    lines = [
        f"# Lockstep sample length: {started} to {time.strftime('%H:%M')}",
        "",
        *table(costs([str(db)])),
        "",
        "Commands, in the order run:",
        "",
        *(f"    {c}" for c in commands),
        "",
    ]
    md.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
