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
has one mode; at most 120 blocks; with --confirm also "own" that stops only
once the interval the report will give is as narrow, as the runner does
since 2026-11-26).  The test is the report's:
analysis.same_mode (stats.ModeTest, with analysis.modes_agree) where it
gives an interval, else the sign-flip test over every block.

Usage: .venv/bin/python bench/samestop.py [--trials 1500] [--straddle 1.0] [--sd 0.03] [--slow-by 1.5] [--confirm]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from modestop import aa_blocks  # noqa: E402
from vmtax import analysis, stats  # noqa: E402

PRECISION = 0.01


def trial(rng, nmax: int, stop: bool, straddle: float, slow_by: float, sd: float,
          least: int = 10, confirm: bool = False) -> tuple[bool, bool, int, float]:
    """(flagged, reported over the same-mode stratum, blocks run, the reported
    half-width) of one A/A row; `confirm`: the stop also asks the interval
    the report will give (analysis.reported_halfwidth), as the runner does
    since 2026-11-26."""
    base, cand = {}, {}
    k = 0
    for k, (b, c) in zip(range(nmax), aa_blocks(rng, straddle, slow_by, sd)):
        base[k], cand[k] = b, c
        if stop and k + 1 >= least:
            bm, cm = stats.modes(list(base.values())), stats.modes(list(cand.values()))
            got = analysis.stop_blocks(base, cand, bm, cm, same=True)
            if got is not None:
                fast, slowb = got
                keep = fast + slowb
                width = (stats.stop_halfwidth_strata([cand[i] for i in keep], [base[i] for i in keep],
                                                     [0] * len(fast) + [1] * len(slowb))
                         if len(keep) >= 6 else math.inf)
            else:
                width = stats.stop_halfwidth(*stats.paired(cand, base))
            if width <= PRECISION and (not confirm or analysis.reported_halfwidth(
                    base, cand, analysis.same_mode(base, cand, bm, cm)) <= PRECISION):
                break
    same = analysis.same_mode(base, cand, stats.modes(list(base.values())), stats.modes(list(cand.values())))
    if same is None or not (math.isfinite(same.ci_low) and math.isfinite(same.ci_high)):
        r, lo, hi, p = stats.compare_paired(*stats.paired(cand, base))
        return p < 0.05, False, k + 1, stats.ratio_ci_rel(r, lo, hi)
    return same.p_value < 0.05, True, k + 1, stats.ratio_ci_rel(same.ratio, same.ci_low, same.ci_high)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=1500)
    ap.add_argument("--straddle", type=float, default=1.0)
    ap.add_argument("--sd", type=float, default=0.03)
    ap.add_argument("--slow-by", type=float, default=1.5)
    ap.add_argument("--confirm", action="store_true", help="also the stop that confirms the reported interval")
    a = ap.parse_args()
    print(f"straddle {a.straddle:g}, within-mode SD {a.sd:.1%}, slow state {a.slow_by:g}x, {a.trials} A/A trials each")
    print("| stop | A/A flagged | reported over the same-mode stratum | blocks run (median) | reported within ±1% |")
    print("|---|---:|---:|---:|---:|")
    ways = (("none (60 blocks)", False, 60, False), ("--same-mode at ±1%", True, 120, False),
            ("--same-mode at ±1%, the report's interval confirmed", True, 120, True))
    for name, stop, nmax, confirm in ways[:3 if a.confirm else 2]:
        rng = np.random.default_rng(7)
        got = [trial(rng, nmax, stop, a.straddle, a.slow_by, a.sd, confirm=confirm) for _ in range(a.trials)]
        flagged = sum(g[0] for g in got)
        print(f"| {name} | {flagged} of {a.trials} ({flagged / a.trials:.1%}) | {sum(g[1] for g in got)} | "
              f"{np.median([g[2] for g in got]):.0f} | {sum(g[3] <= PRECISION for g in got)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
