#!/usr/bin/env python3
"""Many copies at once: consolidation, overcommit and fairness (benchmark
script, not a test).

Seed 004's PI test in 1 to 17 guests and the getppid microbenchmark, plus
one workload (sysbench cpu), at N = 1, 2, 4, 8 and 17 copies of each kind
of target -- TCG guests, User-mode Linux, containers and native processes
-- on this 2-CPU host, each kind one run of:

    vmtax scale TARGET --instances 1,2,4,8,17 --bench pi getppid sysbench_cpu \\
        --round-time 2s --rounds 3 --max-rounds 5 --precision 5% --max-time 6m

(an N that does not fit in memory is left out, as vmtax would refuse it),
written with the commands into results/scale.md, each run's JSON beside it
(results/scale-KIND.json), with a reading of seed 004's question: is the
share fair under overcommit?

Usage: .venv/bin/python bench/scale.py [--only local|container|uml|qemu] [--max-time 6m]
       [--instances 1,2,4,8,17] [--reuse]
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"
KINDS = {"local": "local", "container": "container", "uml": "uml:mem=256M", "qemu": "qemu:accel=tcg,mem=256M"}
BENCHES = ["pi", "getppid", "sysbench_cpu"]


def fitting(target: str, ns: list[int]) -> tuple[list[int], str]:
    """The instance counts that fit in memory now (vmtax's own check)."""
    from vmtax.errors import UserError
    from vmtax.scale import check_memory
    from vmtax.targets import parse_target
    proto, kept, note = parse_target(target), [], ""
    for n in ns:
        try:
            check_memory(proto, n)
            kept.append(n)
        except UserError as e:
            note = f"left out: {e}"
    return kept, note


def run(kind: str, target: str, ns: list[int], max_time: str, reuse: bool) -> tuple[dict, str, str, str]:
    db, doc_path, text_path = f"/tmp/vmtax-scale-{kind}.db", OUT / f"scale-{kind}.json", OUT / f"scale-{kind}.txt"
    cmd = [VMTAX, "--db", db, "scale", target, "--instances", ",".join(map(str, ns)), "--bench", *BENCHES,
           "--round-time", "2s", "--rounds", "3", "--max-rounds", "5", "--precision", "5%",
           "--max-time", max_time, "--json", str(doc_path)]
    shown = " ".join(["vmtax", *cmd[3:-2]])
    took = ""
    if not reuse:
        print("$ " + " ".join(cmd), file=sys.stderr)
        t0 = time.time()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit(f"{kind} failed ({p.returncode}): {p.stderr[-2000:]}")
        text_path.write_text(p.stdout)
        took = f", {(time.time() - t0) / 60:.1f} min"
    docs = json.loads(doc_path.read_text())
    return {d["benchmark"]: d for d in docs}, text_path.read_text(), shown, took


def at(doc: dict, n: int) -> dict | None:
    return next((p for p in doc["instances"] if p["n"] == n), None)


def fairness_rows(results: dict[str, dict]) -> list[str]:
    """One row per kind and benchmark at its largest N: the share each copy got."""
    rows = ["| target | benchmark | N | vCPUs/host CPUs | Jain (95% CI) | mean difference from the mean copy "
            "| slowest / fastest copy | slowdown vs N=1 (ideal N/CPUs) | aggregate vs N=1 | host CPU |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, docs in results.items():
        for bench, doc in docs.items():
            top, one = doc["instances"][-1], at(doc, 1)
            j, s, st = top["jain"], top["slowdown"], top["per_instance_stats"]
            ideal = max(1.0, top["n"] / top["host_cpus"])
            agg = top["aggregate"]["value"] / one["aggregate"]["value"] if one else None
            cpu = top["host_cpu_pct"]
            each = [e["value"] for e in top["per_instance"]]
            dev = sum(abs(x - st["mean"]) for x in each) / len(each) / st["mean"]  # seed 004's "average difference"
            rows.append(
                f"| {doc['target']} | {bench} | {top['n']} | {top['vcpus']}/{top['host_cpus']} | "
                f"{j['value']:.3f} ({j['ci_low']:.3f}–{j['ci_high']:.3f}) | {dev:.1%} | {st['min'] / st['max']:.2f} | "
                + (f"{s['value']:.2f}x ({ideal:.1f}x)" if s else "-") + " | "
                + (f"{agg:.2f}x" if agg else "-") + " | "
                + (f"{cpu['value']:.0f}%" if cpu else "-") + " |")
    return rows


def reading(results: dict[str, dict]) -> list[str]:
    """What the figures say, computed from them."""
    from vmtax.stats import jain
    tops = [(kind, bench, doc["instances"][-1]) for kind, docs in results.items() for bench, doc in docs.items()]
    if not tops:
        return []
    cpus = tops[0][2]["host_cpus"]
    over = [t for t in tops if t[2]["vcpus"] > t[2]["host_cpus"]]
    fair = [t for t in over if t[2]["jain"]["value"] >= 0.98]
    unfair = [t for t in over if t[2]["jain"]["value"] < 0.98]
    worst = min(tops, key=lambda t: t[2]["jain"]["value"])
    spread = min(tops, key=lambda t: t[2]["per_instance_stats"]["min"] / t[2]["per_instance_stats"]["max"])
    one_slow = jain([0.5] + [1.0] * 16)
    out = [f"- Under overcommit ({len(over)} cases with more copies than the host's {cpus} CPUs, each at its "
           f"largest N), Jain's index is at least 0.98 in {len(fair)}"
           + (": by that measure the share is fair, as seed 004 found for 17 KVM guests on 8 cores (an "
              "average difference of about 5%)." if not unfair else
              "; below it: " + ", ".join(f"{b} in {k} at N={p['n']} ({p['jain']['value']:.3f})"
                                         for k, b, p in unfair) + "."),
           f"- The least fair: {worst[1]} in {worst[0]} at N={worst[2]['n']}, Jain "
           f"{worst[2]['jain']['value']:.3f}; the widest spread between the slowest and the fastest copy: "
           f"{spread[1]} in {spread[0]} at N={spread[2]['n']}, the slowest getting "
           f"{spread[2]['per_instance_stats']['min'] / spread[2]['per_instance_stats']['max']:.0%} of the "
           f"fastest's throughput.  Jain's index forgives a lot (one copy at half the speed of 16 others "
           f"still gives {one_slow:.3f}): the slowest/fastest ratio is the harsher figure."]
    for kind, docs in results.items():
        d = docs.get("pi")
        if d and at(d, 1) and d["instances"][-1]["n"] > 1:
            top = d["instances"][-1]
            eff = top["aggregate"]["value"] / at(d, 1)["aggregate"]["value"]
            out.append(f"- {d['target']}: {top['n']} copies of pi together do {eff:.2f}x the work of one alone "
                       f"(the host has {top['host_cpus']} CPUs, so at most {min(top['n'], top['host_cpus'])}x); "
                       f"each copy runs {top['slowdown']['value']:.1f}x slower than alone.")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-time", default="6m", help="per kind of target")
    ap.add_argument("--instances", default="1,2,4,8,17")
    ap.add_argument("--only", choices=sorted(KINDS))
    ap.add_argument("--reuse", action="store_true", help="re-render the stored runs only")
    args = ap.parse_args()
    asked = [int(x) for x in args.instances.split(",")]
    results, sections = {}, []
    t0 = time.time()
    for kind, target in KINDS.items():
        reuse = args.reuse or (args.only is not None and kind != args.only)
        if reuse and not (OUT / f"scale-{kind}.json").exists():
            continue
        ns, note = (asked, "") if reuse else fitting(target, asked)
        docs, text, shown, took = run(kind, target, ns, args.max_time, reuse)
        results[kind] = docs
        run_id = next(iter(docs.values()))["run_id"]
        sections += [f"## {target}", "", f"Run `{run_id}`{took}:", "", f"    {shown}", ""]
        sections += [note, ""] if note else []
        sections += ["```", text.rstrip(), "```", ""]
    lines = ["# Many copies at once: consolidation, overcommit and fairness", "",
             f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/scale.py` on "
             f"{platform.machine()} ({platform.node()}), {len(results)} kinds of target"
             + ("" if args.reuse else f", {(time.time() - t0) / 60:.0f} min in all") + ".  "
             "Each stage runs N copies of the target, every one released at once from a barrier over its "
             "channel (the agent set up, calibrated and waiting for its go line; sysbench held by "
             "vmtax-shell before it starts), for rounds of 2 s; the copies are unpinned (the host's "
             "scheduler places them on its 2 CPUs) and QEMU runs under TCG (this host's /dev/kvm does not "
             "boot a standard guest).  The host was not otherwise idle: other work shows in the host CPU "
             "column at N=1.", "",
             "## Is the share fair under overcommit? (seed 004)", "",
             "At each target's largest N, the share each copy got:", "",
             *fairness_rows(results), "", *reading(results), "", *sections]
    (OUT / "scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
