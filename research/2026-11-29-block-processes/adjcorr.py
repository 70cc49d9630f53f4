"""Do adjacent rows of one round share their offset (time-local) or not (per process)?
Correlation across blocks of the block log ratios of rows run one after the other."""
import sqlite3, sys, math, statistics as st, json
from collections import defaultdict
con = sqlite3.connect(sys.argv[1])
pairs = defaultdict(lambda: ([], []))
for (run,) in con.execute("select id from runs order by started"):
    cfg = json.loads(con.execute("select config_json from runs where id=?", (run,)).fetchone()[0])
    base, rows = cfg["targets"][0], cfg["benchmarks"]
    per = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for b, tg, bl, v in con.execute("select benchmark,target,block,value from samples where run_id=? and warmup=0 and counting=0 and block>=0", (run,)):
        per[bl][b][tg].append(v)
    lr = defaultdict(dict)
    for bl, bs in per.items():
        for b, sides in bs.items():
            if len(sides) == 2:
                o = [t for t in sides if t != base][0]
                lr[b][bl] = math.log(st.median(sides[o]) / st.median(sides[base]))
    for b in lr:  # centre per run
        m = st.median(lr[b].values()); lr[b] = {k: v - m for k, v in lr[b].items()}
    for i in range(len(rows) - 1):
        a, c = rows[i], rows[i + 1]
        for bl in set(lr[a]) & set(lr[c]):
            pairs[f"{a}->{c}"][0].append(lr[a][bl]); pairs[f"{a}->{c}"][1].append(lr[c][bl])
    # and rows two apart, a control
for k, (x, y) in pairs.items():
    r = st.correlation(x, y)
    # rank correlation
    def rk(v):
        s = sorted(range(len(v)), key=v.__getitem__); o = [0]*len(v)
        for i, j in enumerate(s): o[j] = i
        return o
    print(f"{k:24s} n{len(x)} r {r:+.2f} rank r {st.correlation(rk(x), rk(y)):+.2f}")
