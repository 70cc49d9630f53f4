"""Per run and row: the blocks' log ratios (each side's median sample), their SD and MAD-SD.
Usage: python blocksd.py DB..."""
import sqlite3, sys, math, statistics as st
from collections import defaultdict
for db in sys.argv[1:]:
    con = sqlite3.connect(db)
    for (run,) in con.execute("select id from runs order by started"):
        cfg = con.execute("select config_json from runs where id=?", (run,)).fetchone()[0]
        import json; base = json.loads(cfg)["targets"][0]
        per = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        for b, tg, bl, v in con.execute("""select benchmark, target, block, value from samples where run_id=? and warmup=0
            and counting=0 and block>=0""", (run,)):
            per[b][bl][tg].append(v)
        out = []
        for b in sorted(per):
            lr = []
            for bl, sides in per[b].items():
                if len(sides) != 2: continue
                other = [t for t in sides if t != base][0]
                lr.append(math.log(st.median(sides[other]) / st.median(sides[base])))
            if len(lr) < 3: continue
            m = st.median(lr)
            out.append(f"{b} n{len(lr)} SD {100*st.stdev(lr):.1f}% MAD {100*1.4826*st.median(abs(x-m) for x in lr):.1f}%")
        print(db.split('/')[-1], run, " | ".join(out))
