#!/usr/bin/env python3
"""Lockstep pairs against blocks on a bare machine, with the static agent
alone and Python's standard library (no vmtax package, no numpy): for a
machine where only the agent can be copied.

For each of --blocks blocks, in turn:
  lockstep  two agent processes (--step, pinned to one CPU) alternate
            samples of about --step-ms, --rounds pairs, the order of each
            pair by a coin; the block's log ratio of the two sides' means
  blocks    one agent process of the baseline, then one of the candidate
            (1 warmup, 3 samples of 10 ms), in a random order: the same
Before them, one process's series of 0.5 ms samples gives the SD of the log
ratio of two samples at each distance (the noise by distance of `vmtax
doctor`).  The candidate is the baseline again (A/A), or with --inject PCT
the agent adding PCT% to every operation.  Prints the SD of the block log
ratios each way and the mean ratio, as JSON and text.

With --rows (names, or `all`: every row of `vmtax-agent --list`), each
row instead runs --blocks lockstep blocks of three sides, as `vmtax compare
local local:label=aa local:inject=3,label=slow` runs them (each round a
sample of every side, in an order drawn at random): per row and
candidate, the ratio and its 95% interval over the blocks (Student), and
whether it excludes 1; the A/A rows flagged and the injected rows found.

Usage: python3 research/2026-11-27-lockstep-probe/lockstep_probe.py [--agent agent/build/vmtax-agent]
       [--bench getppid] [--blocks 40] [--rounds 30] [--cpu N] [--inject PCT]
       python3 research/2026-11-27-lockstep-probe/lockstep_probe.py --rows all [--blocks 30] [--inject 3] [--cpu N]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import random
import statistics
import subprocess
import time


def lines_of(p):
    for raw in p.stdout:
        msg = json.loads(raw)
        if msg["type"] == "error":
            raise RuntimeError(msg["message"])
        yield msg


def calibrate(agent, bench, cpu, ms):
    p = subprocess.run(
        [agent, "run", bench, "--samples", "3", "--warmup", "1", "--min-time-ms", "10", "--cpu", str(cpu)],
        capture_output=True,
        text=True,
        check=True,
    )
    msgs = [json.loads(line) for line in p.stdout.splitlines()]
    iters = next(m["iters"] for m in msgs if m["type"] == "calibration")
    return max(1, round(iters * ms / 10))


def series(agent, bench, cpu, seconds):
    iters = calibrate(agent, bench, cpu, 0.5)
    n = int(seconds * 2000)
    p = subprocess.run(
        [
            agent,
            "run",
            bench,
            "--samples",
            str(n),
            "--warmup",
            "5",
            "--iters",
            str(iters),
            "--max-sample-ms",
            "0",
            "--ref-steps",
            "0",
            "--cpu",
            str(cpu),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    got = [m for m in (json.loads(line) for line in p.stdout.splitlines()) if m["type"] == "sample" and not m["warmup"]]
    times, t = [], 0.0
    for m in got:
        d = m["value"] * m["ops"] / 1e9
        times.append(t + d / 2)
        t += d
    values = [m["value"] for m in got]
    logs = [math.log(v) for v in values]
    curve = []
    for d in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):
        diffs = []
        for i, ti in enumerate(times):
            j = bisect.bisect_left(times, ti + d / 1e3, lo=i + 1)
            if j < len(times) and d / 1.25 <= (times[j] - ti) * 1e3 <= d * 1.25:
                diffs.append(logs[j] - logs[i])
        if len(diffs) >= 20:
            curve.append({"ms": d, "sd_pct": round(statistics.stdev(diffs) * 100, 2)})
    return curve


def step_agent(agent, bench, cpu, iters, samples, inject, warmup=3):
    argv = [
        agent,
        "run",
        bench,
        "--samples",
        str(samples),
        "--warmup",
        str(warmup),
        "--iters",
        str(iters),
        "--max-sample-ms",
        "0",
        "--cpu",
        str(cpu),
        "--step",
    ] + (["--inject", str(inject)] if inject else [])
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    it = lines_of(p)
    while next(it)["type"] != "ready":
        pass
    return p, it


def stepped_means(agent, bench, cpu, iters, rounds, injects, rng):
    """One lockstep block of a side per inject (0: the baseline as is): every
    round each side's sample once, in an order drawn at random (as
    lockstep.round_order), 3 warmup rounds first; each side's mean."""
    sides = [step_agent(agent, bench, cpu, iters, rounds, inject) for inject in injects]
    vals = [[] for _ in sides]
    for _ in range(rounds + 3):
        for k in rng.sample(range(len(sides)), len(sides)):
            p, it = sides[k]
            p.stdin.write("go\n")
            p.stdin.flush()
            m = next(it)
            while m["type"] != "sample":
                m = next(it)
            if not m["warmup"]:
                vals[k].append(m["value"])
    for p, _ in sides:
        p.stdin.close()
        p.wait()
    return [statistics.fmean(v) for v in vals]


def lockstep_block(agent, bench, cpu, iters, rounds, inject, rng):
    base, cand = stepped_means(agent, bench, cpu, iters, rounds, [0, inject], rng)
    return math.log(cand / base)


