#!/usr/bin/env python3
"""Where a lockstep run's interval comes from (benchmark script, not a
test): for each row and candidate of a stored run, from its samples,

- blocks: how many blocks held the candidate, the SD of a block's log ratio
  to the baseline (what the interval is made of), and the SD that the
  samples' own scatter within each process would give alone (were they
  independent): where the first is far above the second, something shared
  by a process's samples or a block's stretch of time moves it;
- turns: the SD of the log ratio of a candidate's turn (its samples back to
  back) to the baseline's turn of the same round, for turns next to each
  other and for any two of one round: whether the few milliseconds between
  two turns leave noise unshared;
- with the host: the correlation of the candidate's block means with the
  baseline's, and the slope of the first on the second (1: the host's state
  moves both alike, and a ratio cancels it; 2: it moves the candidate
  twice as much, and the ratio moves with it; the block's own baseline
  process is in both, so its offset pulls the slope towards 0);
- the host's state: the ratio in the blocks where the host ran slow over
  that where it ran quick, with its 95% CI, the state read from the
  baseline's neighbouring blocks (stats.host_state, as the scoreboard's
  line under the board), and per candidate the median over its rows, the
  rows that moved each way and stats.tax_moves's p;
- by position (--positions): each target's median sample by its place in
  its turn (0: right after the untimed sample, 1...: right after a go of
  its own): a target whose later samples cost more than its first has
  something of its own running beside them (podman's relay did, on the
  measured CPU).

Usage: .venv/bin/python tools/turns.py RUN [--db FILE] [--bench NAME ...] [--positions]
       (RUN: a run id or a unique prefix, as `vmtax show` takes; --db as
       vmtax's: $VMTAX_DB or the default store)
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vmtax import stats
from vmtax.analysis import block_samples
from vmtax.store import Store, default_db_path


def turns_of(samples: list) -> list[tuple[str, list[float]]]:
    """One block's timed samples in arrival order, cut into turns: runs of one target's samples."""
    out: list[tuple[str, list[float]]] = []
    for s in sorted(samples, key=lambda s: s.t):
        if out and out[-1][0] == s.target:
            out[-1][1].append(s.value)
        else:
            out.append((s.target, [s.value]))
    return out


def sd_pct(xs: list[float]) -> float:
    return statistics.stdev(xs) * 100 if len(xs) > 1 else math.nan


def row(samples: list, base: str, cand: str) -> dict:
    by: dict[tuple[str, int], list] = defaultdict(list)
    every: dict[int, list] = defaultdict(list)  # each block's samples, every target's
    for s in samples:
        by[(s.target, s.block)].append(s)
        every[s.block].append(s)
    blocks = sorted(b for t, b in by if t == cand and (base, b) in by)
    lb = [math.log(statistics.mean(x.value for x in by[(base, b)])) for b in blocks]
    lc = [math.log(statistics.mean(x.value for x in by[(cand, b)])) for b in blocks]
    within = []
    for b in blocks:
        v = 0.0
        for t in (base, cand):
            logs = [math.log(x.value) for x in by[(t, b)]]
            v += statistics.variance(logs) / len(logs) if len(logs) > 1 else math.nan
        within.append(v)
    adjacent, same_round = [], []
    for b in blocks:
        ts = turns_of(every[b])  # next to each other in time: no other target's turn between them
        for (t1, v1), (t2, v2) in itertools.pairwise(ts):
            if {t1, t2} == {base, cand}:
                vb, vc = (v1, v2) if t1 == base else (v2, v1)
                adjacent.append(math.log(statistics.mean(vc) / statistics.mean(vb)))
        mine = [vs for t, vs in ts if t == cand]
        theirs = [vs for t, vs in ts if t == base]
        same_round += [math.log(statistics.mean(c) / statistics.mean(a)) for a, c in zip(theirs, mine, strict=False)]
    lr = [c - a for a, c in zip(lb, lc, strict=True)]
    r = statistics.correlation(lb, lc) if len(blocks) > 2 else math.nan
    slope = r * statistics.stdev(lc) / statistics.stdev(lb) if len(blocks) > 2 else math.nan
    return {
        "blocks": len(blocks),
        "sd_block": sd_pct(lr),
        "sd_within": math.sqrt(statistics.mean(within)) * 100 if within else math.nan,
        "sd_adjacent": sd_pct(adjacent),
        "sd_same_round": sd_pct(same_round),
        "r": r,
        "slope": slope,
    }


def positions(samples: list, names: list[str]) -> dict[str, dict[int, float]]:
    """Each target's median sample by its place in its turn (the last place holds every later one)."""
    every: dict[int, list] = defaultdict(list)
    for s in samples:
        every[s.block].append(s)
    at: dict[tuple[str, int], list[float]] = defaultdict(list)
    for block in every.values():
        for target, values in turns_of(block):
            for k, v in enumerate(values):
                at[(target, min(k, 3))].append(v)
    return {n: {k: statistics.median(at[(n, k)]) for k in range(4) if at[(n, k)]} for n in names}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--db")
    ap.add_argument("--bench", nargs="+")
    ap.add_argument("--positions", action="store_true", help="each target's median sample by its place in its turn")
    args = ap.parse_args()
    store = Store(args.db or default_db_path(), readonly=True)
    data = store.load(store.resolve(args.run))
    run, names = data.id, [t.name for t in data.targets]
    base, cands = names[0], names[1:]
    samples = [s for s in data.samples if not s.warmup and not s.counting and s.block is not None]
    rows: dict[str, list] = defaultdict(list)
    for s in samples:
        rows[s.benchmark].append(s)
    if args.positions:
        print(f"run {run}: each target's median sample by its place in its turn (0: after the untimed sample)")
        for bench in args.bench or sorted(rows):
            for name, by in positions(rows.get(bench, []), names).items():
                if by:
                    cells = " ".join(f"{k}{'+' if k == 3 else ''}:{v:.4g}" for k, v in by.items())
                    print(f"{bench:14} {name:24} {cells}")
        return 0
    print(f"run {run}: each candidate against {base}; SDs of log ratios, in %; slow/quick: the host's state")
    print(
        f"{'row':14} {'candidate':24} {'blocks':>6} {'block':>6} {'within':>6} {'adjacent':>8} {'round':>6} "
        f"{'r':>5} {'slope':>5}  slow/quick [95% CI]"
    )
    higher = {spec.name: spec.direction == "higher" for spec in data.benchmarks}
    states: dict[str, list] = defaultdict(list)
    for bench in args.bench or sorted(rows):
        for cand in cands:
            got = row(rows.get(bench, []), base, cand)
            if got["blocks"] < 3:
                continue
            h = stats.host_state(
                block_samples([s for s in rows[bench] if s.target == base]),
                block_samples([s for s in rows[bench] if s.target == cand]),
                higher_is_better=higher.get(bench, False),
            )
            if h is not None:
                states[cand].append((h, higher.get(bench, False), got))
            state = f"{h.change:.3f} [{h.change_low:.3f}, {h.change_high:.3f}]" if h else "-"
            print(
                f"{bench:14} {cand:24} {got['blocks']:6d} {got['sd_block']:6.1f} {got['sd_within']:6.1f} "
                f"{got['sd_adjacent']:8.1f} {got['sd_same_round']:6.1f} {got['r']:5.2f} {got['slope']:5.2f}  {state}"
            )
    for cand, got in states.items():
        m = stats.tax_summary([(h, hi) for h, hi, _ in got])
        within = statistics.median(g["sd_within"] for _, _, g in got if not math.isnan(g["sd_within"]))
        print(
            f"{cand}: {len(got)} rows; block SD {statistics.median(g['sd_block'] for _, _, g in got):.1f}%, within "
            f"{within:.1f}% (medians); its tax in the host's slow "
            f"half x{m.median:.3f} (median), higher on {m.up}, lower on {m.down}; its rows together p {m.p_value:.2g}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
