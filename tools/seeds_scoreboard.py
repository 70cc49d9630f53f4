#!/usr/bin/env python3
"""The seeds' comparison in one table: bare Linux against binary translation,
paravirtualization and hardware assist, on the same rows, each column's
ratio to bare Linux on the machine it ran on, and beside it what the
hypervisor was entered for per operation (VM exits by reason under KVM,
hypercalls and PV bounces under Xen, host context switches and system calls
for UML): seed 000's table and seed 004's comparison.

Each column is a target of a stored run's `--json` document, against a
baseline target of the same run (a paired ratio, its interval from the
run) or of another run on the same machine (`@FILE:TARGET`: an unpaired
ratio of the two means, its interval by the delta method; the Xen rig's
domUs against the bare boot of the same emulated machine).

Usage: .venv/bin/python tools/seeds_scoreboard.py --out results/xen.md \\
         --column "TCG (binary translation)=host.json:qemu" \\
         --column "Xen PV domU=xen.json:xen:type=pv@bare.json:local" ...
A column is LABEL=FILE:TARGET[@BASEFILE:BASETARGET]; without @, the run's
own baseline; FILE may be several runs' documents joined by + (one machine's
rows split over runs).  Rows: every benchmark the columns share (--bench to choose).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

Z95 = 1.959964


@dataclass
class Column:
    label: str
    doc: dict
    target: str
    base_doc: dict | None
    base_target: str | None
    source: str
    same_run: bool = False  # the base is another target of the same run


def parse_column(text: str) -> Column:
    label, eq, rest = text.partition("=")
    if not eq:
        raise SystemExit(f"seeds_scoreboard: --column {text!r}: want LABEL=FILE:TARGET[@BASEFILE:BASETARGET]")
    side, _, base = rest.partition("@")

    def load(spec: str) -> tuple[dict, str, str]:
        path, colon, target = spec.partition(":")
        if not colon:
            raise SystemExit(f"seeds_scoreboard: {spec!r}: want FILE:TARGET")
        doc: dict = {"results": [], "comparisons": []}
        for one in path.split("+"):  # runs of one machine whose rows were split (FILE+FILE)
            try:
                got = json.loads(Path(one).read_text())
            except (OSError, ValueError) as e:
                raise SystemExit(f"seeds_scoreboard: {one}: {e}") from None
            doc["results"] += got.get("results", [])
            doc["comparisons"] += got.get("comparisons", [])
        return doc, target, path

    doc, target, path = load(side)
    bdoc, btarget, bpath = load(base) if base else (None, None, "")
    source = f"{path}:{target}" + (f" over {bpath}:{btarget}" if base else "")
    return Column(label, doc, target, bdoc, btarget, source, same_run=bool(base) and bpath == path)


def result(doc: dict, target: str, bench: str) -> dict | None:
    return next((r for r in doc.get("results", []) if r["target"] == target and r["benchmark"] == bench), None)


def ratio(col: Column, bench: str) -> tuple[float, float, float] | None:
    """(ratio, low, high) to the column's bare side."""
    if col.base_doc is None:
        c = next(
            (
                c
                for c in col.doc.get("comparisons", [])
                if c["candidate"] == col.target and c["benchmark"] == bench and c.get("ratio")
            ),
            None,
        )
        return (c["ratio"], c["ratio_ci_low"], c["ratio_ci_high"]) if c else None
    if col.same_run:  # the run compared them the other way round: its paired ratio, inverted
        c = next(
            (
                c
                for c in col.doc.get("comparisons", [])
                if c["baseline"] == col.target and c["candidate"] == col.base_target and c["benchmark"] == bench
            ),
            None,
        )
        if c and c.get("ratio") and c.get("ratio_ci_low") and c.get("ratio_ci_high"):
            return 1 / c["ratio"], 1 / c["ratio_ci_high"], 1 / c["ratio_ci_low"]
    a, b = result(col.doc, col.target, bench), result(col.base_doc, col.base_target or "", bench)
    if not a or not b or not a.get("mean") or not b.get("mean"):
        return None
    r = a["mean"] / b["mean"]
    rel = [(x["ci_high"] - x["ci_low"]) / 2 / Z95 / x["mean"] for x in (a, b) if x.get("ci_high") is not None]
    s = math.sqrt(sum(v * v for v in rel))  # the log ratio's standard error, unpaired
    return r, r * math.exp(-Z95 * s), r * math.exp(Z95 * s)


def events(doc: dict, target: str, bench: str) -> str:
    """What the hypervisor was entered for per op: VM exits and hypercalls
    with their largest kinds, Xen's PV bounces, else the host round trips."""
    r = result(doc, target, bench)
    if not r:
        return ""
    m = {k: v["mean"] for k, v in r.get("metrics", {}).items() if isinstance(v.get("mean"), (int, float))}
    parts = []
    for family, label in (("exits", "exits"), ("hypercalls", "hypercalls")):
        kinds = sorted(
            ((k, v) for k, v in m.items() if k.startswith(family + "_") and k != "exits_userspace"),
            key=lambda kv: -kv[1],
        )
        top = ", ".join(
            f"{k[len(family) + 1 :].replace('mc_', 'in multicalls: ')} {v:.3g}" for k, v in kinds[:2] if v >= 0.05
        )
        if m.get(family, 0.0) >= 0.005:
            parts.append(f"{label} {m[family]:.3g}" + (f" ({top})" if top else ""))
    for key, name in (("xen_pf_bounces", "#PF bounces"), ("xen_ptwr_emulations", "PTE writes emulated")):
        if m.get(key, 0.0) >= 0.05:
            parts.append(f"{name} {m[key]:.3g}")
    if not parts and m.get("host_context_switches", 0.0) >= 0.05:
        parts.append(f"host ctx switches {m['host_context_switches']:.3g}, syscalls {m.get('host_syscalls', 0.0):.3g}")
    return "; ".join(parts)


def table(cols: list[Column], benches: list[str]) -> str:
    lines = ["| row | " + " | ".join(c.label for c in cols) + " |", "|---|" + "---|" * len(cols)]
    for bench in benches:
        cells = []
        for c in cols:
            rr = ratio(c, bench)
            ev = events(c.doc, c.target, bench)
            cell = f"**{rr[0]:.3g}×** [{rr[1]:.3g}, {rr[2]:.3g}]" if rr else "-"
            cells.append(cell + (f"<br>{ev}" if ev else ""))
        lines.append(f"| {bench} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--column", action="append", required=True, help="LABEL=FILE:TARGET[@BASEFILE:BASETARGET]")
    p.add_argument("--bench", nargs="+", help="rows (default: every benchmark the columns share)")
    p.add_argument("--out", help="write the Markdown table here (default: print it)")
    args = p.parse_args()
    cols = [parse_column(c) for c in args.column]
    shared = None
    for c in cols:
        have = {r["benchmark"] for r in c.doc.get("results", []) if r["target"] == c.target}
        shared = have if shared is None else shared & have
    benches = args.bench or sorted(shared or ())
    md = table(cols, benches)
    md += "\n\nColumns: " + "; ".join(f"{c.label}: `{c.source}`" for c in cols) + "\n"
    if args.out:
        Path(args.out).write_text(md)
    else:
        sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
