#!/usr/bin/env python3
"""Is an A/A row's flag the test's, the stop's, or the data's?  (benchmark
script, not a test; issue 21: on an AMD host under the hog the A/A rows of
`bench/validity.py --hog --ways same` that stopped on precision were flagged
30 of 352 (8.5%), those the budget stopped 3 of 113.)

Under "A/A", the two `local` targets of a block are alike and the runner
drew which ran first, so which of a block's two processes is the baseline's
is a coin: every relabeling (the two swapped in a random set of blocks) is
as likely as the one measured.  For each stored A/A row this draws
relabelings and asks, of each:

  test   the report's test (analysis.same_mode where it headlines, else the
         sign-flip test over every block) at the row's own block count: an
         exact test flags 5% of them;
  stop   (rows stopped on precision) whether the runner's stop
         (engine.stop.widths, the row's candidates `aa` and `slow`
         together, as the runner stopped rows until 2026-11-27) would have
         ended the row at that block and not the one before, and the
         report's p then: a stop that picks labelings the test flags would
         show more than 5% among those it ends.

If both hold 5% and the rows as measured are flagged more often, the
labels as measured are not a coin's: the two targets differ, or chance.

Usage: .venv/bin/python bench/relabel.py [--draws 40] [--jobs 2] [--own] DB:JSON_GLOB ...
  e.g. results/validity-hog-amd.db:'results/validity-hog-amd-same-*.json'
  --own: runs where each candidate stopped on its own (engine.stop.judge,
  since 2026-11-27): the stop asked is `aa`'s alone, over its blocks shared
  with the baseline
"""
from __future__ import annotations

import argparse
import glob
import json
import sys
from multiprocessing import Pool
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from vmtax import analysis, stats  # noqa: E402
from vmtax.model import Sample  # noqa: E402
from vmtax.plan import RunConfig  # noqa: E402
from vmtax.engine.stop import StopRule, widths  # noqa: E402
from vmtax.runner import TargetState  # noqa: E402
from vmtax.store import Store  # noqa: E402

NAMES = ("local", "local:label=aa", "local:inject=3,label=slow")


def row_stops(cfg: RunConfig, vals: dict, blocks: list[int], own: bool = False) -> bool:
    """Whether the row's stop ends the A/A ratio after these blocks: every
    candidate precise (the row's stop), or with own the `aa` candidate's
    ratio alone (each candidate's own stop, engine.stop.judge, since
    2026-11-27)."""
    sts = {n: TargetState() for n in NAMES}
    for n in NAMES:
        if own and n == NAMES[2]:
            sts[n].done = "precision"  # its own stop is not this ratio's
            continue
        for k in blocks:
            sts[n].take(Sample(benchmark="b", target=n, value=vals[n][k], unit="ns", process=k, seq=0, block=k))
            sts[n].processes += 1
    w = widths(StopRule.of(cfg), list(NAMES), {n: st.side() for n, st in sts.items()})  # the runner's stop alone
    return len(blocks) >= cfg.min_processes and (w[NAMES[1]] if own else max(w.values())) <= cfg.precision


def report_p(base: dict, cand: dict) -> float:
    s = analysis.same_mode(base, cand, stats.modes(list(base.values())), stats.modes(list(cand.values())))
    return s.p_value if analysis._headlines(s) else stats.compare_paired(*stats.paired(cand, base))[3]


def one_row(job) -> dict:
    db, run_id, bench, stopped_by, p_stored, draws, seed, cfg, own = job
    with Store(db, readonly=True) as store:
        data = store.load(run_id)
    vals = analysis.block_means([x for x in data.samples if x.benchmark == bench])
    v = {n: vals[(n, bench)] for n in NAMES}
    common = sorted(set.intersection(*(set(v[n]) for n in (NAMES[:2] if own else NAMES))))
    rng = np.random.default_rng(seed)
    test, ended = [0, 0], [0, 0]
    for _ in range(draws):
        sw = rng.random(len(common)) < 0.5
        b = {k: (v[NAMES[1]][k] if s else v[NAMES[0]][k]) for k, s in zip(common, sw)}
        a = {k: (v[NAMES[0]][k] if s else v[NAMES[1]][k]) for k, s in zip(common, sw)}
        p = report_p(b, a)
        test[0] += p < 0.05
        test[1] += 1
        if stopped_by == "precision":
            vv = {NAMES[0]: b, NAMES[1]: a, NAMES[2]: v[NAMES[2]]}
            if row_stops(cfg, vv, common, own) and not row_stops(cfg, vv, common[:-1], own):
                ended[0] += p < 0.05
                ended[1] += 1
    return {"run": run_id, "bench": bench, "stopped_by": stopped_by, "blocks": len(common),
            "flagged": p_stored is not None and p_stored < 0.05, "test": test, "ended": ended}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("series", nargs="+", metavar="DB:JSON_GLOB")
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--own", action="store_true",
                    help="runs where each candidate stopped on its own (since 2026-11-27): the stop is aa's alone")
    a = ap.parse_args()
    jobs = []
    for item in a.series:
        db, pattern = item.split(":", 1)
        for f in sorted(glob.glob(pattern)):
            d = json.loads(Path(f).read_text())
            cfg = RunConfig(precision=d["config"]["precision"], same_mode=bool(d["config"].get("same_mode")),
                            fast_mode=bool(d["config"].get("fast_mode")),
                            min_processes=d["config"]["min_processes"])
            for c in d["comparisons"]:
                if c["candidate"] == NAMES[1]:
                    jobs.append((db, d["run_id"], c["benchmark"], c["stopped_by"], c["p_value"], a.draws,
                                 len(jobs), cfg, a.own))
    with Pool(a.jobs) as pool:
        rows = pool.map(one_row, jobs, chunksize=4)
    print(f"`bench/relabel.py --draws {a.draws}{' --own' if a.own else ''} {' '.join(a.series)}`: "
          f"{len(rows)} A/A rows\n")
    print("| rows | as measured, flagged | the test over relabelings | relabelings the stop ends at the row's block |")
    print("|---|---:|---:|---:|")
    for how in ("precision", "budget"):
        sub = [r for r in rows if r["stopped_by"] == how]
        if not sub:
            continue
        t = [sum(r["test"][i] for r in sub) for i in (0, 1)]
        e = [sum(r["ended"][i] for r in sub) for i in (0, 1)]
        flagged = sum(r["flagged"] for r in sub)
        ended = f"{e[0]} of {e[1]} ({e[0] / e[1]:.2%})" if e[1] else "-"
        print(f"| stopped by {how} ({len(sub)}) | {flagged} ({flagged / len(sub):.1%}) | "
              f"{t[0]} of {t[1]} ({t[0] / t[1]:.2%}) | {ended} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
