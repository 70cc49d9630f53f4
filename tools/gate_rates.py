#!/usr/bin/env python3
"""The CI gate's error rates (benchmark script, not a test): does `vmtax gate`
call an injected slowdown a regression, and an A/A pair a pass, run after run?

Each trial is one real comparison,

    vmtax compare local local:label=aa local:inject=2,label=slow --bench ROWS --max-time T --gate 1%

(or any other kind with --target: `--target qemu` compares qemu with
qemu:label=aa and qemu:inject=2,label=slow, three guests booted alike)

(what a CI job would run: --gate sets the precision goal to a third of the
threshold unless --precision is given), gated again from the stored run,
per candidate, with Holm's correction over the rows of each candidate:
`aa` (the machine against itself: a trial whose gate says `regressed` is a
false alarm, counted per run) and `slow` (the agent adds 2% of each
operation's own time to every operation: the gate should say `regressed`
for the injected rows).  On the same stored samples it also says what two
other rules would have said: Firecracker's A/B rule (a permutation test
of the two unpaired sets of process means, p < 0.01, and a change beyond
20%) and pyperf compare_to's (Student's t-test over all values at 95%,
"significant" then slower or faster).  Each trial is gated twice more on
its own samples, once with each block's process taken at its mean and
once at its median (compare --median), so the two estimands are compared
on the same samples whichever the run asked for.  With --replicates K a
trial is K such runs of a K-th of the budget each (every target booted
afresh for each) gated together (`vmtax gate RUN ...`, watch.over_runs):
the unit a boot, which a guest's own offset asks for; with --reboot one
run's blocks are each on fresh boots (compare --reboot), or on one fresh
boot a round shared by every guest (--shared-boot).  Writes results/NAME.md and
results/NAME.json, the latter after every trial (--resume adds to the
trials on record, so a series can span sessions; --reuse re-writes the
report from them).

Usage: .venv/bin/python tools/gate_rates.py [--name ab] [--trials 20] [--max-time 10m] [--inject 2] [--threshold 1%]
       [--precision P] [--bench NAME ...] [--target KIND] [--median] [--reboot]
       [--shared-boot] [--replicates K] [--db FILE]
       [--resume | --reuse]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import stats as sps

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from vmtax import watch  # noqa: E402
from vmtax.analysis import analyse, reference_adjusted  # noqa: E402
from vmtax.duration import parse_duration  # noqa: E402
from vmtax.store import Store  # noqa: E402

VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"
DB = OUT / "ab.db"
ROWS = ["getppid", "null_read", "stat", "sig_handle", "page_fault", "mmap", "pi", "cpuid", "segv", "ctx_2p_16k"]


def with_options(target: str, options: str) -> str:
    """A target string with more options: qemu -> qemu:OPTIONS, qemu:chan=virtio -> qemu:chan=virtio,OPTIONS."""
    return f"{target}{',' if ':' in target else ':'}{options}"


def sides(args) -> tuple[str, str, str]:
    """The baseline, its A/A twin and the injected side."""
    return (
        args.target,
        with_options(args.target, "label=aa"),
        with_options(args.target, f"inject={args.inject:g},label=slow"),
    )


def trial_command(args, n: int, max_time: str | None = None) -> list[str]:
    return [
        VMTAX,
        "--db",
        str(args.db),
        "compare",
        *sides(args),
        "--bench",
        *args.bench,
        "--max-time",
        max_time or args.max_time,
        "--gate",
        args.threshold,
        *(["--precision", args.precision] if args.precision else []),
        *(["--median"] if args.median else []),
        *(["--reboot"] if args.reboot else []),
        *(["--shared-boot"] if args.shared_boot else []),
        "--json",
        str(OUT / f"{args.name}-{n}.json"),
    ]


def process_means(data, target: str, bench: str) -> list[float]:
    by: dict[int, list[float]] = {}
    for s in data.samples:
        if s.target == target and s.benchmark == bench and not s.warmup and not s.counting:
            by.setdefault(s.process, []).append(s.value)
    return [sum(v) / len(v) for v in by.values()]


def values(data, target: str, bench: str) -> list[float]:
    return [
        s.value for s in data.samples if s.target == target and s.benchmark == bench and not s.warmup and not s.counting
    ]


def firecracker(a: list[float], b: list[float], rng: np.random.Generator) -> bool:
    """Firecracker's A/B rule: a permutation test of the difference of means
    (A and B unpaired), p < 0.01, and a relative change beyond 20%."""
    if len(a) < 2 or len(b) < 2:
        return False
    x, y = np.array(a), np.array(b)
    obs = abs(y.mean() - x.mean())
    both = np.concatenate([x, y])
    hits = 0
    for _ in range(2000):
        rng.shuffle(both)
        hits += abs(both[len(x) :].mean() - both[: len(x)].mean()) >= obs
    p = (hits + 1) / 2001
    return bool(p < 0.01 and abs(y.mean() / x.mean() - 1) > 0.20)


def pyperf_says(a: list[float], b: list[float]) -> str:
    """pyperf compare_to: 'not significant' unless Student's t-test over all
    values rejects at 95%; then 'slower' or 'faster' (means)."""
    if len(a) < 2 or len(b) < 2:
        return "not significant"
    _t, p = sps.ttest_ind(a, b)
    if not p < 0.05:
        return "not significant"
    return "slower" if np.mean(b) > np.mean(a) else "faster"


def gate_of(data, cs, cand: str, threshold: float):
    return watch.gate(
        replace(data, targets=[data.targets[0]] + [t for t in data.targets if t.name == cand]),
        [c for c in cs if c.candidate == cand],
        threshold,
    )


def half_widths(cs, cand: str) -> list[float]:
    return [c.ci.rel_halfwidth for c in cs if c.candidate == cand and np.isfinite(c.ci.rel_halfwidth)]


def estimands(data, aa: str, slow: str, threshold: float) -> dict:
    """The trial gated on its own samples with each block's process at its
    mean and the blocks' means, and at its median and the median block
    (compare --median), whichever the run asked."""
    out = {}
    for way, median in (("mean", False), ("median", True)):
        cs = analyse(replace(data, config={**data.config, "median": median, "median_blocks": median}))[1]
        hw = half_widths(cs, aa)
        out[way] = {
            "aa": watch_json(gate_of(data, cs, aa, threshold)),
            "slow": watch_json(gate_of(data, cs, slow, threshold)),
            "aa_median_half_width": float(np.median(hw)) if hw else None,
        }
    return out


def analyse_replicates(store, run_ids: list[str], args, threshold: float) -> dict:
    """A trial of several runs, gated over them (watch.over_runs) per
    candidate, at the blocks' means and at their medians."""
    datas = [store.load(r) for r in run_ids]
    _, aa, slow = sides(args)
    out: dict = {"runs": run_ids, "run": run_ids[-1], "cpu": cpu_model(), "host": platform.node(), "estimands": {}}
    for way, median in (("mean", False), ("median", True)):
        runs = [
            (d, analyse(replace(d, config={**d.config, "median": median, "median_blocks": median}))[1]) for d in datas
        ]
        got = {}
        for cand in (aa, slow):
            mine = [(d, [c for c in cs if c.candidate == cand]) for d, cs in runs]
            over = watch.over_runs(mine)
            hw = half_widths(over, cand)
            got[cand] = (watch_json(gate_of(datas[-1], over, cand, threshold)), float(np.median(hw)) if hw else None)
        out["estimands"][way] = {"aa": got[aa][0], "slow": got[slow][0], "aa_median_half_width": got[aa][1]}
    own = out["estimands"]["median" if args.median else "mean"]
    out.update(aa=own["aa"], slow=own["slow"], median_half_width={aa: own["aa_median_half_width"]})
    return out


