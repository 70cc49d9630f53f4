"""Per row of an A/A compare: the mean and SD of a block's log ratio
(candidate over baseline, each side at its median sample), blocks after the
first; and the means of the first and second halves of them.

    python blocks.py DB RUN_ID [BASELINE CANDIDATE]   (default qemu, qemu:label=aa)
"""
import math
import sqlite3
import statistics as st
import sys

db, rid = sys.argv[1], sys.argv[2]
base, cand = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else ("qemu", "qemu:label=aa")
rows = sqlite3.connect(db).execute(
    "SELECT benchmark, target, block, value FROM samples WHERE run_id=? AND warmup=0 AND counting=0", (rid,)
)
by: dict = {}
for bench, target, block, value in rows:
    by.setdefault((bench, block), {}).setdefault(target, []).append(value)
logs: dict = {}
for (bench, block), sides in sorted(by.items()):
    if block > 0 and base in sides and cand in sides:
        logs.setdefault(bench, []).append(math.log(st.median(sides[cand]) / st.median(sides[base])))
for bench, v in sorted(logs.items()):
    h = len(v) // 2
    print(
        f"{bench:12s} blocks {len(v):4d}  mean {100 * st.mean(v):+6.2f}%  sd {100 * st.stdev(v):5.2f}%"
        f"  halves {100 * st.mean(v[:h]):+6.2f}% {100 * st.mean(v[h:]):+6.2f}%"
    )
