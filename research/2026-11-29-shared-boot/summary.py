"""What a series.sh directory says: per run its gate's verdict, the rows it
called, each row's ratio and 95% interval; then the A/A false alarms, the
injected rows called and the A/A median half-width.
Usage: python summary.py OUTDIR"""

import glob
import json
import statistics
import sys

out = sys.argv[1]
alarms = passes = aa_runs = called = inj_rows = 0
widths = []
for path in sorted(glob.glob(f"{out}/*.json"), key=lambda p: (p.split("-")[-1], p)):
    with open(path) as f:
        d = json.load(f)
    g = d["gate"]
    boots = sorted({t["facts"].get("boots") for t in d["targets"]})
    rows = g["rows"]
    half = [100 * (r["ci_high"] / r["ci_low"] - 1) / 2 for r in rows]
    print(f"{path.rsplit('/', 1)[-1]}: {d['run_id']} gate {g['verdict']}, boots {boots}, median half-width "
          f"±{statistics.median(half):.2f}%")
    for r in rows:
        print(f"   {r['benchmark']:11s} {r['ratio']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}] {r['verdict']}")
    if "label=aa" in rows[0]["candidate"]:
        aa_runs += 1
        alarms += g["verdict"] in ("regressed", "improved")
        passes += g["verdict"] == "pass"
        widths.append(statistics.median(half))
    else:
        inj_rows += len(rows)
        called += sum(r["verdict"] == "regressed" for r in rows)
print(f"A/A: {alarms} false alarms in {aa_runs} runs, {passes} passed; median half-widths "
      f"{', '.join(f'±{w:.2f}%' for w in widths)}")
print(f"2% injected: {called} of {inj_rows} rows called regressed")
