#!/usr/bin/env python3
"""A host busy in stretches, made on purpose: does `compare --fast-mode`
hold its error rate and buy precision there? (benchmark script, not a test;
issue 21.)

A noisy cloud host flips each vCPU between a fast and a slow state for
seconds at a time; this machine is quiet, so this script makes such a host:
a CPU hog pinned to the measured CPU, on and off in stretches of 0.5-2 s
(uniform, seeded), so a fresh agent process runs either alone or sharing
its CPU.  That is time-sharing, not a busy SMT sibling: the two states
differ by ~1.5x rather than ~1.4x, and the agent's reference loop does not
see them (results/precision.md); what it tests is the statistics on
process means in two modes, on real processes.

Each round runs, in ABBA order over rounds (plain, fast, fast, plain, ...),

    vmtax compare local local:label=aa local:inject=3,label=slow --bench ROWS --max-time T [--fast-mode]

and the summary gives, per way, the A/A rows flagged (goal <= 5%), the 3%
rows flagged above 1 (goal >= 95%), the median 95% half-width of the ratios
and the share within +-1%, into results/twostate.md (and the JSON
documents beside it, results/twostate-*.json are not kept in git).

Usage: .venv/bin/python bench/twostate.py [--rounds 4] [--max-time 2m] [--bench getppid ...]
       [--first N] (number the new runs from N: a series continued; the
                   summary is over every results/twostate-*.json)
       [--reuse]   (re-analyse the stored rounds only)
       [--since N] (summarise runs N and on only)
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"
ROWS = ["getppid", "null_read", "stat", "page_fault"]


def hog(cpu: int, seconds: float, seed: int, rt: bool = False) -> subprocess.Popen:
    """A child that keeps CPU `cpu` busy in stretches, idle in between, for
    at most `seconds`, and ends when its parent does (killed with its process
    group on our exit).  Plain: a busy loop under the ordinary scheduler,
    which shares the CPU with each cgroup by the cgroups' weights (a
    container's processes, in their own cgroup, got more of it than the bare
    machine's in the hog's). rt=True: SCHED_FIFO, 0.5 ms busy and 1 ms
    asleep through each stretch, so that every process on the CPU, whatever
    its cgroup, runs at about two thirds of its speed there (about 1.5x
    slower, as a busy sibling made the cloud host's vCPU)."""
    code = ("import os,random,time\n"
            f"os.sched_setaffinity(0,{{{cpu}}}); r=random.Random({seed}); end=time.monotonic()+{seconds}\n"
            f"parent={os.getpid()}\n"
            + ("os.sched_setscheduler(0,os.SCHED_FIFO,os.sched_param(1))\n" if rt else "")
            + "while time.monotonic()<end and os.getppid()==parent:\n"
            "  t=time.monotonic()+r.uniform(0.5,2.0)\n"
            "  while time.monotonic()<t:\n"
            + ("    s=time.monotonic()+0.0005\n"
               "    while time.monotonic()<s: pass\n"
               "    time.sleep(0.001)\n" if rt else "    pass\n")
            + "  time.sleep(r.uniform(0.5,2.0))\n")
    h = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    time.sleep(0.3)
    if h.poll() is not None:  # e.g. SCHED_FIFO refused without root: a quiet machine is no hogged one
        raise SystemExit(f"the hog on CPU {cpu} ended at once (exit {h.returncode}): nothing measured")
    return h


def stop(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def one(i: int, fast: bool, rows: list[str], max_time: str) -> Path:
    out = OUT / f"twostate-{i:02d}-{'fast' if fast else 'plain'}.json"
    cpu = max(0, (os.cpu_count() or 1) - 1)  # the CPU --cpu auto picks, named: the hog goes there too
    cmd = [VMTAX, "compare", "local", "local:label=aa", "local:inject=3,label=slow", "--bench", *rows,
           "--max-time", max_time, "--cpu", str(cpu), "--json", str(out)] + (["--fast-mode"] if fast else [])
    print("$", " ".join(cmd[1:]), flush=True)
    h = hog(cpu, 3600, seed=i)
    try:
        subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, timeout=3600)
    finally:
        stop(h)
    return out


def summary(paths: list[Path]) -> list[str]:
    out = ["| way | runs | A/A rows flagged | 3% rows flagged above 1 | median ±CI | within ±1% "
           "| rows with a fast-mode ratio | a run took (median) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for way in ("plain", "fast"):
        docs = [json.loads(p.read_text()) for p in paths if p.name.endswith(f"-{way}.json") and p.exists()]
        cs = [c for d in docs for c in d.get("comparisons", [])]
        aa = [c for c in cs if "label=aa" in c["candidate"]]
        slow = [c for c in cs if "label=slow" in c["candidate"]]
        half = [(c["ratio_ci_high"] - c["ratio_ci_low"]) / 2 / c["ratio"] for c in cs
                if c["ratio_ci_low"] is not None and c["ratio_ci_high"] is not None]
        two = sum(c.get("fast_mode") is not None for c in cs)
        if not cs:
            continue
        out.append(f"| {'--fast-mode' if way == 'fast' else 'as before'} | {len(docs)} | "
                   f"{sum(c['significant'] for c in aa)} of {len(aa)} | "
                   f"{sum(c['significant'] and c['ratio'] > 1 for c in slow)} of {len(slow)} | "
                   f"±{statistics.median(half):.2%} | {sum(h <= 0.01 for h in half)} of {len(cs)} | "
                   f"{two} of {len(cs)} | {statistics.median(d['finished'] - d['started'] for d in docs):.0f} s |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=4, help="rounds of each way")
    ap.add_argument("--max-time", default="2m")
    ap.add_argument("--bench", nargs="+", default=ROWS)
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--first", type=int, default=0, metavar="N")
    ap.add_argument("--since", type=int, default=0, metavar="N",
                    help="summarise only the runs numbered N and on (a series after a change of code)")
    ap.add_argument("--reanalyse", action="store_true",
                    help="with --reuse: each stored run's JSON again from `vmtax show` (this code's analysis; "
                         "its stops were the code's of the day)")
    a = ap.parse_args()
    if not a.reuse:
        for i in range(a.first, a.first + 2 * a.rounds):
            one(i, (i % 4) in (1, 2), a.bench, a.max_time)  # ABBA
    paths = [p for p in sorted(OUT.glob("twostate-*.json")) if int(p.name.split("-")[1]) >= a.since]
    if a.reuse and a.reanalyse:
        for p in paths:
            run = json.loads(p.read_text())["run_id"]
            subprocess.run([VMTAX, "show", run, "--json", str(p)], check=True, stdout=subprocess.DEVNULL)
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    docs = [json.loads(p.read_text()) for p in paths]
    runs = [d["run_id"] for d in docs]
    span = (f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(min(d['started'] for d in docs)))}-"
            f"{time.strftime('%H:%M UTC', time.gmtime(max(d['finished'] for d in docs)))}") if docs else "-"
    text = "\n".join([
        f"`bench/twostate.py --max-time {a.max_time} --bench {' '.join(a.bench)}`, {len(paths)} runs "
        f"({span}, {cpu}, {os.cpu_count()} CPUs; "
        f"every target pinned to the last CPU (--cpu auto, named as --cpu N since run 16), the hog on it in stretches of 0.5-2 s)", "",
        *summary(paths), "", "Runs: " + ", ".join(runs), ""])
    print(text)
    (OUT / ("twostate.md" if not a.since else f"twostate-since-{a.since}.md")).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
