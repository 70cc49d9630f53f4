#!/usr/bin/env python3
"""Does --same-mode's stop raise the A/A error rate?  (benchmark script,
not a test; issue 21: under the hog on an AMD host, the A/A rows that
stopped on precision were flagged 21 of 240, results/validity-hog-amd.md.)

bench/modestop.py's simulated host (a state that flips in stretches of
0.5-2 s, processes of 0.09 s, the slow state --slow-by times slower, a
within-mode spread of --sd; --straddle: the share of processes in which the
state changes that run partly slow), here for the same-mode stratum: each
A/A trial runs blocks of two processes in a random order, either a fixed
60 blocks ("none") or until the runner's --same-mode stop ends it ("own":
from block 10, the blocks analysis.stop_blocks keeps, each side's own cut,
judged by stats.stop_halfwidth_strata at +-1%, or every block where a side
has one mode; at most 120 blocks).  The test is the report's:
analysis.same_mode (stats.ModeTest, with analysis.modes_agree) where it
gives an interval, else the sign-flip test over every block.

Usage: .venv/bin/python bench/samestop.py [--trials 1500] [--straddle 1.0] [--sd 0.03] [--slow-by 1.5]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from modestop import aa_blocks  # noqa: E402
from vmtax import analysis, stats  # noqa: E402

PRECISION = 0.01


def trial(rng, nmax: int, stop: bool, straddle: float, slow_by: float, sd: float,
          least: int = 10) -> tuple[bool, bool, int]:
    """(flagged, reported over the same-mode stratum, blocks run) of one A/A row."""
    base, cand = {}, {}
    k = 0
    for k, (b, c) in zip(range(nmax), aa_blocks(rng, straddle, slow_by, sd)):
        base[k], cand[k] = b, c
        if stop and k + 1 >= least:
            got = analysis.stop_blocks(base, cand, stats.modes(list(base.values())),
                                       stats.modes(list(cand.values())), same=True)
            if got is not None:
                fast, slowb = got
                keep = fast + slowb
                width = (stats.stop_halfwidth_strata([cand[i] for i in keep], [base[i] for i in keep],
                                                     [0] * len(fast) + [1] * len(slowb))
                         if len(keep) >= 6 else math.inf)
            else:
                width = stats.stop_halfwidth(*stats.paired(cand, base))
            if width <= PRECISION:
                break
    same = analysis.same_mode(base, cand, stats.modes(list(base.values())), stats.modes(list(cand.values())))
    if same is None or not (math.isfinite(same.ci_low) and math.isfinite(same.ci_high)):
        *_, p = stats.compare_paired(*stats.paired(cand, base))
        return p < 0.05, False, k + 1
    return same.p_value < 0.05, True, k + 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=1500)
    ap.add_argument("--straddle", type=float, default=1.0)
    ap.add_argument("--sd", type=float, default=0.03)
    ap.add_argument("--slow-by", type=float, default=1.5)
    a = ap.parse_args()
    print(f"straddle {a.straddle:g}, within-mode SD {a.sd:.1%}, slow state {a.slow_by:g}x, {a.trials} A/A trials each")
    print("| stop | A/A flagged | reported over the same-mode stratum | blocks run (median) |")
    print("|---|---:|---:|---:|")
    for stop, nmax in ((False, 60), (True, 120)):
        rng = np.random.default_rng(7)
        got = [trial(rng, nmax, stop, a.straddle, a.slow_by, a.sd) for _ in range(a.trials)]
        flagged = sum(g[0] for g in got)
        print(f"| {'--same-mode at ±1%' if stop else 'none (60 blocks)'} | {flagged} of {a.trials} "
              f"({flagged / a.trials:.1%}) | {sum(g[1] for g in got)} | {np.median([g[2] for g in got]):.0f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
