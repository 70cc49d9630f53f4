"""Between-process spread of a TCG guest's agent process medians, ASLR on vs off,
the two alternated process by process.  Usage: python aslr.py BENCH ITERS PROCS [SAMPLES]"""
import json, math, statistics as st, sys
from vmtax.targets import parse_target
bench, iters, procs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
samples = int(sys.argv[4]) if len(sys.argv) > 4 else 60
t = parse_target("qemu:accel=tcg")
t.provide([])
t.start()
try:
    def sh(cmd):
        return list(t.run_tool(["sh", "-c", cmd], 30))
    print("va_space", sh("cat /proc/sys/kernel/randomize_va_space"))
    meds = {"2": [], "0": []}
    for i in range(procs):
        for mode in ("2", "0") if i % 2 == 0 else ("0", "2"):
            sh(f"echo {mode} > /proc/sys/kernel/randomize_va_space")
            vals = []
            for line in t.run_agent(["run", bench, "--samples", str(samples), "--warmup", "2", "--iters", str(iters)], 60):
                d = json.loads(line)
                if d.get("type") == "sample" and not d["warmup"]:
                    vals.append(d["value"])
            h = len(vals) // 2
            meds[mode].append((st.median(vals), st.median(vals[:h]), st.median(vals[h:])))
    for mode, m in meds.items():
        lm = [math.log(x[0]) for x in m]
        halves = [math.log(x[1] / x[2]) for x in m]
        print(f"aslr={mode} n={len(m)} median {st.median(x[0] for x in m):.1f} ns  between-process SD {100*st.stdev(lm):.2f}%  "
              f"MAD-SD {100*1.4826*st.median(abs(v - st.median(lm)) for v in lm):.2f}%  within (halves) SD {100*st.stdev(halves)/math.sqrt(2):.2f}%")
finally:
    t.stop()
