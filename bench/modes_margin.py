#!/usr/bin/env python3
"""Where should the fast stratum's cut sit? (a study, benchmark script, not a
test; issue 21.)  With modes 1.05x apart (5 within-mode SDs) the fast-mode
interval missed the truth in 6-7% of simulated rows (results/modes.md).
Candidates: count a process as fast only where the fitted mixture puts it
there at odds of K to 1 (K > 1 leaves out slow processes that strayed below
the cut; K < 1 keeps more of the fast mode's tail), against the true modes
(an oracle: what knowing each process's mode would give).

Usage: bench/modes_margin.py [--trials N] [--out results/modes-margin.md]
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vmtax import stats  # noqa: E402
from vmtax.analysis import fast_mode  # noqa: E402

ODDS = (0.01, 0.1111, 1.0001, 9.0, 99.0, 999.0)


def draw(rng, blocks: int, tax: float, shared: float, slow_by: float):
    base, cand, fast = {}, {}, []
    for k in range(blocks):
        host = rng.random() < 0.3
        sb = host if rng.random() < shared else rng.random() < 0.3
        sc = host if rng.random() < shared else rng.random() < 0.3
        base[k] = 100.0 * (slow_by if sb else 1.0) * math.exp(rng.normal(0, 0.01))
        cand[k] = 100.0 * tax * (slow_by if sc else 1.0) * math.exp(rng.normal(0, 0.01))
        if not sb and not sc:
            fast.append(k)
    return base, cand, fast


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    t0 = time.time()
    head = " | ".join(f"odds {k:.3g}:1" for k in ODDS)
    out = [f"`bench/modes_margin.py --trials {args.trials}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
           "a simulation: 60 blocks, 30% of processes in the slow mode, 1% within-mode SD)", "",
           "Share of rows whose fast-mode 95% interval missed the true ratio (median fast-mode blocks):", "",
           f"| scenario | slow mode | true ratio | the true modes (oracle) | {head} |",
           "|---|---:|---:|---:|" + "---:|" * len(ODDS)]
    for scen, shared, slow_by in (("per-process modes", 0.0, 1.05), ("a state shared within a block 80%", 0.8, 1.05),
                                  ("per-process modes", 0.0, 1.3), ("a state shared within a block 80%", 0.8, 1.3)):
        for tax in (1.0, 1.5):
            seed = int(tax * 10) + int(shared * 100) + int(slow_by * 1000)
            cells = []
            rng = np.random.default_rng(seed)
            miss = 0
            for _ in range(args.trials):
                base, cand, keep = draw(rng, 60, tax, shared, slow_by)
                _, lo, hi, _ = stats.compare_paired([cand[k] for k in keep], [base[k] for k in keep])
                miss += not lo <= tax <= hi
            cells.append(f"{miss / args.trials:.1%}")
            for odds in ODDS:
                stats.MODES_SURE_ODDS = odds
                rng = np.random.default_rng(seed)
                n = miss = 0
                blocks = []
                for _ in range(args.trials):
                    base, cand, _ = draw(rng, 60, tax, shared, slow_by)
                    f = fast_mode(base, cand, stats.modes(list(base.values())), stats.modes(list(cand.values())))
                    if f is not None and math.isfinite(f.ci_low):
                        n += 1
                        miss += not f.ci_low <= tax <= f.ci_high
                        blocks.append(f.blocks)
                cells.append(f"{miss / n:.1%} ({statistics.median(blocks):.0f})" if n else "-")
            out.append(f"| {scen} | {slow_by:g}x | {tax:g} | " + " | ".join(cells) + " |")
    out += ["", f"({time.time() - t0:.0f} s)"]
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
