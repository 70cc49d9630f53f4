"""Per row of a two-sided lockstep run: pairs a block, a pair's log-ratio SD, the
spread a block's median would have from its pairs alone (pair SD / sqrt n), and the
blocks' actual spread.  Usage: python pairs.py DB RUN"""
import sqlite3, sys, statistics as st, math
from collections import defaultdict
db, run = sys.argv[1], sys.argv[2]
con = sqlite3.connect(db)
rows = con.execute("""SELECT benchmark, target, block, process, value, t, iters FROM samples
 WHERE run_id=? AND warmup=0 AND counting=0 AND block>=0 ORDER BY t""", (run,)).fetchall()
# per (bench, block): main process per target (most samples)
per = defaultdict(lambda: defaultdict(list))
for b, tg, bl, p, v, t, it in rows: per[(b, bl)][(tg, p)].append((t, v))
res = defaultdict(list)
for (b, bl), procs in per.items():
    bytg = {}
    for (tg, p), xs in procs.items():
        if tg not in bytg or len(xs) > len(bytg[tg]): bytg[tg] = xs
    if len(bytg) != 2: continue
    a, c = list(bytg.values())
    n = min(len(a), len(c))
    if n < 5: continue
    lr = [math.log(c[i][1] / a[i][1]) for i in range(n)]
    res[b].append((st.median(lr), st.stdev(lr), n, math.log(st.median([x[1] for x in c]) / st.median([x[1] for x in a]))))
for b, xs in sorted(res.items()):
    med = [x[0] for x in xs]; rom = [x[3] for x in xs]
    within = st.median([x[1] / math.sqrt(x[2]) for x in xs])
    print(f"{b:10s} blocks {len(xs):3d} n/blk {st.median([x[2] for x in xs]):5.0f} pairSD {100*st.median([x[1] for x in xs]):5.1f}%  "
          f"within-est {100*within:4.1f}%  between-blocks SD(median pair lr) {100*st.stdev(med):4.1f}%  SD(ratio of medians) {100*st.stdev(rom):4.1f}%  hw~{200*st.stdev(rom)/math.sqrt(len(xs)):.2f}%")
