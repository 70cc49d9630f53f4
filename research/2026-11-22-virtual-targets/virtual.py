#!/usr/bin/env python3
"""Benchmark script for the virtual targets (not a test): records, on this
machine, in one session,

1. boot time (launch to agent ready), idle host CPU and host memory
   overhead of every target kind that works here, 3 boots each;
2. the full default suite compared: local against qemu (TCG where KVM does
   not boot) and uml where it runs, at 1% precision, and the share of ratios
   that reached it;
3. an A/A comparison of local against local, and how many rows it flagged.

Writes results/virtual.md and the JSON documents beside it.
Usage: .venv/bin/python bench/virtual.py [--max-time 8m] [--aa-time 5m]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from vmtax import stats  # noqa: E402
from vmtax.errors import TargetError  # noqa: E402
from vmtax.targets import parse_target  # noqa: E402
from vmtax.targets.uml import UmlTarget  # noqa: E402

VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"
BOOT_TARGETS = ["qemu", "qemu:accel=tcg,machine=microvm", "uml", "container:engine=podman",
                "container:engine=unshare"]


def boots(spec: str, n: int = 3) -> dict:
    rows = []
    for _ in range(n):
        t = parse_target(spec)
        try:
            with t:
                i = t.info()
                rows.append((i.boot_s, i.idle_cpu_pct, i.mem_overhead_mb, i.accel))
        except TargetError as e:
            return {"spec": spec, "error": str(e)}
    return {"spec": spec, "boot": stats.summarize([r[0] for r in rows]),
            "idle": [r[1] for r in rows], "mem": [r[2] for r in rows], "accel": rows[0][3]}


def compare(args: list[str], name: str) -> tuple[str, dict, str]:
    path = OUT / name
    cmd = [VMTAX, "compare", *args, "--json", str(path)]
    print("$ " + " ".join(cmd), file=sys.stderr)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        sys.exit(f"failed ({p.returncode}): {p.stderr}")
    return "vmtax compare " + " ".join(args), json.loads(path.read_text()), p.stdout


def fmt_boot(b: dict) -> str:
    if "error" in b:
        return f"| `{b['spec']}` | does not work here: {b['error']} | | | |"
    s = b["boot"]
    idle = "-" if b["idle"][0] is None else f"{sum(b['idle']) / len(b['idle']):.1f}%"
    mem = "-" if b["mem"][0] is None else f"{sum(b['mem']) / len(b['mem']):.0f} MiB"
    return (f"| `{b['spec']}` | {s.mean:.2f} s ±{s.ci_halfwidth:.2f} (n={s.n}) | {b['accel']} | "
            f"{idle} | {mem} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-time", default="8m")
    ap.add_argument("--aa-time", default="5m")
    a = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    boot_rows = [boots(s) for s in BOOT_TARGETS]

    cands = ["qemu"] + (["uml"] if UmlTarget.available()[0] else [])
    full_cmd, full, full_out = compare(["local", *cands, "--precision", "1%", "--max-time", a.max_time],
                                       "virtual-compare.json")
    aa_cmd, aa, aa_out = compare(["local", "local:label=b", "--precision", "1%", "--max-time", a.aa_time],
                                 "virtual-aa.json")

    cs = full["comparisons"]
    reached = sum(c["stopped_by"] == "precision" for c in cs)
    aacs = aa["comparisons"]
    flagged = [c["benchmark"] for c in aacs if c["significant"]]
    env = full["environment"]
    lines = [
        "# Virtual targets: figures",
        "",
        f"Recorded {started} by `bench/virtual.py` on {env.get('cpu_model')}, {env.get('cpus_online')} "
        f"CPUs, host kernel {env.get('kernel')}, itself under {env.get('hypervisor_vendor')}. "
        "KVM does not boot a standard kernel here (PVM host), so `qemu` runs under TCG.",
        "",
        "## 1. Boot time, idle CPU, memory overhead (3 boots each)",
        "",
        "Boot = launch to agent ready; idle CPU = host CPU of the target's processes over 2 s "
        "after boot, % of one CPU; memory overhead = hypervisor RSS beyond the guest-RAM mapping.",
        "",
        "| target | boot (mean ±95% CI) | accel / engine | idle CPU | mem overhead |",
        "|---|---|---|---|---|",
        *[fmt_boot(b) for b in boot_rows],
        "",
        "## 2. The default suite: local against " + ", ".join(cands),
        "",
        f"Command: `{full_cmd}` (run `{full['run_id']}`, JSON in `results/virtual-compare.json`)",
        "",
        f"**{reached} of {len(cs)} ratios reached 1% precision** "
        f"({100 * reached / max(1, len(cs)):.0f}%); the others stopped on the budget.",
        "",
        "```",
        full_out.strip(),
        "```",
        "",
        "## 3. A/A: local against local",
        "",
        f"Command: `{aa_cmd}` (run `{aa['run_id']}`)",
        "",
        f"**{len(flagged)} of {len(aacs)} rows flagged** as outside the noise at α = 0.05 "
        f"(expected by chance: about {0.05 * len(aacs):.1f})"
        + (f": {', '.join(flagged)}" if flagged else "") + ".",
        "",
        "```",
        aa_out.strip(),
        "```",
        "",
    ]
    (OUT / "virtual.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
