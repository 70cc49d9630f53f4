import sqlite3, sys, statistics as st, math
from collections import defaultdict
db, run = sys.argv[1], sys.argv[2]
con = sqlite3.connect(db)
rows = con.execute("""SELECT benchmark, target, block, process, value, t, iters FROM samples
 WHERE run_id=? AND warmup=0 AND counting=0 AND block>=0 ORDER BY t""", (run,)).fetchall()
per = defaultdict(list)
for b, tg, bl, p, v, t, it in rows: per[(b, tg, bl)].append((v, t, it))
for b in ["getppid", "null_read", "pi", "page_fault"]:
    ns, wsd, its, dur = [], [], [], []
    for (bb, tg, bl), xs in per.items():
        if bb != b: continue
        vs = [x[0] for x in xs]
        ns.append(len(vs)); its.append(xs[0][2]); dur.append(xs[-1][1]-xs[0][1])
        if len(vs) > 2: wsd.append(st.stdev([math.log(v) for v in vs]))
    # within-block pair: log ratio of consecutive lockstep samples between base and aa
    print(f"{b:10s} samples/process {st.median(ns)}  iters {st.median(its)}  process span {st.median(dur)*1000:.0f} ms  within-process SD {100*st.median(wsd):.1f}%")
