#!/usr/bin/env python3
"""Can the reference loop narrow a ratio? (benchmark script, not a test;
issue 21 item 2, judged on the validity harness's own runs.)

Every timed sample carries the agent's reference loop timed right before
and after it (`ref_ns`, stored as samples.ref_before/ref_after): the host's
state the sample was taken in, as the target's own CPU saw it.  This script
re-analyses stored compare runs (by default the A/A-and-3% rounds of
bench/validity.py: `local`, `local:label=aa`, `local:inject=3,label=slow`)
five ways, on the same block-paired process means, with the same
sign-flip test and interval (stats.compare_paired):

  plain  what vmtax reports: the candidate's and the baseline's process
         means, paired by block
  cv     a control variate: each block's log ratio less beta times how far
         its log reference ratio is from the mean of them (beta by least
         squares over the row's blocks) -- the part of the difference the
         reference explains is taken out
  pooled the control variate with one beta per run and candidate, fitted
         over every row's blocks (each row's own centred): a beta fitted on
         a row's 10-30 blocks alone takes a degree of freedom the test does
         not know it lost
  norm   each process mean divided by its own reference (beta = 1): the
         operation assumed to slow exactly as the reference does
  same   the pooled beta with the reference ratio's expectation taken as 1,
         not estimated: true only where both sides run the reference alike
         (two builds of one hypervisor, an A/A pair), never across kinds
         (TCG taxes the loop, a container does not)

A control variate narrows an estimate only where the control's expectation
is known: estimated from the same blocks (cv, pooled, norm centre on the
mean), the adjustment gives back the plain mean, and the narrower interval
it shows is the error of that mean left out -- the A/A rows say whether it
holds its error rate.

and reports, per method, the median 95% CI half-width of the ratios, the
A/A rows flagged (every one a false alarm) and the 3% rows flagged above 1
(goal: all), with the correlation of each row's block log ratios with
their log reference ratios.

Usage: .venv/bin/python bench/reference.py DB [RUN_ID ...] [--out NAME]
       (no RUN_ID: every compare run in DB)
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from vmtax import stats  # noqa: E402
from vmtax.analysis import block_means  # noqa: E402
from vmtax.model import Sample  # noqa: E402
from vmtax.store import Store  # noqa: E402

METHODS = ("plain", "cv", "pooled", "norm", "same")
ALPHA = 0.05


def ref_samples(samples: list[Sample]) -> list[Sample]:
    """The samples with their value replaced by their reference (the mean
    of before and after), where they carry one."""
    out = []
    for s in samples:
        if s.ref_before and s.ref_after:
            out.append(Sample(**{**s.__dict__, "value": (s.ref_before + s.ref_after) / 2}))
    return out


def own_beta(d: np.ndarray, x: np.ndarray) -> float:
    var = float(np.var(x))
    return float(np.cov(d, x, bias=True)[0, 1] / var) if var > 0 else 0.0


def adjusted(c: np.ndarray, b: np.ndarray, rc: np.ndarray, rb: np.ndarray, method: str,
             pooled: float = 0.0) -> np.ndarray:
    """The candidate's block values, adjusted by the method."""
    if method == "plain":
        return c
    x = np.log(rc) - np.log(rb)
    if method == "same":
        return c * np.exp(-pooled * x)
    beta = {"norm": 1.0, "pooled": pooled}.get(method)
    if beta is None:
        beta = own_beta(np.log(c) - np.log(b), x)
    return c * np.exp(-beta * (x - x.mean()))


