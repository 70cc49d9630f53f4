#!/usr/bin/env python3
"""The CI gate's error rates (benchmark script, not a test): does `vmtax gate`
call an injected slowdown a regression, and an A/A pair a pass, run after run?

Each trial is one real comparison,

    vmtax compare local local:label=aa local:inject=2,label=slow --bench ROWS --max-time T

gated twice, with Holm's correction over the rows of each candidate:
`aa` (the machine against itself: a trial whose gate says `regressed` is a
false alarm, counted per run) and `slow` (the agent adds 2% of each
operation's own time to every operation: the gate should say `regressed`
for the injected rows).  On the same stored samples it also says what two
other rules would have said: Firecracker's A/B rule (a permutation test
of the two unpaired sets of process means, p < 0.01, and a change beyond
20%) and pyperf compare_to's (Student's t-test over all values at 95%,
"significant" then slower or faster).  Writes results/ab.md and
results/ab.json.

Usage: .venv/bin/python bench/ab.py [--trials 20] [--max-time 10m] [--inject 2] [--threshold 1%]
       [--bench NAME ...] [--reuse]
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import stats as sps

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from vmtax import watch  # noqa: E402
from vmtax.analysis import analyse  # noqa: E402
from vmtax.store import Store  # noqa: E402

VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"
DB = OUT / "ab.db"
ROWS = ["getppid", "null_read", "stat", "sig_handle", "page_fault", "mmap", "pi", "cpuid", "segv",
        "ctx_2p_16k"]


def trial_command(args, n: int) -> list[str]:
    return [VMTAX, "--db", str(DB), "compare", "local", "local:label=aa", f"local:inject={args.inject:g},label=slow",
            "--bench", *args.bench, "--max-time", args.max_time, "--json", str(OUT / f"ab-{n}.json")]


def process_means(data, target: str, bench: str) -> list[float]:
    by: dict[int, list[float]] = {}
    for s in data.samples:
        if s.target == target and s.benchmark == bench and not s.warmup and not s.counting:
            by.setdefault(s.process, []).append(s.value)
    return [sum(v) / len(v) for v in by.values()]


def values(data, target: str, bench: str) -> list[float]:
    return [s.value for s in data.samples
            if s.target == target and s.benchmark == bench and not s.warmup and not s.counting]


def firecracker(a: list[float], b: list[float], rng: np.random.Generator) -> bool:
    """Firecracker's A/B rule: a permutation test of the difference of means
    (A and B unpaired), p < 0.01, and a relative change beyond 20%."""
    if len(a) < 2 or len(b) < 2:
        return False
    x, y = np.array(a), np.array(b)
    obs = abs(y.mean() - x.mean())
    both = np.concatenate([x, y])
    hits = 0
    for _ in range(2000):
        rng.shuffle(both)
        hits += abs(both[len(x):].mean() - both[:len(x)].mean()) >= obs
    p = (hits + 1) / 2001
    return bool(p < 0.01 and abs(y.mean() / x.mean() - 1) > 0.20)


def pyperf_says(a: list[float], b: list[float]) -> str:
    """pyperf compare_to: 'not significant' unless Student's t-test over all
    values rejects at 95%; then 'slower' or 'faster' (means)."""
    if len(a) < 2 or len(b) < 2:
        return "not significant"
    t, p = sps.ttest_ind(a, b)
    if not p < 0.05:
        return "not significant"
    return "slower" if np.mean(b) > np.mean(a) else "faster"


def gate_of(data, cs, cand: str, threshold: float):
    return watch.gate(replace(data, targets=[data.targets[0]] + [t for t in data.targets if t.name == cand]),
                      [c for c in cs if c.candidate == cand], threshold)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--max-time", default="10m")
    ap.add_argument("--inject", type=float, default=2.0)
    ap.add_argument("--threshold", default="1%")
    ap.add_argument("--bench", nargs="+", default=ROWS)
    ap.add_argument("--reuse", action="store_true", help="re-analyse the stored trials only")
    args = ap.parse_args()
    threshold = float(args.threshold.rstrip("%")) / 100
    OUT.mkdir(exist_ok=True)
    t0 = time.time()
    for n in range(1, args.trials + 1):
        if args.reuse:
            break
        cmd = trial_command(args, n)
        print(f"[trial {n}/{args.trials}] $ {' '.join(cmd)}", file=sys.stderr, flush=True)
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode not in (0, 1, 3):
            sys.exit(f"trial {n} failed ({p.returncode}): {p.stderr[-2000:]}")
    ids = [json.loads((OUT / f"ab-{n}.json").read_text())["run_id"] for n in range(1, args.trials + 1)]
    rng = np.random.default_rng(0)
    trials = []
    with Store(DB, readonly=True) as store:
        for run_id in ids:
            data = store.load(run_id)
            cs = analyse(data)[1]
            aa, slow = "local:label=aa", f"local:inject={args.inject:g},label=slow"
            g_aa, g_slow = gate_of(data, cs, aa, threshold), gate_of(data, cs, slow, threshold)
            other = {}
            for cand in (aa, slow):
                rows = {}
                for spec in data.benchmarks:
                    base = spec.name
                    rows[base] = {
                        "firecracker": firecracker(process_means(data, "local", base), process_means(data, cand, base), rng),
                        "pyperf": pyperf_says(values(data, "local", base), values(data, cand, base))}
                other[cand] = rows
            trials.append({"run": run_id, "aa": watch_json(g_aa), "slow": watch_json(g_slow), "other": other})
    text = report(trials, args, threshold, time.time() - t0)
    (OUT / "ab.md").write_text(text)
    (OUT / "ab.json").write_text(json.dumps(trials, indent=1) + "\n")
    print(text)
    return 0


def watch_json(g) -> dict:
    return {"verdict": g.verdict, "rows": {r.benchmark: {"verdict": r.verdict, "ratio": r.ratio,
                                                         "p_adjusted": r.p_adjusted} for r in g.rows}}


def report(trials: list[dict], args, threshold: float, seconds: float) -> str:
    n = len(trials)
    aa_alarm = sum(t["aa"]["verdict"] == "regressed" for t in trials)
    aa_pass = sum(t["aa"]["verdict"] == "pass" for t in trials)
    rows = sorted({b for t in trials for b in t["slow"]["rows"]})
    slow_rows = sum(len(t["slow"]["rows"]) for t in trials)
    slow_hit = sum(r["verdict"] == "regressed" for t in trials for r in t["slow"]["rows"].values())
    slow_runs = sum(t["slow"]["verdict"] == "regressed" for t in trials)
    aa_key, slow_key = "local:label=aa", f"local:inject={args.inject:g},label=slow"
    fc_slow = sum(r["firecracker"] for t in trials for r in t["other"][slow_key].values())
    fc_aa = sum(any(r["firecracker"] for r in t["other"][aa_key].values()) for t in trials)
    pp_slow = sum(r["pyperf"] == "slower" for t in trials for r in t["other"][slow_key].values())
    pp_aa = sum(any(r["pyperf"] != "not significant" for r in t["other"][aa_key].values()) for t in trials)
    lines = ["# A/B: the gate's error rates", "",
             f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/ab.py --trials {n} "
             f"--max-time {args.max_time} --inject {args.inject:g} --threshold {args.threshold}` "
             f"({seconds / 60:.0f} min, {platform.node()}); each trial: `vmtax compare local local:label=aa "
             f"local:inject={args.inject:g},label=slow --bench {' '.join(args.bench)} --max-time {args.max_time}`, "
             f"pinned (`--cpu auto`), gated per candidate at {threshold:.0%} with Holm over its "
             f"{len(rows)} rows (family-wise alpha 0.05).", "",
             f"- **A/A gate (false alarm per run): {aa_alarm} of {n} runs `regressed`** ({aa_pass} `pass`, "
             f"{n - aa_pass - aa_alarm} `inconclusive`).",
             f"- **{args.inject:g}% injected: {slow_hit} of {slow_rows} rows `regressed` "
             f"({slow_hit / max(1, slow_rows):.0%}); the run's gate said `regressed` in {slow_runs} of {n}.**",
             f"- Firecracker's rule (permutation p < 0.01 and > 20%) on the same process means: "
             f"{fc_slow} of {slow_rows} injected rows flagged; A/A runs with any row flagged: {fc_aa} of {n}.",
             f"- pyperf compare_to (t-test at 95% over all values): {pp_slow} of {slow_rows} injected rows "
             f"'slower'; A/A runs with any row called slower or faster: {pp_aa} of {n}.", "",
             "| row | injected: regressed | A/A: regressed | median injected ratio |", "|---|---:|---:|---:|"]
    for b in rows:
        hit = sum(t["slow"]["rows"].get(b, {}).get("verdict") == "regressed" for t in trials)
        alarm = sum(t["aa"]["rows"].get(b, {}).get("verdict") == "regressed" for t in trials)
        ratios = sorted(t["slow"]["rows"][b]["ratio"] for t in trials if t["slow"]["rows"].get(b, {}).get("ratio"))
        med = f"{ratios[len(ratios) // 2]:.4f}" if ratios else "-"
        lines.append(f"| {b} | {hit}/{n} | {alarm}/{n} | {med} |")
    lines += ["", "Runs: " + ", ".join(f"`{t['run']}`" for t in trials) + f" (in `{DB.relative_to(REPO)}`, "
              "not kept in git: the JSON beside this file holds what is reported)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
