#!/usr/bin/env python3
"""Which blocks a mode's stratum keeps: each side's own cut (the rule until
2026-11-26) against stats.ModeTest's one rule from both sides pooled, on
real runs (benchmark script, not a test).

For every A/A and injected-slowdown comparison stored by bench/validity.py
--hog (`local` against `local:label=aa` and `local:inject=3,label=slow`)
whose process means fell in two modes on both sides, it re-makes the
fast-mode and same-mode ratios both ways from the stored samples and
reports, per way: A/A rows flagged (a test that holds its error rate: 5%),
3% rows flagged above 1, the median 95% half-width and the ratios within
±1%, and how much the A/A ratio goes with the log ratio of the two sides'
own cuts (the lean the own cuts give: a side whose cut fell higher keeps
more of its slower processes).

Usage: .venv/bin/python bench/modecut.py [--db results/validity-hog.db] [--out results/modecut.md]
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from modes import own_cut  # noqa: E402
from vmtax import analysis, stats  # noqa: E402
from vmtax.store import Store  # noqa: E402

AA, SLOW = "local:label=aa", "local:inject=3,label=slow"


def rows(db: Path) -> list[dict]:
    out = []
    with Store(db, readonly=True) as store:
        for run in store.list_runs(limit=10000):
            data = store.load(run["id"])
            names = [t.name for t in data.targets]
            if names[1:] != [AA, SLOW]:
                continue
            means = analysis.block_means(data.samples)
            for spec in data.benchmarks:
                base = means.get((names[0], spec.name), {})
                hib = spec.direction == "higher"
                mb = stats.modes(list(base.values()), hib)
                for cand_name in names[1:]:
                    cand = means.get((cand_name, spec.name), {})
                    mc = stats.modes(list(cand.values()), hib)
                    if mb is None or mc is None:
                        continue
                    rec = {"cand": cand_name, "cuts": math.log(mc.cut / mb.cut)}
                    for which, now in (("fast", analysis.fast_mode), ("same", analysis.same_mode)):
                        s = now(base, cand, mb, mc)
                        rec[f"pooled {which}"] = ((s.ratio, s.ci_low, s.ci_high, s.p_value)
                                                  if s and math.isfinite(s.ci_low) and math.isfinite(s.ci_high)
                                                  else None)
                        rec[f"own {which}"] = own_cut(base, cand, mb, mc, which)
                    out.append(rec)
    return out


def table(recs: list[dict]) -> list[str]:
    out = ["| stratum | rule | A/A rows flagged | 3% rows flagged above 1 | median ±CI (A/A, 3%) | within ±1% | "
           "A/A log ratio with the cuts' log ratio: r |", "|---|---|---:|---:|---:|---:|---:|"]
    for which in ("fast", "same"):
        for rule, name in (("own", "each side's own cut (before)"), ("pooled", "stats.ModeTest (today)")):
            key = f"{rule} {which}"
            aa = [r for r in recs if r["cand"] == AA and r[key]]
            sl = [r for r in recs if r["cand"] == SLOW and r[key]]
            both = aa + sl
            if not (aa and sl):
                out.append(f"| {which} mode | {name} | no rows | | | | |")
                continue
            half = [(math.log(r[key][2]) - math.log(r[key][1])) / 2 for r in both]
            x = np.array([r["cuts"] for r in aa])
            y = np.array([math.log(r[key][0]) for r in aa])
            corr = float(np.corrcoef(x, y)[0, 1]) if len(aa) > 2 else math.nan
            flagged = sum(r[key][3] < 0.05 for r in aa)
            found = sum(r[key][3] < 0.05 and r[key][0] > 1 for r in sl)
            out.append(f"| {which} mode | {name} | {flagged} of {len(aa)} ({flagged / len(aa):.1%}) | "
                       f"{found} of {len(sl)} ({found / len(sl):.1%}) | ±{statistics.median(half) * 100:.2f}% | "
                       f"{sum(h <= 0.01 for h in half)} of {len(half)} | {corr:+.2f} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path, default=Path(__file__).resolve().parents[2] / "results" / "validity-hog.db")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if not a.db.exists():
        sys.exit(f"no such store: {a.db} (bench/validity.py --hog writes it)")
    t0 = time.time()
    recs = rows(a.db)
    text = "\n".join([
        f"`bench/modecut.py --db {a.db.name}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): the "
        f"comparisons of {a.db.name} with two modes on both sides ({len(recs)}), each mode's stratum "
        "made both ways from the same stored samples (no stop was re-run: each run stopped by the rule it "
        "ran with).", "", *table(recs), "", f"({time.time() - t0:.0f} s)"]) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
