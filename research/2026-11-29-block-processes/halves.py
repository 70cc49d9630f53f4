"""Per row: a block's log ratio (medians) split into its process-pair's halves: the variance
shared by the halves (the processes' offsets) and the rest (within).  Usage: halves.py DB"""
import sqlite3, sys, math, statistics as st, json
from collections import defaultdict
db = sys.argv[1]; con = sqlite3.connect(db)
acc = defaultdict(lambda: [[], []])
for (run,) in con.execute("select id from runs order by started"):
    base = json.loads(con.execute("select config_json from runs where id=?", (run,)).fetchone()[0])["targets"][0]
    per = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for b, tg, bl, t, v in con.execute("""select benchmark, target, block, t, value from samples where run_id=? and warmup=0
        and counting=0 and block>=0 order by t""", (run,)):
        per[b][bl][tg].append(v)
    for b in per:
        for bl, sides in per[b].items():
            if len(sides) != 2: continue
            o = [t for t in sides if t != base][0]
            a, c = sides[base], sides[o]; n = min(len(a), len(c)); h = n // 2
            if h < 2: continue
            acc[b][0].append(math.log(st.median(c[:h]) / st.median(a[:h])))
            acc[b][1].append(math.log(st.median(c[h:n]) / st.median(a[h:n])))
for b, (x, y) in sorted(acc.items()):
    # per-run centring is skipped: A/A and injected runs mixed would shift; use the within-run-free estimate
    cov = st.covariance(x, y); vd = st.variance([p - q for p, q in zip(x, y)])
    full = st.variance([(p + q) / 2 for p, q in zip(x, y)])
    # robust: MAD-based variances of the sum and difference
    def mad2(v):
        m = st.median(v); return (1.4826 * st.median(abs(u - m) for u in v)) ** 2
    s, d = [p + q for p, q in zip(x, y)], [p - q for p, q in zip(x, y)]
    rproc = (mad2(s) - mad2(d)) / 4; rwithin = mad2(d) / 4
    print(f"{b:11s} n{len(x):4d} block SD {100*math.sqrt(full):4.1f}%  process-level SD {100*math.sqrt(max(cov,0)):4.1f}%  "
          f"within SD {100*math.sqrt(vd/4):4.1f}%  | robust: process {100*math.sqrt(max(rproc,0)):4.1f}% within {100*math.sqrt(rwithin):4.1f}%")
