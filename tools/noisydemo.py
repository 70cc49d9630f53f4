#!/usr/bin/env python3
"""`make demo` on a host busy in stretches, made on purpose (benchmark
script, not a test; issue 21's first "Done means" item, measured on the
nearest host this machine can make: it is quiet of its own).

The noise is tools/hog.py pinned to the measured CPU, on and off
in stretches of 0.5-2 s, here its impartial kind (rt: SCHED_FIFO, a third
of the CPU in 0.5 ms slices through each stretch): every process on that
CPU -- the agent's, the container's, the guest's vCPU thread -- runs at
about two thirds of its speed in a stretch, whatever its cgroup.  (The
plain hog, a busy loop under the ordinary scheduler, was tried first: CFS
shares a CPU between cgroups by weight, and the container's agent, in its
own cgroup, lost less to it than the bare machine's, which shares the hog's:
the container read 0.66-0.83x the bare machine on most rows -- a true
figure about contention across cgroups, not a host state.)  Time-sharing,
not a busy SMT sibling, but process means in two modes lasting seconds, the
shape the cloud host showed.  Each round runs the demo's own command (read
from the Makefile: its targets, budget and rows) once each way (--ways, of
plain: without a mode flag, fast: --fast-mode, same: --same-mode), the order
rotated round by round (ABBA with two ways), and the summary gives, per way
and target, the median 95% half-width of the ratios, the ratios within +-1%,
the rows the budget stopped before the precision did, and the rows headlined
by a mode's stratum, into results/noisydemo.md (the JSON documents
results/noisydemo-NN-WAY.json are not kept in git).

Usage: .venv/bin/python tools/noisydemo.py [--rounds 1] [--ways plain,fast,same] [--first N] [--reuse]
                                          [--runs GLOB] [--out NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demojob import WAY_FLAG, WAY_NAME, demo_args, rotated, ways_arg
from hog import hog, stop

REPO = Path(__file__).resolve().parents[1]
VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"


def demo_command() -> list[str]:
    """The demo's compare as the Makefile has it, less its mode flag (--same-mode since 2026-11-26 10:40
    UTC): each way adds its own."""
    return [w for w in demo_args() if w not in ("--fast-mode", "--same-mode")]


def one(i: int, way: str) -> Path:
    out = OUT / f"noisydemo-{i:02d}-{way}.json"
    cpu = max(0, (os.cpu_count() or 1) - 1)  # the CPU --cpu auto picks, named: the hog goes there too
    cmd = [VMTAX] + demo_command() + ["--cpu", str(cpu), "--json", str(out)] + WAY_FLAG[way]
    print("$", " ".join(cmd[1:]), flush=True)
    h = hog(cpu, 3600, seed=1000 + i, rt=True)
    try:
        subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, timeout=3600)
    finally:
        stop(h)
    return out


def half(c: dict) -> float:
    if c["ratio_ci_low"] is None or c["ratio_ci_high"] is None:
        return float("inf")
    return (c["ratio_ci_high"] - c["ratio_ci_low"]) / 2 / c["ratio"]


def summary(paths: list[Path]) -> list[str]:
    out = [
        "| way | runs | target | median ±CI | within ±1% | stopped by the budget | a mode's stratum headlined "
        "| a run took (median) |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for way in WAY_FLAG:
        docs = [json.loads(p.read_text()) for p in paths if p.name.endswith(f"-{way}.json") and p.exists()]
        if not docs:
            continue
        took = statistics.median(d["finished"] - d["started"] for d in docs)
        cs = [c for d in docs for c in d.get("comparisons", [])]
        groups = [("every target", cs)] + [
            (t, [c for c in cs if c["candidate"] == t]) for t in sorted({c["candidate"] for c in cs})
        ]
        for name, group in groups:
            h = [half(c) for c in group]
            unsure = sum(c["stopped_by"] == "budget" for c in group)
            strata = sum(c.get("estimand") in ("fast mode", "same mode") for c in group)
            out.append(
                f"| {WAY_NAME[way]} | {len(docs)} | {name} | ±{statistics.median(h):.2%} | "
                f"{sum(x <= 0.01 for x in h)} of {len(group)} | {unsure} | {strata} | {took:.0f} s |"
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=1, help="rounds: each runs every way once")
    ap.add_argument(
        "--ways",
        type=ways_arg,
        default=["plain", "fast", "same"],
        metavar="WAY,WAY",
        help=f"of {', '.join(WAY_FLAG)} (default all three)",
    )
    ap.add_argument("--first", type=int, default=0, metavar="N", help="number the new runs from N (a series continued)")
    ap.add_argument("--reuse", action="store_true", help="summarise the stored runs only")
    ap.add_argument(
        "--runs",
        default="noisydemo-[0-9]*.json",
        metavar="GLOB",
        help="which stored runs of results/ to summarise (default all)",
    )
    ap.add_argument("--out", default="noisydemo.md", metavar="NAME", help="the summary's file in results/")
    a = ap.parse_args()
    if not a.reuse:
        i = a.first
        for r in range(a.rounds):
            for way in rotated(a.ways, r):
                one(i, way)
                i += 1
    paths = sorted(OUT.glob(a.runs))
    docs = [json.loads(p.read_text()) for p in paths]
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "?",
    )
    span = (
        (
            f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(min(d['started'] for d in docs)))}-"
            f"{time.strftime('%H:%M UTC', time.gmtime(max(d['finished'] for d in docs)))}"
        )
        if docs
        else "-"
    )
    cmd = " ".join(demo_command())
    text = "\n".join(
        [
            f"`tools/noisydemo.py`, {len(paths)} runs ({span}, {cpu}, {os.cpu_count()} CPUs), each `vmtax {cmd} "
            f"--cpu N [--fast-mode | --same-mode]`: every target pinned to the last CPU, the SCHED_FIFO hog on it "
            f"(a third of the CPU) in stretches of 0.5-2 s",
            "",
            *summary(paths),
            "",
            "Runs: " + ", ".join(f"`{d['run_id']}`" for d in docs),
            "",
        ]
    )
    print(text)
    (OUT / a.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
