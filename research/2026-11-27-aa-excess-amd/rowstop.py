#!/usr/bin/env python3
"""Does a row's stop on all its candidates together bias an A/A pair's test?
(benchmark script, not a test; results/relabel.md.)

bench/samestop.py's simulated host (a state that flips in stretches of
0.5-2 s, processes of 0.09 s, the slow state SLOW_BY times slower, a
within-mode spread of SD), here with three targets in each block in a random
order, as bench/validity.py runs them: the baseline, an A/A twin and a
candidate 3% slower.  Each trial runs blocks through the runner's own stop
(engine.stop.widths, --same-mode, precision +-1%, 10 processes) in
one of three ways, "row": until every candidate is precise (the runner until
2026-11-27), "own": each candidate stops when its own ratio is (since), or
"fixed": 60 blocks; at most 120.  Then the report's test (analysis.same_mode
where it headlines, else the sign-flip test over every block).

Usage: .venv/bin/python bench/rowstop.py WAY TRIALS SEED SLOW_BY SD
One line per trial: WAY, trial, A/A flagged (0/1), its half-width, 3% found,
its half-width, the A/A twin's blocks, the baseline's blocks, whether the twin
stopped on precision.  E.g. the A/A share:
  awk '{n++; f+=$3} END {print f, n}'
"""

import math, sys
import numpy as np
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from vmtax import stats, analysis
from vmtax.engine.stop import StopRule, widths
from vmtax.runner import TargetState
from vmtax.plan import RunConfig
from vmtax.model import Sample
PROCESS_S = 0.09
NAMES = ("local", "aa", "slow")
def blocks(rng, slow_by, sd, inject, straddle=1.0):
    slow, left = rng.random() < 0.5, rng.uniform(0.5, 2.0) / PROCESS_S
    while True:
        vals = []
        order = rng.permutation(3)
        for _ in range(3):
            if left <= 0:
                slow, left = not slow, rng.uniform(0.5, 2.0) / PROCESS_S
            part = float(slow)
            if left < 1 and rng.random() < straddle:
                part = 1 - rng.random() if slow else rng.random()
            left -= 1
            vals.append(100 * (1 + (slow_by - 1) * part) * math.exp(rng.normal(0, sd)))
        v = [vals[i] for i in order]
        yield v[0], v[1], v[2] * inject
def trial(rng, way, nmax, slow_by, sd, inject, cfg):
    sts = {n: TargetState() for n in NAMES}
    for k, vals in zip(range(nmax), blocks(rng, slow_by, sd, inject)):
        for n, v in zip(NAMES, vals):
            if sts[n].done is None:
                sts[n].take(Sample(benchmark="b", target=n, value=v, unit="ns", process=k, seq=0, block=k))
                sts[n].processes += 1
        if k + 1 < cfg.min_processes:
            continue
        w = widths(StopRule.of(cfg), list(NAMES), {n: s.side() for n, s in sts.items()})
        if way == "fixed": continue
        if way == "row":
            if max(w.values()) <= cfg.precision: break
        else:
            for n, x in w.items():
                if x <= cfg.precision: sts[n].done = "precision"
            if all(sts[n].done for n in NAMES[1:]): break
    bb = sts["local"].block_means(); bm = stats.modes(list(bb.values()))
    out = []
    for n in NAMES[1:]:
        cb = sts[n].block_means()
        s = analysis.same_mode(bb, cb, bm, stats.modes(list(cb.values())))
        if analysis._headlines(s):
            out += [s.p_value < 0.05 and (n == "aa" or s.ratio > 1), stats.ratio_ci_rel(s.ratio, s.ci_low, s.ci_high)]
        else:
            rr, lo, hi, p = stats.compare_paired(*stats.paired(cb, bb))
            out += [p < 0.05 and (n == "aa" or rr > 1), stats.ratio_ci_rel(rr, lo, hi)]
    return out + [len(sts["aa"].samples_taken), len(bb), sts["aa"].done == "precision" or way == "row" and k + 1 < nmax]
way, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
slow_by, sd = float(sys.argv[4]), float(sys.argv[5])
cfg = RunConfig(precision=0.01, same_mode=True, min_processes=10)
rng = np.random.default_rng(seed)
for i in range(n):
    g = trial(rng, way, 60 if way == "fixed" else 120, slow_by, sd, 1.03, cfg)
    print(way, i, *[int(x) if isinstance(x, bool) else (round(x, 5) if isinstance(x, float) else x) for x in g],
          flush=True)
