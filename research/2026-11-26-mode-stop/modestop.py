#!/usr/bin/env python3
"""Does stopping on the fast stratum's width raise the A/A error rate?
(benchmark script, not a test; issue 21: under the RT hog, `compare
--fast-mode` runs flagged 16 of 186 A/A rows where the plain runs' own
fast-mode notes flagged 8, results/validity-hog.md.)

A simulation of the runner's loop on A/A pairs: blocks of two processes in
a random order, a host state that flips in stretches of 0.5-2 s (processes
of 0.09 s, as getppid's under the hog), the slow state 1.5x, 1% within-mode
spread; with `straddle` = 1 a process in which the state changes is partly
slow (a mean between the modes, near the cuts).  Each trial runs up to 60
blocks; with the stop, it ends as the runner's does with --fast-mode: once
both sides have two modes and the stratum (analysis.stop_blocks, each
side's own cut, as the runner's stop keeps it) has 10
blocks whose stats.stop_halfwidth is at most the precision.  The test is
the fast-mode one (stats.compare_paired over the stratum, at least 6
blocks), as the reports make it.

Usage: .venv/bin/python bench/modestop.py [--trials 600]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from vmtax import stats  # noqa: E402
from vmtax.analysis import stop_blocks  # noqa: E402

PROCESS_S = 0.09


def _fast(base: dict, cand: dict) -> list[int] | None:
    """The blocks both sides' processes fell in their fast mode, each side's
    mode by its own cut (the rule this study measured; the reports now test
    over stats.ModeTest's blocks)."""
    got = stop_blocks(base, cand, stats.modes(list(base.values())), stats.modes(list(cand.values())), same=False)
    return None if got is None else got[0]


def aa_blocks(rng, straddle: float, slow_by: float = 1.5, sd: float = 0.01) -> Iterator[tuple[float, float]]:
    """The simulated host's A/A blocks, one after another, for ever: (base,
    cand) process means of two processes run back to back in a random
    order, in a state that flips in stretches of 0.5-2 s (bench/samestop.py
    runs the same host)."""
    slow, left = rng.random() < 0.5, rng.uniform(0.5, 2.0) / PROCESS_S  # processes left in this stretch
    while True:
        vals = []
        for _ in range(2):
            if left <= 0:
                slow, left = not slow, rng.uniform(0.5, 2.0) / PROCESS_S
            part = float(slow)
            if left < 1 and rng.random() < straddle:  # the state changes inside this process
                part = 1 - rng.random() if slow else rng.random()
            left -= 1
            vals.append(100 * (1 + (slow_by - 1) * part) * math.exp(rng.normal(0, sd)))
        if rng.random() < 0.5:
            vals.reverse()
        yield vals[0], vals[1]


def trial(rng, nmax: int, straddle: float, stop: bool, precision: float, slow_by: float = 1.5,
          sd: float = 0.01, least: int = 10) -> tuple[bool, int, int] | None:
    """(flagged, stratum blocks, blocks run), or None where no stratum of 6 blocks."""
    base, cand = {}, {}
    k = 0
    for k, (b, c) in zip(range(nmax), aa_blocks(rng, straddle, slow_by, sd)):
        base[k], cand[k] = b, c
        if stop and k + 1 >= least:
            keep = _fast(base, cand)
            if keep is not None and len(keep) >= least and \
                    stats.stop_halfwidth([cand[i] for i in keep], [base[i] for i in keep]) <= precision:
                break
    keep = _fast(base, cand)
    if keep is None or len(keep) < 6:
        return None
    _, _, _, p = stats.compare_paired([cand[i] for i in keep], [base[i] for i in keep])
    return p < 0.05, len(keep), k + 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=600)
    a = ap.parse_args()
    print("| straddling processes | stop | A/A flagged | blocks run (median) | stratum blocks (median) |")
    print("|---|---|---:|---:|---:|")
    for straddle in (0.0, 1.0):
        for stop, precision in ((False, 0.01), (True, 0.01), (True, 0.003)):
            rng = np.random.default_rng(1)
            got = [g for g in (trial(rng, 60, straddle, stop, precision) for _ in range(a.trials)) if g]
            flagged = sum(g[0] for g in got)
            how = f"at ±{precision:.1%}" if stop else "none (60 blocks)"
            print(f"| {'partly slow' if straddle else 'none'} | {how} "
                  f"| {flagged} of {len(got)} ({flagged / len(got):.1%}) | {np.median([g[2] for g in got]):.0f} "
                  f"| {np.median([g[1] for g in got]):.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