def t975(df: int) -> float:
    """Student's 97.5% quantile (Cornish-Fisher, within 1e-3 from 5 degrees of freedom)."""
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def three_sides_block(agent, bench, cpu, iters, rounds, inject, rng):
    """One block of the baseline, an A/A side and an injected side in lockstep: (log ratio aa, log ratio slow)."""
    base, aa, slow = stepped_means(agent, bench, cpu, iters, rounds, [0, 0, inject], rng)
    return math.log(aa / base), math.log(slow / base)


def rows_mode(a) -> None:
    names = (
        [
            m["name"]
            for m in json.loads(subprocess.run([a.agent, "--list"], capture_output=True, text=True, check=True).stdout)
        ]
        if a.rows == ["all"]
        else a.rows
    )
    rng = random.Random(1)
    out = []
    for bench in names:
        iters = calibrate(a.agent, bench, a.cpu, a.step_ms)
        t0 = time.monotonic()
        got = [three_sides_block(a.agent, bench, a.cpu, iters, a.rounds, a.inject, rng) for _ in range(a.blocks)]
        row = {"bench": bench, "seconds": round(time.monotonic() - t0, 1)}
        for k, name in ((0, "aa"), (1, "slow")):
            xs = [g[k] for g in got]
            mean, half = statistics.fmean(xs), t975(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
            row[name] = {
                "ratio": round(math.exp(mean), 5),
                "halfwidth_pct": round((math.exp(half) - 1) * 100, 3),
                "flagged": abs(mean) > half,
                "above": mean > half,
            }
        out.append(row)
        print(json.dumps(row), flush=True)
    aa = sum(r["aa"]["flagged"] for r in out)
    found = sum(r["slow"]["above"] for r in out)
    halves = sorted(r[k]["halfwidth_pct"] for r in out for k in ("aa", "slow"))
    print(
        f"{len(out)} rows, {a.blocks} lockstep blocks each: A/A flagged {aa} of {len(out)}; "
        f"+{a.inject:g}% found {found} of {len(out)}; median 95% CI ±{statistics.median(halves):.2f}%, "
        f"{sum(h <= 1.0 for h in halves)} of {len(halves)} within ±1%"
    )


def process_mean(agent, bench, cpu, iters, inject):
    argv = [
        agent,
        "run",
        bench,
        "--samples",
        "3",
        "--warmup",
        "1",
        "--iters",
        str(iters),
        "--max-sample-ms",
        "0",
        "--cpu",
        str(cpu),
    ] + (["--inject", str(inject)] if inject else [])
    p = subprocess.run(argv, capture_output=True, text=True, check=True)
    return statistics.fmean(
        m["value"]
        for m in (json.loads(line) for line in p.stdout.splitlines())
        if m["type"] == "sample" and not m["warmup"]
    )


def blocks_block(agent, bench, cpu, iters10, inject, rng):
    order = [0, 1] if rng.random() < 0.5 else [1, 0]
    means = {}
    for k in order:
        means[k] = process_mean(agent, bench, cpu, iters10, inject if k else 0)
    return math.log(means[1] / means[0])


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--agent", default=os.path.join(here, "..", "..", "agent", "build", "vmtax-agent"))
    ap.add_argument("--bench", default="getppid")
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--step-ms", type=float, default=1.0)
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument("--inject", type=float, default=0.0)
    ap.add_argument("--series-seconds", type=float, default=3.0)
    ap.add_argument("--rows", nargs="+")
    a = ap.parse_args()
    if a.rows:
        return rows_mode(a)
    rng = random.Random(1)
    out = {
        "bench": a.bench,
        "cpu": a.cpu,
        "inject": a.inject,
        "nproc": os.cpu_count(),
        "noise_by_distance": series(a.agent, a.bench, a.cpu, a.series_seconds),
    }
    iters = calibrate(a.agent, a.bench, a.cpu, a.step_ms)
    iters10 = calibrate(a.agent, a.bench, a.cpu, 10)
    lock, blk, t_lock, t_blk = [], [], 0.0, 0.0
    for _ in range(a.blocks):
        t0 = time.monotonic()
        lock.append(lockstep_block(a.agent, a.bench, a.cpu, iters, a.rounds, a.inject, rng))
        t1 = time.monotonic()
        blk.append(blocks_block(a.agent, a.bench, a.cpu, iters10, a.inject, rng))
        t_lock, t_blk = t_lock + t1 - t0, t_blk + time.monotonic() - t1
    for name, xs, t in (("lockstep", lock, t_lock), ("blocks", blk, t_blk)):
        out[name] = {
            "blocks": len(xs),
            "ratio": round(math.exp(statistics.fmean(xs)), 5),
            "block_sd_pct": round(statistics.stdev(xs) * 100, 3),
            "seconds_per_block": round(t / len(xs), 3),
        }
    print(json.dumps(out))
    print("noise by distance: " + " · ".join(f"{c['ms']} ms {c['sd_pct']}%" for c in out["noise_by_distance"]))
    for name in ("lockstep", "blocks"):
        r = out[name]
        print(
            f"{name:9s} ratio {r['ratio']:.4f}  SD of a block's log ratio {r['block_sd_pct']:.2f}%  "
            f"{r['seconds_per_block'] * 1e3:.0f} ms a block"
        )


if __name__ == "__main__":
    main()
