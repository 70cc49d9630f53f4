"""Per row: autocorrelation of a process's log samples at lags of 1-20 rounds, and
the correlation of the two sides' samples in one round.  Usage: python acf.py DB RUN"""
import sqlite3, sys, statistics as st, math
from collections import defaultdict
db, run = sys.argv[1], sys.argv[2]
con = sqlite3.connect(db)
rows = con.execute("""SELECT benchmark, target, block, process, value, t, seq FROM samples
 WHERE run_id=? AND warmup=0 AND counting=0 AND block>=0 ORDER BY t""", (run,)).fetchall()
per = defaultdict(list)
for b, tg, bl, p, v, t, seq in rows: per[(b, bl, tg, p)].append(math.log(v))
def corr(x, y):
    mx, my = st.mean(x), st.mean(y)
    sx = math.sqrt(sum((a-mx)**2 for a in x)); sy = math.sqrt(sum((a-my)**2 for a in y))
    return sum((a-mx)*(b-my) for a, b in zip(x, y)) / (sx*sy) if sx and sy else 0
acc = defaultdict(lambda: defaultdict(list))
blocks = defaultdict(dict)
for (b, bl, tg, p), xs in per.items():
    if len(xs) < 30: continue
    blocks[(b, bl)][tg] = xs
    m = st.mean(xs); xs2 = [x - m for x in xs]
    for lag in (1, 2, 5, 10, 20):
        acc[b][lag].append(corr(xs2[:-lag], xs2[lag:]))
for b in sorted(acc):
    cross = []
    for (bb, bl), d in blocks.items():
        if bb != b or len(d) != 2: continue
        a, c = d.values(); n = min(len(a), len(c))
        cross.append(corr(a[:n], c[:n]))
    print(f"{b:10s} " + " ".join(f"lag{l} {st.median(v):+.2f}" for l, v in acc[b].items()) + f"  cross-side same round {st.median(cross):+.2f}")
