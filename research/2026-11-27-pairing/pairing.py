#!/usr/bin/env python3
"""How a baseline's samples are paired with a candidate's, side by side, at
one budget (a benchmark script, not a test): lockstep pairs, today's blocks,
and no pairing at all.

Each round runs, in an order rotated round by round so that the host's
drift falls on every way alike:

  lockstep  vmtax compare local local:label=aa local:inject=2,label=slow2
            local:inject=3,label=slow3 --pairing lockstep --max-time T
  blocks    the same with --pairing blocks (one process after another)
  unpaired  vmtax run --target X --max-time T/4 for each of the four, one
            after the other, as pyperf's compare_to and hyperfine compare
            two commands run apart: each row's ratio of means with a Welch
            interval over the process means (stats.ratio_unpaired)

`aa` is the machine against itself (every row flagged is a false alarm),
`slow2` and `slow3` the agent adding 2% and 3% of each operation's own time
(every row should be flagged, above 1).  Before the rounds, `vmtax doctor`
says the host's noise in the same hour (its noise by distance included).
Writes results/NAME.md and results/NAME.json: per way, the A/A rows flagged,
the 2% and 3% rows found, and the median 95% interval, with every command.

Usage: .venv/bin/python research/2026-11-27-pairing/pairing.py [--rounds 3] [--max-time 5m]
       [--bench NAME ...] [--cpu N] [--out pairing] [--reuse]
(--reuse: analyse the runs already stored in results/NAME.db again)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from vmtax import stats  # noqa: E402
from vmtax.analysis import analyse  # noqa: E402
from vmtax.report.units import parse_duration  # noqa: E402
from vmtax.store import Store  # noqa: E402

VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
TARGETS = ["local", "local:label=aa", "local:inject=2,label=slow2", "local:inject=3,label=slow3"]
KNOWN = {"local:label=aa": 1.0, "local:inject=2,label=slow2": 1.02, "local:inject=3,label=slow3": 1.03}
WAYS = ("lockstep", "blocks", "unpaired")


def run(cmd: list[str]) -> str:
    """Run one vmtax command; its run id (the last `run ID` it printed)."""
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        sys.exit(f"pairing: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
    ids = [w for line in p.stdout.splitlines() for w in line.split()[1:2] if line.startswith("run ")]
    if not ids:
        sys.exit(f"pairing: no run id in the output of {' '.join(cmd)}")
    return ids[-1]


def one_round(args, db: Path, way: str) -> dict:
    common = ["--max-time", args.max_time, "--cpu", str(args.cpu)] + (["--bench", *args.bench] if args.bench else [])
    if way != "unpaired":
        cmd = [VMTAX, "--db", str(db), "compare", *TARGETS, "--pairing", way, *common]
        return {"way": way, "commands": [" ".join(cmd[3:])], "runs": [run(cmd)]}
    share = f"{parse_duration(args.max_time) / len(TARGETS):.0f}s"
    cmds = [[VMTAX, "--db", str(db), "run", "--target", t, *common] for t in TARGETS]
    for c in cmds:
        c[c.index("--max-time") + 1] = share
    return {"way": way, "commands": [" ".join(c[3:]) for c in cmds], "runs": [run(c) for c in cmds]}


def process_means(data) -> dict[str, list[float]]:
    """benchmark -> each timed process's mean (the unit an unpaired comparison has)."""
    acc: dict[tuple[str, int], list[float]] = {}
    for s in data.samples:
        if not s.warmup and not s.counting:
            acc.setdefault((s.benchmark, s.process), []).append(s.value)
    out: dict[str, list[float]] = {}
    for (bench, _), vs in acc.items():
        out.setdefault(bench, []).append(statistics.fmean(vs))
    return out


def comparisons(store: Store, rnd: dict) -> list[dict]:
    """Every candidate row of one round's way: (candidate, benchmark, ratio, low, high)."""
    if rnd["way"] != "unpaired":
        _, compared = analyse(store.load(rnd["runs"][0]))
        return [
            {
                "candidate": c.candidate,
                "benchmark": c.benchmark.name,
                "ratio": c.ratio,
                "low": c.ratio_ci_low,
                "high": c.ratio_ci_high,
                "significant": c.significant,
            }
            for c in compared
        ]
    per = [process_means(store.load(r)) for r in rnd["runs"]]
    out = []
    for target, means in zip(TARGETS[1:], per[1:], strict=True):
        for bench, cand in means.items():
            base = per[0].get(bench)
            if base:
                r, lo, hi = stats.ratio_unpaired(cand, base)
                out.append(
                    {
                        "candidate": target,
                        "benchmark": bench,
                        "ratio": r,
                        "low": lo,
                        "high": hi,
                        "significant": lo > 1 or hi < 1,
                    }
                )
    return out


