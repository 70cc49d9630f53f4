#!/usr/bin/env python3
"""Where a pinned QEMU guest's threads run, and what each placement buys
(benchmark script, not a test).

Until 2026-11-26 vmtax meant to keep a pinned guest's vCPU thread on the
run's CPU and move QEMU's other threads to the remaining CPUs (libvirt's
emulatorpin), but QEMU names its threads "CPU n/TCG" only with
`-name ...,debug-threads=on`, which vmtax did not pass: no thread was taken
for a vCPU, and every thread, the vCPU's too, went to the other CPU -- the
guest ran off the CPU the run's header named.  This runs, in ABBA order over
rounds, the placements side by side:

  new   vmtax compare local qemu:accel=tcg,label=apart
                        qemu:accel=tcg,emulator=together,label=together ...
        (apart: the vCPU on the run's CPU, the emulator threads on the others;
         together: all of QEMU on the run's CPU)
  old   the same compare with the package of an older checkout (OLD), whose
        guest ran wholly on the other CPU: `local qemu:accel=tcg ...`

and summarises per placement the TCG ratios' median 95% half-width and the
between-process SD of the guest's process means, into results/qemupin.md.

Usage: .venv/bin/python bench/qemupin.py --old /tmp/old [--rounds 2] [--max-time 150s] [--reuse]
       (git worktree add /tmp/old c87a110 && make -C /tmp/old/agent)
"""
from __future__ import annotations

import argparse
import json
import os
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
ROWS = ["getppid", "null_read", "sig_handle", "mmap", "tlb_4k"]
DB = OUT / "qemupin.db"


def command(way: str, n: int, max_time: str) -> list[str]:
    targets = (["local", "qemu:accel=tcg,label=apart", "qemu:accel=tcg,emulator=together,label=together"]
               if way == "new" else ["local", "qemu:accel=tcg"])
    return [PY, "-m", "vmtax.cli", "--db", str(DB), "compare", *targets, "--bench", *ROWS, "--max-time", max_time,
            "--json", str(OUT / f"qemupin-{way}-{n}.json")]


def process_sd(run: str, target: str) -> float:
    """The median over rows of the between-process SD of the target's process means, over their mean."""
    con = sqlite3.connect(DB)
    means = defaultdict(list)
    for bench, block, value in con.execute("SELECT benchmark, block, value FROM samples WHERE run_id=? AND target=? "
                                           "AND warmup=0", (run, target)):
        means[(bench, block)].append(value)
    by_row = defaultdict(list)
    for (bench, _), vs in means.items():
        by_row[bench].append(statistics.fmean(vs))
    return statistics.median(statistics.stdev(v) / statistics.fmean(v) for v in by_row.values() if len(v) > 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True, help="an older checkout (its src/ and agent) to run the old placement")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-time", default="150s")
    ap.add_argument("--reuse", action="store_true", help="summarise the stored rounds only")
    a = ap.parse_args()
    old = Path(a.old).resolve()
    env = {"old": {**os.environ, "PYTHONPATH": str(old / "src")}, "new": {**os.environ, "PYTHONPATH": str(REPO / "src")}}
    for k in env.values():
        k.pop("VMTAX_AGENT", None)
    rev = subprocess.run(["git", "-C", str(old), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    order = []
    for n in range(1, a.rounds + 1):
        for way in (("old", "new") if n % 2 else ("new", "old")):
            order.append((n, way))
            if not a.reuse:
                cmd = command(way, n, a.max_time)
                print(f"[{n} {way}] $ {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
                subprocess.run(cmd, env=env[way], check=False, stdout=subprocess.DEVNULL, timeout=3600)
    rows = defaultdict(lambda: {"half": [], "sd": [], "ratio": defaultdict(list), "runs": []})
    for n, way in order:
        d = json.loads((OUT / f"qemupin-{way}-{n}.json").read_text())
        facts = {t["name"]: t["facts"] for t in d["targets"]}
        for t in [x["name"] for x in d["targets"] if x["name"].startswith("qemu")]:
            key = "old: every QEMU thread on the other CPU" if way == "old" else (
                "new: vCPU on the run's CPU, emulator threads apart" if "apart" in t
                else "new: all of QEMU on the run's CPU")
            cs = [c for c in d["comparisons"] if c["candidate"] == t]
            r = rows[key]
            r["half"].append(statistics.median((c["ratio_ci_high"] - c["ratio_ci_low"]) / 2 / c["ratio"] for c in cs))
            r["sd"].append(process_sd(d["run_id"], t))
            for c in cs:
                r["ratio"][c["benchmark"]].append(c["ratio"])
            r["runs"].append(d["run_id"])
            r["where"] = (f"vCPU threads on {facts[t].get('vcpu_threads_on', '? (not recorded)')}, "
                          f"emulator threads on {facts[t].get('emulator_threads_on')}")
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    out = [f"`bench/qemupin.py --old CHECKOUT_OF_{rev} --rounds {a.rounds} --max-time {a.max_time}` "
           f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cpu}, {os.cpu_count()} CPUs; every run "
           f"`--cpu auto`: the last CPU; rows {' '.join(ROWS)}; order " + ", ".join(f"{n}{w[0]}" for n, w in order) + ")",
           "", "| placement | where (facts of the new runs) | median ±CI of the 5 TCG ratios, per run | "
           "between-process SD of the guest's means (median row), per run | " + " | ".join(ROWS) + " |",
           "|---|---|---:|---:|" + "---:|" * len(ROWS)]
    for key, r in rows.items():
        out.append(f"| {key} | {r['where'] if key.startswith('new') else 'every thread on the CPU that is not the run' + chr(39) + 's'} | "
                   + ", ".join(f"±{h:.2%}" for h in r["half"]) + " | " + ", ".join(f"{s:.1%}" for s in r["sd"]) + " | "
                   + " | ".join("/".join(f"{x:.3g}" for x in r["ratio"][b]) for b in ROWS) + " |")
    out += ["", "Runs: " + "; ".join(f"{k}: {', '.join(r['runs'])}" for k, r in rows.items()), ""]
    text = "\n".join(out)
    print(text)
    (OUT / "qemupin.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
