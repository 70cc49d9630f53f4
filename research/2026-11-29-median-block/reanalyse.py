"""Stored gate runs analysed both ways: the ratio of the blocks' means with
the sign-flip test (how a run without median_blocks is analysed) and the
median block with the signed-rank test (compare --median now).  A candidate
labelled aa is an A/A twin (a run where any of its rows reads regressed or
improved at the 1% gate is a false alarm); one labelled slow carries 2%
(its rows called regressed).  Two-sided runs (series.sh) and three-sided
ones (tools/gate_rates.py) alike; runs without --median are left out.
Usage: python reanalyse.py DB [DB ...]"""

import dataclasses
import statistics
import sys

from vmtax import watch
from vmtax.analysis import analyse
from vmtax.store import Store

tally: dict = {}
for db in sys.argv[1:]:
    with Store(db, readonly=True) as store:
        ids = [r["id"] for r in reversed(store.list_runs(limit=1000)) if r["status"] == "complete"]
        for run_id in ids:
            data = store.load(run_id)
            kinds = {t.name: ("aa" if "label=aa" in t.name else "slow") for t in data.targets[1:]}
            if not data.config.get("median") or not all(
                ("label=aa" in n) ^ ("label=slow" in n) for n in kinds
            ):
                continue
            base = data.targets[0].name
            line = [f"{run_id} {base:14.14s}"]
            for ranked in (False, True):
                d = dataclasses.replace(data, config={**data.config, "median_blocks": ranked})
                _, cs = analyse(d)
                rows = watch.gate(d, cs, 0.01).rows
                for cand, kind in kinds.items():
                    mine = [r for r in rows if r.candidate == cand]
                    half = statistics.median(100 * c.ci.rel_halfwidth for c in cs if c.candidate == cand)
                    called = sum(r.verdict == "regressed" for r in mine)
                    alarm = any(r.verdict in ("regressed", "improved") for r in mine)
                    key = (base.split(":")[0], kind, ranked)
                    t = tally.setdefault(key, {"runs": 0, "alarms": 0, "called": 0, "rows": 0, "half": []})
                    t["runs"] += 1
                    t["alarms"] += alarm
                    t["called"] += called
                    t["rows"] += len(mine)
                    t["half"].append(half)
                    said = f"alarm {alarm:d}" if kind == "aa" else f"called {called}/{len(mine)}"
                    line.append(f"{'median' if ranked else 'mean'} {kind} {said} ±{half:.2f}%")
            print("  ".join(line))
print()
for (base, kind, ranked), t in sorted(tally.items()):
    print(
        f"{base:6s} {kind:4s} {'median block' if ranked else 'mean':12s} runs {t['runs']:2d} "
        + (f"false alarms {t['alarms']}" if kind == "aa" else f"called {t['called']}/{t['rows']}")
        + f"  half-width median ±{statistics.median(t['half']):.2f}% (range {min(t['half']):.2f}-{max(t['half']):.2f})"
    )