def summary(rows: list[dict]) -> dict:
    """Per candidate: rows, flagged (the row's test at 5%: vmtax's sign-flip test over blocks, or
    the unpaired interval excluding 1), found (flagged above 1), the median 95% half-width (percent
    of the ratio)."""
    out = {}
    for cand, truth in KNOWN.items():
        mine = [r for r in rows if r["candidate"] == cand]
        flagged = [r for r in mine if r["significant"]]
        found = [r for r in flagged if r["ratio"] > 1] if truth > 1 else flagged
        halves = [stats.ratio_ci_rel(r["ratio"], r["low"], r["high"]) * 100 for r in mine]
        finite = [h for h in halves if math.isfinite(h)]
        out[cand] = {
            "rows": len(mine),
            "flagged": len(flagged),
            "found": len(found),
            "median_halfwidth_pct": statistics.median(finite) if finite else None,
            "within_1pct": sum(h <= 1.0 for h in finite),
        }
    return out


def report(args, doc: dict) -> str:
    lines = [
        f"# Pairing: lockstep, blocks, unpaired ({len(doc['rounds']) // len(WAYS)} rounds)",
        "",
        f"Command: `.venv/bin/python research/2026-11-27-pairing/pairing.py {' '.join(sys.argv[1:])}` "
        f"(started {doc['started']}, host {doc['host']}).",
        "",
        "The host's noise in the same hour (`vmtax doctor --cpu N --json`): "
        f"between-process SD {doc['doctor'].get('cv', float('nan')):.1%}; noise by distance "
        + ", ".join(f"{c['ms']:g} ms {c['sd_pct']:.1f}%" for c in doc["doctor"].get("noise_by_distance", []))
        + ".",
        "",
        "| way | A/A rows flagged | 2% found | 3% found | median ±CI (aa / 2% / 3%) | within ±1% |",
        "|---|---|---|---|---|---|",
    ]
    for way in WAYS:
        rows = [r for rnd in doc["rounds"] if rnd["way"] == way for r in rnd["comparisons"]]
        s = summary(rows)
        aa, s2, s3 = (s[c] for c in KNOWN)
        med = " / ".join(
            f"±{v['median_halfwidth_pct']:.2f}%" if v["median_halfwidth_pct"] is not None else "-" for v in (aa, s2, s3)
        )
        within = sum(v["within_1pct"] for v in (aa, s2, s3))
        total = sum(v["rows"] for v in (aa, s2, s3))
        lines.append(
            f"| {way} | {aa['flagged']} of {aa['rows']} | {s2['found']} of {s2['rows']} | "
            f"{s3['found']} of {s3['rows']} | {med} | {within} of {total} |"
        )
    lines += ["", "Each round's commands (run ids in results/" + args.out + ".json):", ""]
    for rnd in doc["rounds"]:
        lines.append(
            f"- {rnd['way']}: " + "; ".join(f"`vmtax {c}`" for c in rnd["commands"]) + f" ({', '.join(rnd['runs'])})"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-time", default="5m")
    ap.add_argument("--bench", nargs="+")
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--out", default="pairing")
    ap.add_argument("--reuse", action="store_true")
    args = ap.parse_args()
    out = REPO / "results"
    db, js = out / f"{args.out}.db", out / f"{args.out}.json"
    if args.reuse:
        doc = json.loads(js.read_text())
    else:
        d = subprocess.run([VMTAX, "doctor", "--cpu", str(args.cpu), "--json", "-"], capture_output=True, text=True)
        doc = {
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "host": subprocess.run(["uname", "-n"], capture_output=True, text=True).stdout.strip(),
            "doctor": json.loads(d.stdout) if d.returncode == 0 else {},
            "rounds": [],
        }
        for n in range(args.rounds):
            for k in range(len(WAYS)):
                way = WAYS[(n + k) % len(WAYS)]
                doc["rounds"].append(one_round(args, db, way))
                js.write_text(json.dumps(doc, indent=1))  # what is done so far is kept
    with Store(db) as store:
        for rnd in doc["rounds"]:
            rnd["comparisons"] = comparisons(store, rnd)
    js.write_text(json.dumps(doc, indent=1))
    (out / f"{args.out}.md").write_text(report(args, doc))
    print(report(args, doc))


if __name__ == "__main__":
    main()
