"""One row's blocks: pairs, the median log ratio of its pairs (and of each half), each
side's median sample.  Usage: python blocks.py DB RUN ROW"""
import sqlite3, sys, statistics as st, math
from collections import defaultdict
db, run, bench = sys.argv[1], sys.argv[2], sys.argv[3]
con = sqlite3.connect(db)
rows = con.execute("""SELECT target, block, process, value, t FROM samples
 WHERE run_id=? AND benchmark=? AND warmup=0 AND counting=0 AND block>=0 ORDER BY t""", (run, bench)).fetchall()
per = defaultdict(lambda: defaultdict(list))
for tg, bl, p, v, t in rows: per[bl][(tg, p)].append((t, v))
for bl in sorted(per):
    procs = per[bl]
    byt = {}
    for (tg, p), xs in procs.items():
        if tg not in byt or len(xs) > len(byt[tg][1]): byt[tg] = (p, xs)
    if len(byt) != 2: continue
    (ta, (pa, a)), (tc, (pc, c)) = sorted(byt.items())
    n = min(len(a), len(c))
    lr = [math.log(c[i][1] / a[i][1]) for i in range(n)]
    h = n // 2
    print(f"blk {bl:3d} n {n:4d} median lr {100*st.median(lr):+6.2f}%  1st half {100*st.median(lr[:h]):+6.2f}% 2nd half {100*st.median(lr[h:]):+6.2f}%  med a {st.median(x[1] for x in a):8.1f} c {st.median(x[1] for x in c):8.1f}")
