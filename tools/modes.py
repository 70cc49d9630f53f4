#!/usr/bin/env python3
"""Two modes among process means: how often vmtax calls them where there
are none, how often it finds them where there are, and whether the ratio
it then reports in the fast mode holds its error rate (benchmark script,
not a test; issue 21: "the bimodal rows with an interval that says what it
estimates").

A simulation, by design: the question is about the statistics (stats.modes
and analysis.fast_mode, the code the reports run), and it needs thousands
of draws with a known truth, which no host gives.  Process means are drawn
per block for a baseline and a candidate:

  spreads    one mode: normal, lognormal (a right tail), a few outlying
             processes, exponential; two modes: 70/30 at 10 SDs, 85/15
             at 5 SDs, and the cloud host's getppid (196 ns or 255-310 ns,
             60/40)
  scenarios  per-process modes (each process draws its mode alone, as
             tlb_4k's fell on a cloud host: its pages) and a host state
             shared by the two processes of a block 80% of the time (a
             busy sibling for seconds), the slow mode 1.3x or 1.05x (5
             within-mode SDs: one side is often called and the other not,
             where the reports give no fast-mode ratio), a slow mode 1.5x
             with 15% of processes straddling a flip of the state (a
             level between the modes, as under tools/hog.py),
             the candidate slow 70% of the time against the baseline's 30%,
             each as an A/A pair and with a true 1.5x tax in both modes;
             beside today's rule (stats.ModeTest: one cut from both sides
             pooled) the one before it (each side's own cut)

Usage: tools/modes.py [--trials N] [--out results/modes.md]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vmtax import stats
from vmtax.analysis import fast_mode, same_mode, slow_mode, stop_blocks

SPREADS = {
    "normal, SD 3%": (False, lambda r: r.normal(100, 3)),
    "lognormal, SD of logs 0.5": (False, lambda r: math.exp(r.normal(0, 0.5))),
    "normal with 5% outlying processes": (
        False,
        lambda r: r.normal(100, 3) if r.random() < 0.95 else 100 + abs(r.normal(0, 30)),
    ),
    "exponential": (False, lambda r: r.exponential(1) + 0.01),
    "two modes, 70/30, 10 SDs apart": (True, lambda r: r.normal(100, 3) if r.random() < 0.7 else r.normal(130, 3)),
    "two modes, 85/15, 5 SDs apart": (True, lambda r: r.normal(100, 3) if r.random() < 0.85 else r.normal(115, 3)),
    "cloud getppid: 196 ns or 255-310 ns, 60/40": (
        True,
        lambda r: r.normal(196, 4) if r.random() < 0.6 else r.normal(280, 15),
    ),
}


def detection(trials: int, sizes: list[int]) -> list[str]:
    out = ["| spread | " + " | ".join(f"{n} processes" for n in sizes) + " |", "|---|" + "---:|" * len(sizes)]
    for name, (two, f) in SPREADS.items():
        cells = []
        for n in sizes:
            rng = np.random.default_rng(zlib.crc32(f"{name} {n}".encode()))  # the same draws every time
            called = sum(stats.modes([float(f(rng)) for _ in range(n)]) is not None for _ in range(trials))
            cells.append(f"{called / trials:.1%}")
        out.append(f"| {name} ({'two modes: power' if two else 'one mode: false calls'}) | " + " | ".join(cells) + " |")
    return out


def pair(
    rng,
    blocks: int,
    tax: float,
    shared: float,
    slow_share: float,
    slow_by: float,
    sd: float,
    cand_slow_by: float | None = None,
    straddle: float = 0.0,
    cand_share: float | None = None,
):
    """Block -> process mean for the baseline and the candidate (its slow mode cand_slow_by, default
    slow_by: the same tax in both modes); a share `straddle` of processes ran across a flip of the
    host's state (a level drawn evenly between the modes)."""
    base, cand = {}, {}

    def level(slow: bool, by: float) -> float:
        return rng.uniform(1.0, by) if straddle and rng.random() < straddle else by if slow else 1.0

    for k in range(blocks):
        host = rng.random() < slow_share
        sb = host if rng.random() < shared else rng.random() < slow_share
        sc = host if rng.random() < shared else rng.random() < (cand_share or slow_share)
        base[k] = 100.0 * level(sb, slow_by) * math.exp(rng.normal(0, sd))
        cand[k] = 100.0 * tax * level(sc, cand_slow_by or slow_by) * math.exp(rng.normal(0, sd))
    return base, cand


def own_cut(base: dict, cand: dict, mb, mc, which: str) -> tuple[float, float, float, float] | None:
    """The rule before stats.ModeTest, for comparison: each side's blocks
    kept by its own cut (mb, mc: stats.modes of each side alone), the paired
    (fast) or stratified (same) test over them: (ratio, CI low, CI high,
    p-value), None without an interval."""
    got = stop_blocks(base, cand, mb, mc, same=which == "same")  # the runner's stop still keeps blocks so
    if got is None:
        return None
    fast, slow = got
    keep = fast + slow
    if len(keep) < stats.MODE_MIN_PAIRS:
        return None
    c, b = [cand[k] for k in keep], [base[k] for k in keep]
    r, lo, hi, p = (
        stats.compare_strata(c, b, [0] * len(fast) + [1] * len(slow)) if fast and slow else stats.compare_paired(c, b)
    )
    return (r, lo, hi, p) if math.isfinite(lo) and math.isfinite(hi) else None


def own_cut_misses(base: dict, cand: dict, mb, mc, which: str, tax: float) -> bool | None:
    """Whether own_cut's interval misses the truth (None: no interval)."""
    got = own_cut(base, cand, mb, mc, which)
    return None if got is None else not got[1] <= tax <= got[2]


