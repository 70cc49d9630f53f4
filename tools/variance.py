#!/usr/bin/env python3
"""Where an A/B's variance comes from (benchmark script, not a test): for
each row and candidate of stored lockstep runs, the variance of the log
ratio candidate/baseline, split into its parts:

- pair: between the two turns of one round (a sample of each side, the go
  between them), from successive rounds' differences (von Neumann: what
  moves from one round to the next, slow drift left out);
- drift: what is shared by the rounds of one process pair and moves slowly
  across them (a block's variance over its rounds less the pair part);
- process: between blocks, beyond what their rounds' scatter gives: each
  block is one fresh process a side, so this is what differs between
  processes (their pages, a TCG guest's translations) and between the
  stretches of time the blocks ran in; `host` says how much of it moves
  with the baseline's own level (the host's state: R² of a block's log
  ratio on its baseline's log mean);
- per block: the variance of one block's log ratio, which the interval is
  made of (its 95% half-width over B blocks about 1.96·SD/√B), and the
  share of each part in it (pair and drift divided by the rounds a block
  holds);
- two estimators side by side, each a Student interval over blocks: the
  block's ratio of means (what `vmtax compare` reports) and the median of
  the block's rounds' log ratios (robust to a preempted sample): each
  one's SD a block, the median half-width over the rows, the rows whose
  interval leaves out 1 and the ratios.

Each part is printed as an SD in %.  The median over the rows is given
per candidate, the blocks that ±1% at 95% would need at that SD, and the
median of a go's round trip (the fact lockstep_go_ms).

Usage: .venv/bin/python tools/variance.py RUN [RUN ...] [--db FILE] [--bench NAME ...] [--out FILE.md]
       (RUN: a run id or a unique prefix, as `vmtax show` takes; --db as
       vmtax's: $VMTAX_DB or the default store; --out appends the medians
       as a Markdown table with the command)
"""

from __future__ import annotations

import argparse
import itertools
import math
import shlex
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vmtax.stats import t_quantile
from vmtax.store import Store, default_db_path

PARTS = ("pair", "drift", "process")


def rounds_of(samples: list, base: str, cand: str) -> list[float]:
    """One block's log ratios, a round at a time: each candidate turn (its
    samples back to back) against the baseline's turn of the same round,
    in the order the rounds ran."""
    turns: list[tuple[str, list[float]]] = []
    for s in sorted(samples, key=lambda s: s.t):
        if turns and turns[-1][0] == s.target:
            turns[-1][1].append(s.value)
        else:
            turns.append((s.target, [s.value]))
    mine = [statistics.mean(v) for t, v in turns if t == cand]
    theirs = [statistics.mean(v) for t, v in turns if t == base]
    return [math.log(c / b) for b, c in zip(theirs, mine, strict=False)]


def decompose(samples: list, base: str, cand: str) -> dict | None:
    """The parts of one row's variance (as variances of a log ratio); None
    with fewer than 3 blocks of 3 rounds."""
    by: dict[int, list] = defaultdict(list)
    for s in samples:
        if s.target in (base, cand):
            by[s.block].append(s)
    blocks, level, of_means = [], [], []  # each block's log ratios by round; its baseline's log mean; ratio of means
    for _, v in sorted(by.items()):
        d = rounds_of(v, base, cand)
        if len(d) >= 3:
            blocks.append(d)
            level.append(math.log(statistics.mean(s.value for s in v if s.target == base)))
            of_means.append(math.log(statistics.mean(s.value for s in v if s.target == cand)) - level[-1])
    if len(blocks) < 3:
        return None
    pair = statistics.mean(sum((b - a) ** 2 for a, b in itertools.pairwise(d)) / (2 * (len(d) - 1)) for d in blocks)
    within = statistics.mean(statistics.variance(d) for d in blocks)
    n = statistics.mean(len(d) for d in blocks)
    means = [statistics.mean(d) for d in blocks]
    per_block = statistics.variance(means)
    process = max(0.0, per_block - within / n)
    return {
        "blocks": len(blocks),
        "rounds": n,
        "pair": pair,
        "drift": max(0.0, within - pair),
        "process": process,
        "per_block": per_block,
        "estimates": {"means": estimate(of_means), "median": estimate([statistics.median(d) for d in blocks])},
        "host_r2": statistics.correlation(level, means) ** 2
        if len(set(level)) > 1 and len(set(means)) > 1
        else math.nan,
        "share": {
            "pair": pair / n / per_block if per_block else math.nan,
            "drift": max(0.0, within - pair) / n / per_block if per_block else math.nan,
            "process": process / per_block if per_block else math.nan,
        },
    }


def estimate(logs: list[float]) -> dict:
    """A ratio from blocks' log ratios: its point, the SD of a block's log
    ratio (%) and the 95% interval's relative half-width (%, Student's t
    over blocks, as compare's interval is made)."""
    sd_ = statistics.stdev(logs)
    half = t_quantile(len(logs) - 1, 0.95) * sd_ / math.sqrt(len(logs))
    mid = statistics.mean(logs)
    return {"ratio": math.exp(mid), "sd": sd_ * 100, "half": half * 100, "excludes_1": abs(mid) > half}


def sd(v: float) -> float:
    return math.sqrt(v) * 100 if v == v else math.nan