def rows_of(data) -> list[dict]:
    names = [t.name for t in data.targets]
    out, found = [], []
    for spec in data.benchmarks:
        if spec.unit != "ns":
            continue
        mine = [s for s in data.samples if s.benchmark == spec.name]
        vals, refs = block_means(mine), block_means(ref_samples(mine))
        base, rbase = vals.get((names[0], spec.name), {}), refs.get((names[0], spec.name), {})
        for cand in names[1:]:
            cv, rc = vals.get((cand, spec.name), {}), refs.get((cand, spec.name), {})
            blocks = sorted(set(base) & set(cv) & set(rbase) & set(rc))
            if len(blocks) < 6:
                continue
            c, b = np.array([cv[k] for k in blocks]), np.array([base[k] for k in blocks])
            rcv, rbv = np.array([rc[k] for k in blocks]), np.array([rbase[k] for k in blocks])
            d, x = np.log(c) - np.log(b), np.log(rcv) - np.log(rbv)
            corr = float(np.corrcoef(d, x)[0, 1]) if np.std(d) > 0 and np.std(x) > 0 else 0.0
            found.append((spec.name, cand, c, b, rcv, rbv, corr))
    pooled = {}
    for cand in names[1:]:
        mine = [f for f in found if f[1] == cand]
        if mine:
            d = np.concatenate([np.log(c) - np.log(b) - np.mean(np.log(c) - np.log(b)) for _, _, c, b, *_ in mine])
            x = np.concatenate([np.log(rc) - np.log(rb) - np.mean(np.log(rc) - np.log(rb))
                                for _, _, _, _, rc, rb, _ in mine])
            pooled[cand] = own_beta(d, x)
    for name, cand, c, b, rcv, rbv, corr in found:
        row = {"run": data.id, "benchmark": name, "candidate": cand, "blocks": len(c), "corr": corr,
               "beta_pooled": pooled[cand], "beta_own": own_beta(np.log(c) - np.log(b), np.log(rcv) - np.log(rbv))}
        for m in METHODS:
            r, lo, hi, p = stats.compare_paired(adjusted(c, b, rcv, rbv, m, pooled[cand]), b)
            row[m] = {"ratio": r, "half": stats.ratio_ci_rel(r, lo, hi), "p": p}
        out.append(row)
    return out


def summary(rows: list[dict], label: str) -> dict:
    mine = [r for r in rows if f"label={label}" in r["candidate"]]
    out = {"rows": len(mine), "median_corr": statistics.median(r["corr"] for r in mine) if mine else None}
    for m in METHODS:
        halves = [r[m]["half"] for r in mine if math.isfinite(r[m]["half"])]
        flagged = [r for r in mine if r[m]["p"] < ALPHA and (label == "aa" or r[m]["ratio"] > 1)]
        out[m] = {"median_half": statistics.median(halves) if halves else None, "flagged": len(flagged)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db")
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--out", default="reference-cv")
    args = ap.parse_args()
    store = Store(args.db, readonly=True)
    runs = args.runs or [r["id"] for r in store.list_runs(limit=1000) if r["kind"] == "compare"]
    rows = [row for run in runs for row in rows_of(store.load(run))]
    if not rows:
        sys.exit("no compare rows with reference readings in those runs (runs of vmtax before 5a6416d have none)")
    data = store.load(runs[0])
    env = data.targets[0].facts
    by = {label: summary(rows, label) for label in ("aa", "slow")}
    lines = [
        "# The reference loop as a control variate", "",
        f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/reference.py {args.db} "
        f"{' '.join(args.runs)}` over {len(runs)} stored run(s) ({', '.join(f'`{r}`' for r in runs)}) on "
        f"{env.get('cpu_model')}, {env.get('cpus_online')} CPUs, kernel {env.get('kernel')}.", "",
        "Each row re-analysed on the same block-paired process means, with vmtax's sign-flip "
        "test and interval: `plain` (what vmtax reports), `cv` (the block log ratio less beta times its "
        "log reference ratio's distance from their mean, beta by least squares per row), `pooled` (one "
        "beta per run and candidate), `norm` (each process mean divided by its own reference), `same` "
        "(the pooled beta, the reference ratio's expectation taken as 1: both sides one kind of target).",
        "",
        "| pair | rows | median corr(log ratio, log ref ratio) | method | median 95% CI half-width | flagged |",
        "|---|---:|---:|---|---:|---:|"]
    for label, what in (("aa", "A/A (every flag false)"), ("slow", "3% slower (goal: every row)")):
        s = by[label]
        if not s["rows"]:
            continue  # no candidate labelled so in these runs
        for m in METHODS:
            half = f"±{s[m]['median_half'] * 100:.2f}%" if s[m]["median_half"] is not None else "-"
            lines.append(f"| {what} | {s['rows']} | {s['median_corr']:+.2f} | {m} | {half} | "
                         f"{s[m]['flagged']} of {s['rows']} |")
    text = "\n".join(lines) + "\n"
    betas = sorted({(r["run"], r["candidate"]): r["beta_pooled"] for r in rows}.items())
    text += ("\nPooled beta per run and candidate: "
             + ", ".join(f"{run} {cand.split('label=')[-1]} {b:.2f}" for (run, cand), b in betas) + ".\n")
    (REPO / "results" / f"{args.out}.md").write_text(text)
    (REPO / "results" / f"{args.out}.json").write_text(json.dumps({"summary": by, "rows": rows}, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