def estimation(trials: int, blocks: int) -> list[str]:
    out = [
        "| scenario | slow mode | true ratio | two modes called (base, cand) | all blocks: CI misses the truth | "
        "all blocks: median ±CI | fast mode: CI misses the truth | fast mode: median ±CI | fast-mode blocks | "
        "same mode: CI misses the truth | same mode: median ±CI | same-mode blocks (slow) | "
        "the modes' intervals apart (the note says so) | each side's own cut (the rule before): fast, "
        "same mode CI misses |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    shared_state = "a host state shared within a block 80% of the time"
    differs = shared_state + "; the candidate's slow mode 1.4x (its tax 7.7% larger there)"
    straddles = shared_state + "; 15% of processes straddle a flip (a level between the modes)"
    oftener = "per-process modes; the candidate's processes slow 70% of the time (the baseline's 30%)"
    for scen, shared, slow_by, cand_slow, straddle, cand_share in (
        ("per-process modes", 0.0, 1.3, None, 0.0, None),
        (shared_state, 0.8, 1.3, None, 0.0, None),
        ("per-process modes", 0.0, 1.05, None, 0.0, None),
        (shared_state, 0.8, 1.05, None, 0.0, None),
        (differs, 0.8, 1.3, 1.4, 0.0, None),
        (straddles, 0.8, 1.5, None, 0.15, None),
        (oftener, 0.0, 1.3, None, 0.0, 0.7),
    ):
        for tax in (1.0, 1.5):
            rng = np.random.default_rng(
                int(tax * 10)
                + int(shared * 100)
                + int(slow_by * 1000)
                + int((cand_slow or 0) * 10000)
                + int(straddle * 100000)
                + int((cand_share or 0) * 1000000)
            )
            called_b = called_c = miss_all = miss_fast = n_fast = miss_same = n_same = apart = 0
            half_all, half_fast, fast_blocks, half_same, same_blocks = [], [], [], [], []
            own: dict[str, list[bool]] = {"fast": [], "same": []}
            for _ in range(trials):
                base, cand = pair(rng, blocks, tax, shared, 0.3, slow_by, 0.01, cand_slow, straddle, cand_share)
                mb, mc = stats.modes(list(base.values())), stats.modes(list(cand.values()))
                called_b += mb is not None
                called_c += mc is not None
                c, b = stats.paired(cand, base)
                r, lo, hi, _ = stats.compare_paired(c, b)
                miss_all += not lo <= tax <= hi
                half_all.append(stats.ratio_ci_rel(r, lo, hi))
                f = fast_mode(base, cand, mb, mc)
                if f is not None and math.isfinite(f.ci_low):
                    n_fast += 1
                    miss_fast += not f.ci_low <= tax <= f.ci_high
                    half_fast.append(stats.ratio_ci_rel(f.ratio, f.ci_low, f.ci_high))
                    fast_blocks.append(f.blocks)
                g = same_mode(base, cand, mb, mc)
                if g is not None and math.isfinite(g.ci_low):
                    n_same += 1
                    miss_same += not g.ci_low <= tax <= g.ci_high
                    half_same.append(stats.ratio_ci_rel(g.ratio, g.ci_low, g.ci_high))
                    same_blocks.append((g.blocks, g.slow_blocks))
                    sl = slow_mode(base, cand, mb, mc)
                    apart += bool(
                        sl
                        and f
                        and math.isfinite(f.ci_low)
                        and math.isfinite(sl.ci_low)
                        and (f.ci_high < sl.ci_low or sl.ci_high < f.ci_low)
                    )
                for which, got in own.items():
                    m = own_cut_misses(base, cand, mb, mc, which, tax)
                    if m is not None:
                        got.append(m)
            out.append(
                f"| {scen} | {slow_by:g}x | {tax:g} | {called_b / trials:.0%}, {called_c / trials:.0%} | "
                f"{miss_all / trials:.1%} | ±{statistics.median(half_all):.2%} | "
                + (
                    f"{miss_fast / n_fast:.1%} of {n_fast} | ±{statistics.median(half_fast):.2%} | "
                    f"{statistics.median(fast_blocks):.0f} of {blocks}"
                    if n_fast
                    else "- | - | -"
                )
                + " | "
                + (
                    f"{miss_same / n_same:.1%} of {n_same} | ±{statistics.median(half_same):.2%} | "
                    f"{statistics.median(b for b, _ in same_blocks):.0f} "
                    f"({statistics.median(s for _, s in same_blocks):.0f}) of {blocks} | "
                    f"{apart / n_same:.1%}"
                    if n_same
                    else "- | - | - | -"
                )
                + " | "
                + ", ".join(f"{sum(v) / len(v):.1%}" if v else "-" for v in own.values())
                + " |"
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--blocks", type=int, default=60)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    t0 = time.time()
    lines = [
        f"`tools/modes.py --trials {a.trials} --blocks {a.blocks}` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; a simulation, no host involved)",
        "",
        "**How often two modes are called** (stats.modes over that many process means):",
        "",
        *detection(a.trials, [16, 30, 60, 100]),
        "",
        f"**The ratio over all blocks, in the fast mode and in the same mode** ({a.blocks} blocks, 30% of "
        "processes slower by the slow mode's factor, 1% within-mode SD; a fast- or same-mode ratio only "
        "where both sides were called two modes, as the reports give one, with the modes fitted on both "
        "sides pooled at each ratio tested (stats.ModeTest); the truth is the fast mode's tax, the true "
        "ratio; the last column gives the rule before it, each side's blocks kept by its own cut):",
        "",
        *estimation(a.trials, a.blocks),
        "",
        f"({time.time() - t0:.0f} s)",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