def rows_of(data, benches: list[str] | None) -> dict[tuple[str, str], dict]:
    """{(row, candidate): its parts} of one stored run."""
    names = [t.name for t in data.targets]
    samples = [s for s in data.samples if not s.warmup and not s.counting and s.block is not None and s.block >= 0]
    by_row: dict[str, list] = defaultdict(list)
    for s in samples:
        by_row[s.benchmark].append(s)
    out = {}
    for bench in benches or sorted(by_row):
        for cand in names[1:]:
            got = decompose(by_row.get(bench, []), names[0], cand)
            if got is not None:
                out[(bench, cand)] = got
    return out


def go_ms(data) -> dict[str, float]:
    return {t.name: t.facts["lockstep_go_ms"] for t in data.targets if "lockstep_go_ms" in t.facts}


def summary(run: str, data, rows: dict[tuple[str, str], dict]) -> list[dict]:
    """Per candidate: the medians over its rows."""
    out = []
    go = go_ms(data)
    base = data.targets[0].name
    for cand in [t.name for t in data.targets[1:]]:
        got = [v for (_, c), v in rows.items() if c == cand]
        if not got:
            continue
        med = {k: statistics.median(g[k] for g in got) for k in (*PARTS, "per_block", "rounds")}
        r2 = [g["host_r2"] for g in got if g["host_r2"] == g["host_r2"]]
        per = sd(med["per_block"]) / 100
        out.append(
            {
                "run": run,
                "baseline": base,
                "candidate": cand,
                "rows": len(got),
                "blocks": statistics.median(g["blocks"] for g in got),
                "rounds": med["rounds"],
                **{k: sd(med[k]) for k in (*PARTS, "per_block")},
                "share": {k: statistics.median(g["share"][k] for g in got) for k in PARTS},
                "host_r2": statistics.median(r2) if r2 else math.nan,
                **{
                    way: {
                        "sd": statistics.median(g["estimates"][way]["sd"] for g in got),
                        "half": statistics.median(g["estimates"][way]["half"] for g in got),
                        "excludes_1": sum(g["estimates"][way]["excludes_1"] for g in got),
                        "ratios": [round(g["estimates"][way]["ratio"], 3) for g in got],
                    }
                    for way in ("means", "median")
                },
                "blocks_for_1pct": math.ceil((1.96 * per / 0.01) ** 2),
                "go_ms": (go.get(base), go.get(cand)),
            }
        )
    return out


def _fmt_go(go: tuple) -> str:
    return "/".join("-" if g is None else f"{g:.2f}" for g in go)


def _fmt_way(w: dict) -> str:
    return f"{w['sd']:.1f}%, ±{w['half']:.2f}% ({w['excludes_1']}): {', '.join(f'{r:.3f}' for r in w['ratios'])}"


def table(summaries: list[dict]) -> list[str]:
    lines = [
        "| run | candidate / baseline | rows | blocks × rounds | SD per block | pair | drift | process "
        "| shares pair/drift/process | host R² | blocks for ±1% | go ms (base/cand) "
        "| ratio of means: SD a block, ±% (rows apart from 1) | median of rounds: SD a block, ±% (rows apart from 1) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        sh = s["share"]
        lines.append(
            f"| {s['run']} | {s['candidate']} / {s['baseline']} | {s['rows']} | {s['blocks']:.0f} × {s['rounds']:.0f} "
            f"| {s['per_block']:.2f}% | {s['pair']:.2f}% | {s['drift']:.2f}% | {s['process']:.2f}% "
            f"| {sh['pair']:.0%}/{sh['drift']:.0%}/{sh['process']:.0%} | {s['host_r2']:.2f} "
            f"| {s['blocks_for_1pct']} | {_fmt_go(s['go_ms'])} | {_fmt_way(s['means'])} | {_fmt_way(s['median'])} |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", metavar="RUN")
    ap.add_argument("--db")
    ap.add_argument("--bench", nargs="+")
    ap.add_argument("--rows", action="store_true", help="every row's parts, not only the medians")
    ap.add_argument("--out", help="append the medians' table (Markdown) with the command to this file")
    args = ap.parse_args()
    store = Store(args.db or default_db_path(), readonly=True)
    summaries = []
    for ref in args.runs:
        data = store.load(store.resolve(ref))
        rows = rows_of(data, args.bench)
        if args.rows:
            print(f"run {data.id}: SDs of a log ratio, in %")
            print(
                f"{'row':14} {'candidate':28} {'blocks':>6} {'block':>6} {'pair':>6} {'drift':>6} {'proc':>6} {'R²':>5}"
            )
            for (bench, cand), g in rows.items():
                print(
                    f"{bench:14} {cand:28} {g['blocks']:6d} {sd(g['per_block']):6.2f} {sd(g['pair']):6.2f} "
                    f"{sd(g['drift']):6.2f} {sd(g['process']):6.2f} {g['host_r2']:5.2f}"
                )
        summaries += summary(data.id, data, rows)
    lines = table(summaries)
    print("\n".join(lines))
    if args.out:
        cmd = " ".join(shlex.quote(a) for a in [".venv/bin/python", "tools/variance.py", *sys.argv[1:]])
        with open(args.out, "a") as f:
            f.write("\n`" + cmd + "`\n\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
