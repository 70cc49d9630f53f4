#!/usr/bin/env python3
"""Benchmark script for the measuring core (not a test): records, on this
machine, in one session,

1. `vmtax run --target local` of the default suite at 1% precision with a
   6-minute budget, and which benchmarks stopped on precision;
2. the context-switch rows pinned to one CPU (the default run is unpinned);
3. getppid from the agent against `perf bench syscall basic`, interleaved
   round by round, with the ratio's 95% confidence interval.

Writes results/foundation.md (and the JSON documents beside it).
Usage: .venv/bin/python bench/foundation.py [--max-time 6m] [--rounds 60] [--reuse]
"""
from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from vmtax import stats  # noqa: E402
from vmtax.report.units import fmt_pct  # noqa: E402

VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
AGENT = str(REPO / "agent" / "build" / "vmtax-agent")
OUT = REPO / "results"


def sh(cmd: list[str]) -> str:
    print("$ " + " ".join(cmd), file=sys.stderr)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


def vmtax_run(args: list[str], json_name: str) -> tuple[str, dict]:
    path = OUT / json_name
    cmd = [VMTAX, "run", *args, "--json", str(path)]
    table = sh(cmd)
    return " ".join(["vmtax", "run", *args]), json.loads(path.read_text()) | {"_table": table}


def reuse(args: list[str], json_name: str) -> tuple[str, dict]:
    """A stored run of an earlier invocation, re-analysed by today's vmtax."""
    run_id = json.loads((OUT / json_name).read_text())["run_id"]
    path = OUT / json_name
    table = sh([VMTAX, "show", run_id, "--json", str(path)])
    return " ".join(["vmtax", "run", *args]), json.loads(path.read_text()) | {"_table": table}


def perf_getppid_ns(loops: int) -> float:
    out = sh(["perf", "bench", "syscall", "basic", "--loop", str(loops)])
    m = re.search(r"([\d.]+)\s+usecs/op", out)
    if not m:
        sys.exit(f"cannot read perf's output:\n{out}")
    return float(m.group(1)) * 1000.0


def agent_getppid_ns() -> float:
    """The mean of one fresh agent process's samples (the process is the unit)."""
    out = sh([AGENT, "run", "getppid", "--samples", "5", "--warmup", "1", "--min-time-ms", "20"])
    values = [json.loads(l)["value"] for l in out.splitlines()
              if '"sample"' in l and '"warmup":false' in l]
    return sum(values) / len(values)


def cross_check(rounds: int) -> dict:
    """perf and the agent, one of each per round in an order drawn by a coin:
    pairs, analysed as pairs by the sign-flip test (stats.compare_paired)."""
    perf, agent = [], []
    coin = random.Random(0)
    for _ in range(rounds):
        if coin.random() < 0.5:
            perf.append(perf_getppid_ns(1_000_000))
            agent.append(agent_getppid_ns())
        else:
            agent.append(agent_getppid_ns())
            perf.append(perf_getppid_ns(1_000_000))
    r, lo, hi, _ = stats.compare_paired(agent, perf)
    return {"perf": stats.summarize(perf), "agent": stats.summarize(agent),
            "ratio": r, "lo": lo, "hi": hi, "rounds": rounds}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-time", default="6m")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--reuse", action="store_true",
                    help="take sections 1-2 from the stored runs (vmtax show), measure only section 3")
    a = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("perf is missing: run `make setup`")
    OUT.mkdir(exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    full_args = ["--target", "local", "--precision", "1%", "--max-time", a.max_time]
    ctx = "ctx_2p_0k ctx_2p_16k ctx_2p_64k ctx_8p_16k ctx_8p_64k ctx_16p_16k ctx_16p_64k threadswitch".split()
    pin_args = ["--target", "local", "--bench", *ctx, "--cpu", "0", "--precision", "1%", "--max-time", "2m"]
    if a.reuse:
        full_cmd, full = reuse(full_args, "foundation-local.json")
        pin_cmd, pinned = reuse(pin_args, "foundation-ctx-pinned.json")
    else:
        full_cmd, full = vmtax_run(full_args, "foundation-local.json")
        pin_cmd, pinned = vmtax_run(pin_args, "foundation-ctx-pinned.json")
    xc = cross_check(a.rounds)

    res = full["results"]
    by = {}
    for r in res:
        by.setdefault(r["stopped_by"], []).append(r["benchmark"])
    n_prec = len(by.get("precision", []))
    env = full["environment"]
    unpinned = {r["benchmark"]: r for r in res}
    lines = [
        "# Foundation figures",
        "",
        f"Recorded {started} by `bench/foundation.py` on: {env.get('cpu_model')}, "
        f"{env.get('cpus_online')} CPUs, kernel {env.get('kernel')}, clocksource {env.get('clocksource')}, "
        f"hypervisor underneath: {env.get('hypervisor_vendor') or 'none'} "
        f"(systemd-detect-virt: {env.get('systemd_detect_virt')}). The machine is shared and noisy: "
        "absolute times move between runs; compare ratios taken side by side.",
        "",
        "## 1. The default suite, local, 1% precision, 6-minute budget",
        "",
        f"Command: `{full_cmd}` (run `{full['run_id']}`, JSON in `results/foundation-local.json`)",
        "",
        f"**{n_prec} of {len(res)} benchmarks stopped on precision** "
        f"({fmt_pct(n_prec / len(res), 0)}); "
        + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(by.items()) if k != "precision"),
        "",
        "```",
        full["_table"].strip(),
        "```",
        "",
        "## 2. Context switches, pinned to CPU 0 against unpinned",
        "",
        f"Command: `{pin_cmd}`; the unpinned figures are from run 1. Waking a task on the other "
        "vCPU is expensive on this host; the last column is unpinned/pinned.",
        "",
        "| benchmark | unpinned | pinned (CPU 0) | unpinned/pinned |",
        "|---|---|---|---|",
    ]
    for r in pinned["results"]:
        u = unpinned.get(r["benchmark"], {})
        fmt = lambda x: f"{x['mean']:.0f} ns ±{fmt_pct(x['ci_rel'], 1)} ({x['stopped_by']})" if x.get("mean") else "-"
        ratio = f"{u['mean'] / r['mean']:.2f}" if u.get("mean") and r.get("mean") else "-"
        lines.append(f"| {r['benchmark']} | {fmt(u)} | {fmt(r)} | {ratio} |")
    agree = abs(xc["ratio"] - 1) <= 0.03
    lines += [
        "",
        "## 3. getppid against `perf bench syscall basic`",
        "",
        f"Commands, interleaved {xc['rounds']} rounds in one session: "
        "`perf bench syscall basic --loop 1000000` and "
        "`agent/build/vmtax-agent run getppid --samples 5 --warmup 1 --min-time-ms 20`.",
        "",
        f"- perf bench: {xc['perf'].mean:.1f} ns/op ±{fmt_pct(xc['perf'].ci_rel)} (95% CI, n={xc['perf'].n})",
        f"- vmtax getppid: {xc['agent'].mean:.1f} ns/op ±{fmt_pct(xc['agent'].ci_rel)} (95% CI, "
        f"n={xc['agent'].n} processes of 5 samples)",
        f"- ratio vmtax/perf: **{xc['ratio']:.3f}** (95% CI {xc['lo']:.3f}–{xc['hi']:.3f}, Fieller over "
        "the rounds as pairs): "
        + ("agrees within 3%" if agree else "does NOT agree within 3%"),
        "",
    ]
    (OUT / "foundation.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
