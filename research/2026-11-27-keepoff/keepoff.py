#!/usr/bin/env python3
"""Does vmtax itself take the measured CPU from the agent?  (benchmark
script, not a test.)

With `--cpu N` every target runs on host CPU N.  Until 2026-11-27 vmtax
(the controller: one Python process reading each sample line as the agent
writes it) ran wherever the scheduler put it, and a reader woken by a
writer on CPU N is often put on CPU N.  Since then it keeps to the other
CPUs while the targets run (proc.keep_off).  This runs, in ABBA order over
rounds, the same A/A compare with an older checkout's package (old) and
this one's (new):

  vmtax compare local local:label=aa --bench getppid null_call segv stat
        --max-time 90s --precision 0.05% --cpu N

(the precision out of reach: every row runs to the budget, so its interval
says what the budget bought), with `perf record -C N -e sched:sched_switch`
around it, and summarises per way: how often the agent was preempted by a
Python task (vmtax, its threads, and its children before they exec), the
CPU time Python tasks had on CPU N, the agent processes run, the median
within-process SD of the timed samples, and the A/A ratios' 95% CIs.

Usage: .venv/bin/python bench/keepoff.py --old CHECKOUT [--rounds 2] [--max-time 90s]
       (git worktree add /tmp/old 7474a1f; the agent of this checkout is used by both)
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PY = str(REPO / ".venv" / "bin" / "python")
OUT = REPO / "results"
DB = OUT / "keepoff.db"
ROWS = ["getppid", "null_call", "segv", "stat"]
SWITCH = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch:\s+prev_comm=(.*?) prev_pid=\d+ prev_prio=\d+ "
                    r"prev_state=(\S+) ==> next_comm=(.*?) next_pid=\d+")


def on_cpu(text: str) -> dict:
    """From `perf script` of sched_switch on one CPU: seconds per task name, and the agent's preemptions by name."""
    held, preempted = defaultdict(float), defaultdict(int)
    cur = last = first = None
    for line in text.splitlines():
        m = SWITCH.search(line)
        if not m:
            continue
        t, prev, state, nxt = float(m.group(2)), m.group(3), m.group(4), m.group(5)
        first = t if first is None else first
        if cur is not None:
            held[cur] += t - last
        if prev.startswith("vmtax-agent") and state.startswith("R"):
            preempted[nxt] += 1
        cur, last = nxt, t
    return {"span": (last - first) if first is not None else 0.0, "held": held, "preempted": preempted}


def sample_sd(run: str) -> float:
    """The median over rows and targets of the within-process SD of the timed samples, over their mean."""
    con = sqlite3.connect(DB)
    by = defaultdict(list)
    for proc, bench, v in con.execute("SELECT process, benchmark, value FROM samples WHERE run_id=? AND warmup=0 "
                                      "AND counting=0", (run,)):
        by[(bench, proc)].append(v)
    per_row = defaultdict(list)
    for (bench, _), vs in by.items():
        if len(vs) >= 2:
            per_row[bench].append(statistics.stdev(vs) / statistics.fmean(vs))
    return statistics.median(statistics.median(v) for v in per_row.values())


def one(way: str, n: int, a, env: dict, cpu: int) -> dict:
    out = OUT / f"keepoff-{way}-{n}.json"
    data = Path(f"/tmp/keepoff-{os.getpid()}.perf")
    perf = subprocess.Popen(["perf", "record", "-q", "-C", str(cpu), "-e", "sched:sched_switch", "-o", str(data),
                             "--", "sleep", "3600"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        cmd = [PY, "-m", "vmtax.cli", "--db", str(DB), "compare", "local", "local:label=aa", "--bench", *ROWS,
               "--max-time", a.max_time, "--precision", "0.05%", "--cpu", str(cpu), "--json", str(out)]
        print(f"[{n} {way}] $ vmtax {' '.join(cmd[5:])}", file=sys.stderr, flush=True)
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, timeout=3600, check=False)
    finally:
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
    text = subprocess.run(["perf", "script", "-i", str(data)], capture_output=True, text=True).stdout
    data.unlink(missing_ok=True)
    d = json.loads(out.read_text())
    s = on_cpu(text)
    if not s["span"]:
        sys.exit("keepoff.py: no sched_switch line of perf script read (another format, or perf recorded nothing)")
    con = sqlite3.connect(DB)
    procs = con.execute("SELECT count(*) FROM processes WHERE run_id=? AND block>=0", (d["run_id"],)).fetchone()[0]
    py = Path(PY).name  # the comm of vmtax, its threads, and its children until they exec
    return {"way": way, "round": n, "run": d["run_id"], "controller_cpus": d["config"].get("controller_cpus"),
            "span": s["span"], "python_s": s["held"].get(py, 0.0), "agent_s": s["held"].get("vmtax-agent", 0.0),
            "preempted_by_python": s["preempted"].get(py, 0), "preempted": sum(s["preempted"].values()),
            "processes": procs, "sample_sd": sample_sd(d["run_id"]),
            "half": {c["benchmark"]: (c["ratio_ci_high"] - c["ratio_ci_low"]) / 2 / c["ratio"]
                     for c in d["comparisons"] if None not in (c["ratio"], c["ratio_ci_low"], c["ratio_ci_high"])}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True, help="an older checkout (its src/) for the controller placed anywhere")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-time", default="90s")
    a = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("keepoff.py needs two CPUs: one measured, one for vmtax")
    cpu = cpus[-1]
    old = Path(a.old).resolve()
    agent = str(REPO / "agent" / "build" / "vmtax-agent")
    env = {w: {**os.environ, "PYTHONPATH": str(p / "src"), "VMTAX_AGENT": agent}
           for w, p in (("old", old), ("new", REPO))}
    rev = subprocess.run(["git", "-C", str(old), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    got = []
    for n in range(1, a.rounds + 1):
        for way in (("old", "new") if n % 2 else ("new", "old")):
            got.append(one(way, n, a, env[way], cpu))
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    out = [f"`bench/keepoff.py --old CHECKOUT_OF_{rev} --rounds {a.rounds} --max-time {a.max_time}` "
           f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {model}, {len(cpus)} CPUs, measured CPU {cpu}; "
           f"order {', '.join(str(g['round']) + g['way'][0] for g in got)})", "",
           "| run | way | vmtax on | agent preempted by Python, per 90 s | Python on the measured CPU, per 90 s | "
           "agent there, per 90 s | "
           "agent processes | within-process SD (median) | " + " | ".join(f"{r} ±CI" for r in ROWS) + " |",
           "|---|---|---|---:|---:|---:|---:|---:|" + "---:|" * len(ROWS)]
    for g in got:
        scale = 90 / g["span"] if g["span"] else 0
        out.append(f"| {g['run']} | {g['way']} | {g['controller_cpus'] or 'anywhere'} | "
                   f"{g['preempted_by_python'] * scale:.0f} of {g['preempted'] * scale:.0f} | "
                   f"{g['python_s'] * scale:.2f} s | {g['agent_s'] * scale:.1f} s | {g['processes']} | {g['sample_sd']:.2%} | "
                   + " | ".join(f"±{g['half'].get(r, float('nan')):.2%}" for r in ROWS) + " |")
    for way in ("old", "new"):
        mine = [g for g in got if g["way"] == way]
        med = statistics.median(h for g in mine for h in g["half"].values())
        sds = ", ".join(f"{g['sample_sd']:.2%}" for g in mine)
        out.append(f"\n{way}: median ±CI over {len(mine)} runs' rows ±{med:.2%}; within-process SD {sds}")
    text = "\n".join(out) + "\n"
    print(text)
    (OUT / "keepoff.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
