import sqlite3, sys, statistics as st, math
db, run = sys.argv[1], sys.argv[2]
con = sqlite3.connect(db)
rows = con.execute("""SELECT benchmark, target, block, process, value FROM samples
 WHERE run_id=? AND warmup=0 AND counting=0 AND block>=0""", (run,)).fetchall()
from collections import defaultdict
per = defaultdict(list)
for b, t, bl, p, v in rows: per[(b, t, bl)].append(v)
med = {k: st.median(v) for k, v in per.items()}
benches = sorted({k[0] for k in med}); targets = sorted({k[1] for k in med})
base = "qemu"
for b in benches:
    out = []
    for t in targets:
        if t == base: continue
        lr = [math.log(med[(b, t, bl)] / med[(b, base, bl)]) for (bb, tt, bl) in med if bb == b and tt == t and (b, base, bl) in med]
        out.append(f"{t[:10]}: n={len(lr)} mean={100*st.mean(lr):+.2f}% sd={100*st.stdev(lr):.1f}%")
    print(f"{b:11s}", " | ".join(out))