def each_time(args) -> str:
    """One run's budget: --max-time, or a K-th of it with --replicates K."""
    return args.max_time if args.replicates == 1 else f"{parse_duration(args.max_time) / args.replicates:.0f}s"


def run_replicates(args, n: int) -> list[str]:
    """Trial n's runs, each a K-th of the budget; their ids."""
    each = each_time(args)
    ids = []
    for k in range(args.replicates):
        cmd = trial_command(args, n, max_time=each)
        print(f"[trial {n}, run {k + 1}/{args.replicates}] $ {' '.join(cmd)}", file=sys.stderr, flush=True)
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode not in (0, 1, 3):
            sys.exit(f"trial {n} failed ({p.returncode}): {p.stderr[-2000:]}")
        ids.append(json.loads((OUT / f"{args.name}-{n}.json").read_text())["run_id"])
    return ids


def analyse_trial(store, run_id: str, args, threshold: float, rng) -> dict:
    data = store.load(run_id)
    cs = analyse(data)[1]
    base, aa, slow = sides(args)
    g_aa, g_slow = gate_of(data, cs, aa, threshold), gate_of(data, cs, slow, threshold)
    ref, checks = reference_adjusted(data, cs)  # what `vmtax gate --reference` gates on
    other = {}
    for cand in (aa, slow):
        rows = {}
        for spec in data.benchmarks:
            row = spec.name
            rows[row] = {
                "firecracker": firecracker(process_means(data, base, row), process_means(data, cand, row), rng),
                "pyperf": pyperf_says(values(data, base, row), values(data, cand, row)),
            }
        other[cand] = rows
    widths = {
        cand: [
            (c.ratio_ci_high - c.ratio_ci_low) / 2 / c.ratio
            for c in cs
            if c.candidate == cand and c.ratio_ci_low is not None and c.ratio
        ]
        for cand in (aa, slow)
    }
    ref_widths = [
        (c.ratio_ci_high - c.ratio_ci_low) / 2 / c.ratio
        for c in ref
        if c.candidate == aa and np.isfinite(c.ratio_ci_high - c.ratio_ci_low)
    ]
    return {
        "run": run_id,
        "aa": watch_json(g_aa),
        "slow": watch_json(g_slow),
        "other": other,
        "reference": {
            "aa": watch_json(gate_of(data, ref, aa, threshold)),
            "slow": watch_json(gate_of(data, ref, slow, threshold)),
            "aa_median_half_width": float(np.median(ref_widths)) if ref_widths else None,
            "used": {c.candidate: c.used for c in checks},
            "why": {c.candidate: c.why for c in checks},
        },
        "cpu": cpu_model(),
        "host": platform.node(),
        "median_half_width": {k: float(np.median(v)) if v else None for k, v in widths.items()},
        "estimands": estimands(data, aa, slow, threshold),
    }


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20, help="trials in all (with --resume: those on record count)")
    ap.add_argument("--max-time", default="10m")
    ap.add_argument(
        "--precision", default=None, help="passed to vmtax compare (its default with --gate T: T/3, at most 1%%)"
    )
    ap.add_argument("--inject", type=float, default=2.0)
    ap.add_argument("--threshold", default="1%")
    ap.add_argument("--bench", nargs="+", default=ROWS)
    ap.add_argument("--name", default="ab", help="results/NAME.md and results/NAME.json (default ab)")
    ap.add_argument("--target", default="local", help="the kind compared with itself (default local): qemu, uml, ...")
    ap.add_argument("--median", action="store_true", help="pass --median to vmtax compare")
    ap.add_argument("--reboot", action="store_true", help="pass --reboot to vmtax compare")
    ap.add_argument("--shared-boot", action="store_true", help="pass --shared-boot to vmtax compare")
    ap.add_argument(
        "--replicates",
        type=int,
        default=1,
        metavar="K",
        help="a trial is K runs of a K-th of --max-time each, gated over them (default 1: one run)",
    )
    ap.add_argument("--db", type=Path, default=DB, help=f"the trials' store (default {DB.relative_to(REPO)})")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the trials already in results/NAME.json (from any session) and add to them",
    )
    ap.add_argument("--reuse", action="store_true", help="re-write the report from results/NAME.json only")
    ap.add_argument(
        "--reanalyse",
        action="store_true",
        help="with --reuse: analyse again the trials whose runs are still in results/ab.db",
    )
    args = ap.parse_args()
    if args.reanalyse and not args.reuse:
        ap.error("--reanalyse goes with --reuse (it re-gates the trials on record)")
    threshold = float(args.threshold.rstrip("%")) / 100
    OUT.mkdir(exist_ok=True)
    record = OUT / f"{args.name}.json"
    trials = json.loads(record.read_text()) if (args.resume or args.reuse) and record.exists() else []
    rng = np.random.default_rng(len(trials))
    t0 = time.time()
    if args.reanalyse and args.db.exists():
        with Store(args.db, readonly=True) as store:
            known = {r["id"] for r in store.list_runs(limit=10000)}
            for i, t in enumerate(trials):
                if t["run"] in known:
                    trials[i] = {
                        **t,
                        **analyse_trial(store, t["run"], args, threshold, np.random.default_rng(i)),
                        "seconds": t.get("seconds"),
                        "when": t.get("when"),
                    }
        record.write_text(json.dumps(trials, indent=1) + "\n")
    while not args.reuse and len(trials) < args.trials and args.replicates > 1:
        n = len(trials) + 1
        started = time.time()
        ids = run_replicates(args, n)
        with Store(args.db, readonly=True) as store:
            t = analyse_replicates(store, ids, args, threshold)
        t["seconds"] = round(time.time() - started, 1)
        t["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
        trials.append(t)
        record.write_text(json.dumps(trials, indent=1) + "\n")
        print(f"[trial {n}] aa {t['aa']['verdict']}, slow {t['slow']['verdict']}", file=sys.stderr, flush=True)
    while not args.reuse and len(trials) < args.trials:
        n = len(trials) + 1
        cmd = trial_command(args, n)
        print(f"[trial {n}/{args.trials}] $ {' '.join(cmd)}", file=sys.stderr, flush=True)
        started = time.time()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode not in (0, 1, 3):
            sys.exit(f"trial {n} failed ({p.returncode}): {p.stderr[-2000:]}")
        run_id = json.loads((OUT / f"{args.name}-{n}.json").read_text())["run_id"]
        with Store(args.db, readonly=True) as store:
            t = analyse_trial(store, run_id, args, threshold, rng)
        t["seconds"] = round(time.time() - started, 1)
        t["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
        trials.append(t)
        record.write_text(json.dumps(trials, indent=1) + "\n")  # after every trial: nothing measured is lost
        print(
            f"[trial {n}] aa {t['aa']['verdict']}, slow {t['slow']['verdict']}, {t['seconds']:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    text = report(trials, args, threshold, time.time() - t0)
    (OUT / f"{args.name}.md").write_text(text)
    print(text)
    return 0


def watch_json(g) -> dict:
    return {
        "verdict": g.verdict,
        "rows": {r.benchmark: {"verdict": r.verdict, "ratio": r.ratio, "p_adjusted": r.p_adjusted} for r in g.rows},
    }


def report(trials: list[dict], args, threshold: float, seconds: float) -> str:
    n = len(trials)
    aa_alarm = sum(t["aa"]["verdict"] == "regressed" for t in trials)
    aa_pass = sum(t["aa"]["verdict"] == "pass" for t in trials)
    rows = sorted({b for t in trials for b in t["slow"]["rows"]})
    slow_rows = sum(len(t["slow"]["rows"]) for t in trials)
    slow_hit = sum(r["verdict"] == "regressed" for t in trials for r in t["slow"]["rows"].values())
    slow_runs = sum(t["slow"]["verdict"] == "regressed" for t in trials)
    _, aa_key, slow_key = sides(args)
    one = [t for t in trials if t.get("other")]  # trials of one run: the other rules read its samples
    fc_slow = sum(r["firecracker"] for t in one for r in t["other"][slow_key].values())
    fc_aa = sum(any(r["firecracker"] for r in t["other"][aa_key].values()) for t in one)
    pp_slow = sum(r["pyperf"] == "slower" for t in one for r in t["other"][slow_key].values())
    pp_aa = sum(any(r["pyperf"] != "not significant" for r in t["other"][aa_key].values()) for t in one)
    prec = f" --precision {args.precision}" if args.precision else ""
    cpus = sorted({t.get("cpu", "?") for t in trials})
    secs = [t["seconds"] for t in trials if t.get("seconds")]
    hw = sorted(t["median_half_width"][aa_key] for t in trials if (t.get("median_half_width") or {}).get(aa_key))
    lines = [
        "# A/B: the gate's error rates",
        "",
        f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `tools/gate_rates.py --name {args.name} "
        f"--trials {n} --max-time {args.max_time}{prec} --inject {args.inject:g} --threshold {args.threshold}"
        f"{'' if args.target == 'local' else ' --target ' + args.target}{' --median' if args.median else ''}"
        f"{' --reboot' if args.reboot else ''}{' --shared-boot' if args.shared_boot else ''}"
        f"{f' --replicates {args.replicates}' if args.replicates > 1 else ''}`"
        + (f" ({sum(secs) / 60:.0f} min of trials)" if secs else "")
        + "; each trial: "
        + (f"{args.replicates} runs of " if args.replicates > 1 else "")
        + f"`vmtax compare {' '.join(sides(args))} --bench "
        f"{' '.join(args.bench)} --max-time {each_time(args)} --gate {args.threshold}{prec}"
        f"{' --median' if args.median else ''}{' --reboot' if args.reboot else ''}"
        f"{' --shared-boot' if args.shared_boot else ''}`, pinned (`--cpu auto`), "
        + ("gated together (`vmtax gate RUN ...`) " if args.replicates > 1 else "gated ")
        + f"per candidate at {threshold:.0%} with Holm over its {len(rows)} rows (family-wise alpha 0.05).",
        "",
    ]
    if secs:
        lines += [
            f"Trials ran on: {'; '.join(cpus)}; one trial took {min(secs) / 60:.1f}-"
            f"{max(secs) / 60:.1f} min (median {sorted(secs)[len(secs) // 2] / 60:.1f}); the A/A side's "
            f"median interval half-width per trial: "
            + (f"±{hw[0]:.2%} to ±{hw[-1]:.2%} (median ±{hw[len(hw) // 2]:.2%})" if hw else "-")
            + ".",
            "",
        ]
    lines += [
        f"- **A/A gate (false alarm per run): {aa_alarm} of {n} runs `regressed`** ({aa_pass} `pass`, "
        f"{n - aa_pass - aa_alarm} `inconclusive`).",
        f"- **{args.inject:g}% injected: {slow_hit} of {slow_rows} rows `regressed` "
        f"({slow_hit / max(1, slow_rows):.0%}); the run's gate said `regressed` in {slow_runs} of {n}.**",
    ]
    if one:
        lines += [
            f"- Firecracker's rule (permutation p < 0.01 and > 20%) on the same process means: "
            f"{fc_slow} of {slow_rows} injected rows flagged; A/A runs with any row flagged: {fc_aa} of {n}.",
            f"- pyperf compare_to (t-test at 95% over all values): {pp_slow} of {slow_rows} injected rows "
            f"'slower'; A/A runs with any row called slower or faster: {pp_aa} of {n}.",
        ]
    lines += [
        "",
    ]
    ref = [t["reference"] for t in trials if t.get("reference")]
    if ref:
        r_alarm = sum(r["aa"]["verdict"] == "regressed" for r in ref)
        r_pass = sum(r["aa"]["verdict"] == "pass" for r in ref)
        r_rows = sum(len(r["slow"]["rows"]) for r in ref)
        r_hit = sum(v["verdict"] == "regressed" for r in ref for v in r["slow"]["rows"].values())
        r_runs = sum(r["slow"]["verdict"] == "regressed" for r in ref)
        r_hw = sorted(r["aa_median_half_width"] for r in ref if r.get("aa_median_half_width"))
        p_hw = sorted(
            t["median_half_width"][aa_key]
            for t in trials
            if t.get("reference") and (t.get("median_half_width") or {}).get(aa_key)
        )
        unused = sum(not u for r in ref for u in r.get("used", {}).values())
        lines += [
            f"On the same samples of {len(ref)} of these trials, each row adjusted by the reference loop "
            "read around its samples (`vmtax gate --reference`: one beta per candidate, the "
            "reference ratio's expectation taken as 1, honest where both sides run the loop alike, as "
            "here): A/A gate `regressed` in "
            f"{r_alarm} of {len(ref)} runs ({r_pass} `pass`); injected rows `regressed` {r_hit} of {r_rows}; "
            f"the run's gate `regressed` in {r_runs} of {len(ref)}; the A/A side's median half-width per "
            "trial, median over trials: "
            + (
                f"±{r_hw[len(r_hw) // 2]:.2%} adjusted against ±{p_hw[len(p_hw) // 2]:.2%} plain"
                if r_hw and p_hw
                else "-"
            )
            + f"; the adjustment refused (so gated as measured) for {unused} of "
            f"{2 * len(ref)} candidate sides.",
            "",
        ]
    lines += estimand_table(trials, n)
    lines += ["| row | injected: regressed | A/A: regressed | median injected ratio |", "|---|---:|---:|---:|"]
    for b in rows:
        hit = sum(t["slow"]["rows"].get(b, {}).get("verdict") == "regressed" for t in trials)
        alarm = sum(t["aa"]["rows"].get(b, {}).get("verdict") == "regressed" for t in trials)
        ratios = sorted(t["slow"]["rows"][b]["ratio"] for t in trials if t["slow"]["rows"].get(b, {}).get("ratio"))
        med = f"{ratios[len(ratios) // 2]:.4f}" if ratios else "-"
        lines.append(f"| {b} | {hit}/{n} | {alarm}/{n} | {med} |")
    lines += [
        "",
        "Runs: "
        + ", ".join(
            " ".join(f"`{r}`" for r in t.get("runs", [t["run"]])) + (f" ({t['when']})" if t.get("when") else "")
            for t in trials
        )
        + f" (in `{args.db}`, not kept in git: `results/{args.name}.json` holds what is reported, "
        "trial by trial).",
    ]
    return "\n".join(lines) + "\n"


def estimand_table(trials: list[dict], n: int) -> list[str]:
    """The gate on the same samples with each block's process at its mean and at its median."""
    got = [t["estimands"] for t in trials if t.get("estimands")]
    if not got:
        return []
    lines = [
        f"The same {len(got)} trials gated with each block's process at its mean (what `vmtax compare` reports) "
        "and at its median sample (`--median`):",
        "",
        "| a block's process at | A/A runs `regressed` | A/A runs `pass` | injected rows `regressed` "
        "| A/A half-width, median over trials |",
        "|---|---:|---:|---:|---:|",
    ]
    for way in ("mean", "median"):
        e = [g[way] for g in got]
        rows = sum(len(x["slow"]["rows"]) for x in e)
        hit = sum(r["verdict"] == "regressed" for x in e for r in x["slow"]["rows"].values())
        hw = sorted(x["aa_median_half_width"] for x in e if x.get("aa_median_half_width"))
        lines.append(
            f"| {way} | {sum(x['aa']['verdict'] == 'regressed' for x in e)} of {len(e)} "
            f"| {sum(x['aa']['verdict'] == 'pass' for x in e)} of {len(e)} | {hit} of {rows} "
            f"| {'±' + format(hw[len(hw) // 2], '.2%') if hw else '-'} |"
        )
    return [*lines, ""]


if __name__ == "__main__":
    sys.exit(main())
