"""--block-processes K: do a block's K process pairs share an offset?  Per row: the pairs' log
ratios (each side's median sample), their SD within a block, the blocks' means' SD, and what
the pairs' own spread predicts for a mean of K if they were independent.  Usage: sub.py DB..."""
import sqlite3, sys, math, statistics as st, json
from collections import defaultdict
for db in sys.argv[1:]:
    con = sqlite3.connect(db)
    for (run,) in con.execute("select id from runs order by started"):
        base = json.loads(con.execute("select config_json from runs where id=?", (run,)).fetchone()[0])["targets"][0]
        per = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))  # bench -> block -> (target, slot//2) -> values
        for b, tg, bl, slot, v in con.execute("""select s.benchmark, s.target, s.block, p.slot, s.value from samples s
            join processes p on p.run_id=s.run_id and p.process=s.process
            where s.run_id=? and s.warmup=0 and s.counting=0 and s.block>=0""", (run,)):
            per[b][bl][(tg == base, slot // 2)].append(v)
        out = []
        for b in sorted(per):
            blocks = []
            for bl, parts in per[b].items():
                ks = sorted({k for _, k in parts})
                lr = [math.log(st.median(parts[(False, k)]) / st.median(parts[(True, k)])) for k in ks
                      if (False, k) in parts and (True, k) in parts]
                if len(lr) >= 2: blocks.append(lr)
            if len(blocks) < 3: continue
            k = st.median(len(x) for x in blocks)
            within = math.sqrt(st.mean(st.variance(x) for x in blocks))
            means = [st.mean(x) for x in blocks]
            between = st.stdev(means)
            icc_free = within / math.sqrt(k)
            out.append(f"{b} n{len(blocks)} K{k:g} pair SD {100*within:.1f}% block SD {100*between:.1f}% (independent pairs: {100*icc_free:.1f}%)")
        print(run, " | ".join(out))
