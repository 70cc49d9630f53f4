#!/usr/bin/env python3
"""Validity you can show (benchmark script, not a test): does vmtax flag a
known slowdown, and only that?

Each round runs one real comparison at the default budget,

    vmtax compare local local:label=aa local:inject=3,label=slow

where `aa` is the machine against itself (an A/A pair: every flag is a
false positive) and `slow` is the machine with the agent adding 3% of each
operation's own time to every operation (every row should be flagged, and
above 1).  Over the rounds it reports, per row and overall, the share of
A/A rows flagged (goal: at most 5%) and the share of 3% rows flagged
(goal: at least 95%), with the commands, into results/validity.md and the
JSON documents beside it.

Usage: .venv/bin/python tools/validity.py [--rounds 6] [--max-time 6m] [--inject 3]
       [--bench NAME ...] [--reuse]   (--reuse: re-analyse the stored rounds only)
       [--fast-mode]   (rounds with compare --fast-mode: results/validity-fast*.{json,md})
       [--against OLD_CHECKOUT]
       [--hog [--ways plain,fast,same]]   (each round as before, with --fast-mode [and --same-mode],
                 under the RT hog: results/validity-hog*)
       [--first N]   (with --against or --hog: run rounds N..--rounds only, analyse 1..--rounds)
       [--out NAME]  (with --hog: a series of its own, results/NAME.{md,db}, NAME-WAY-N.json; default validity-hog)

--hog runs every round under a host made noisy on purpose (the RT hog of
tools/hog.py, a third of the measured CPU in stretches of 0.5-2 s, the
stand-in for a noisy night this quiet machine can make) once each way: as
before, with --fast-mode (and with --same-mode, --ways plain,fast,same), the
order rotated round by round, every target pinned to the hog's CPU;
results/validity-hog.md gives the ways side by side, every run's comparisons
made again from its stored samples by this checkout's analysis (how each row
stopped stays the run's own), each way's runs also read for the other ways'
strata (what they would have headlined without their stop), with `vmtax
doctor` run under the hog first (its SD, the noise measured in the same hour).

--against runs every round twice, once with the package (and agent) of an
older checkout and once with this one, in ABBA order so that the host's drift
falls on both alike, and writes results/validity-against.md with the two
side by side (e.g. `git worktree add /tmp/old 1d5ad5a && make -C /tmp/old/agent`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demojob import WAY_FLAG, WAY_NAME, rotated, ways_arg

REPO = Path(__file__).resolve().parents[1]
VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"


def round_command(args, n: int, tag: str = "") -> list[str]:
    """One round's compare; tag: the package ("old"/"new", --against) or the way ("plain"/"fast", --hog)."""
    name = f"{stem(args)}-{tag + '-' if tag else ''}{n}"
    vmtax = [str(REPO / ".venv" / "bin" / "python"), "-m", "vmtax.cli"] if tag in ("old", "new") else [VMTAX]
    db = OUT / (f"{args.out}.db" if args.hog else f"{name.rsplit('-', 1)[0]}.db")
    cmd = [
        *vmtax,
        "--db",
        str(db),
        "compare",
        "local",
        "local:label=aa",
        f"local:inject={args.inject:g},label=slow",
        "--max-time",
        args.max_time,
    ]
    cmd += ["--cpu", str(hog_cpu())] if args.hog else []  # the hog's CPU named: the targets run where it does
    cmd += ["--json", str(OUT / f"{name}.json")] + (["--bench", *args.bench] if args.bench else [])
    if args.hog:
        return cmd + WAY_FLAG[tag]
    return cmd + (["--fast-mode"] if args.fast_mode else [])


def stem(args) -> str:
    """The rounds' files: validity-N.json, or validity-fast-N.json with --fast-mode (and its .md),
    validity-hog-{plain,fast}-N.json with --hog (or --out NAME: NAME-{plain,fast}-N.json)."""
    if getattr(args, "hog", False):
        return args.out
    return "validity-fast" if getattr(args, "fast_mode", False) else "validity"


def hog_cpu() -> int:
    return max(0, (os.cpu_count() or 1) - 1)  # the CPU --cpu auto picks


def headline_counts(docs: list[dict], key: str = "fast_mode") -> tuple[int, int, int, int]:
    """(A/A flagged, A/A rows, slowed rows flagged above 1, slowed rows) taking each row's stratum
    (key: fast_mode or same_mode) where it has a bounded one (as --fast-mode or --same-mode headlines
    it), else its all-blocks ratio."""
    aa = aa_n = sl = sl_n = 0
    for d in docs:
        for c in d["comparisons"]:
            f = c.get(key)
            every = c.get("all_modes") or {"p_value": c["p_value"], "ratio": c["ratio"]}  # a headline's own
            if f and f.get("ci_low") is not None and f.get("ci_high") is not None and f.get("p_value") is not None:
                flagged, ratio = f["p_value"] < 0.05, f["ratio"]
            else:
                flagged, ratio = every["p_value"] is not None and every["p_value"] < 0.05, every["ratio"] or 0
            if c["candidate"] == "local:label=aa":
                aa_n, aa = aa_n + 1, aa + flagged
            else:
                sl_n, sl = sl_n + 1, sl + (flagged and ratio > 1)
    return aa, aa_n, sl, sl_n


def reanalysed(doc: dict, db: Path) -> dict:
    """A run's JSON document with every comparison (its ratio, interval, test, estimand and the modes'
    strata) as this checkout's analysis makes it from the stored samples (`vmtax show RUN --json`), so
    every round is judged by today's rules (stats.ModeTest since 2026-11-26 15:30 UTC); how each row
    stopped stays as the run recorded it."""
    from vmtax.analysis import analyse
    from vmtax.report import jsondoc
    from vmtax.store import Store

    with Store(db, readonly=True) as store:
        data = store.load(doc["run_id"])
    now = {(c["benchmark"], c["candidate"]): c for c in jsondoc.document(data, *analyse(data))["comparisons"]}
    doc["comparisons"] = [now.get((c["benchmark"], c["candidate"]), c) for c in doc["comparisons"]]
    return doc


def hogged(args) -> int:
    """Each round once each way (--ways: as before, --fast-mode, --same-mode; the order rotated round by
    round, ABBA with two), under the RT hog on the measured CPU."""
    from hog import hog, stop

    if not args.reuse:  # the host's noise under the hog, in the same hour, before the rounds
        from vmtax import suite

        rows = len(suite.select(None, args.bench))
        h = hog(hog_cpu(), 600, seed=2999, rt=True)
        try:
            d = subprocess.run(
                [
                    VMTAX,
                    "doctor",
                    "--cpu",
                    str(hog_cpu()),
                    "--max-time",
                    args.max_time,
                    "--rows",
                    str(rows),
                    "--targets",
                    "3",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=600,
            )
        finally:
            stop(h)
        if d.returncode != 0:
            sys.exit(f"vmtax doctor under the hog failed ({d.returncode}): {d.stdout[-2000:]}")
        (OUT / f"{args.out}-doctor-{args.first}.txt").write_text(
            f"# before rounds {args.first}-{args.rounds}, {time.strftime('%H:%M UTC', time.gmtime())}\n"
            + d.stdout.strip()
            + "\n"
        )

    def order_of(f: Path) -> tuple[int, str]:  # -N.txt by N (before round N), any other after them
        tail = f.stem.rsplit("-", 1)[1]
        return (int(tail), "") if tail.isdigit() else (10**6, tail)

    doctor = "\n".join(f.read_text().strip() for f in sorted(OUT.glob(f"{args.out}-doctor-*.txt"), key=order_of))
    for n in range(1, args.rounds + 1):
        for tag in rotated(args.ways, n - 1):
            if args.reuse or n < args.first:
                continue
            cmd = round_command(args, n, tag)
            print(f"[round {n}/{args.rounds} {tag}] $ {' '.join(cmd)}", file=sys.stderr, flush=True)
            started = time.time()
            h = hog(hog_cpu(), 3600, seed=2000 + 2 * n + (tag == "fast") + 7919 * (tag == "same"), rt=True)
            try:
                p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=3600)
            finally:
                stop(h)
            if p.returncode not in (0, 3):
                sys.exit(f"round {n} ({tag}) failed ({p.returncode}): {p.stderr[-2000:]}")
            print(f"  {tag}: exit {p.returncode} in {(time.time() - started) / 60:.1f} min", file=sys.stderr)
    db = OUT / f"{args.out}.db"
    found = [(n, tag, OUT / f"{args.out}-{tag}-{n}.json") for n in range(1, args.rounds + 1) for tag in args.ways]
    found = [(n, tag, reanalysed(json.loads(f.read_text()), db)) for n, tag, f in found if f.exists()]
    docs = {tag: [d for _, t, d in found if t == tag] for tag in args.ways}
    docs = {tag: d for tag, d in docs.items() if d}
    ran = [f"{n}{tag[0]}" for n, tag, d in sorted(found, key=lambda x: x[2]["started"])]  # as they ran
    parts, summary = [], {}
    for tag, ds in docs.items():
        table, summary[tag] = analyse(ds, args.inject)
        halfs = [
            (c["ratio_ci_high"] - c["ratio_ci_low"]) / 2 / c["ratio"]
            for d in ds
            for c in d["comparisons"]
            if c.get("ratio") and c.get("ratio_ci_high") and c.get("ratio_ci_low")
        ]
        stratum_rows = sum(c.get("estimand") in ("fast mode", "same mode") for d in ds for c in d["comparisons"])
        n_rows = sum(len(d["comparisons"]) for d in ds)
        summary[tag].update(
            runs=len(ds),
            median_half_width=statistics.median(halfs) if halfs else None,
            within_1pct=sum(h <= 0.01 for h in halfs),
            ratios=len(halfs),
            stratum_headlines=stratum_rows,
        )
        median = f"±{statistics.median(halfs) * 100:.2f}%" if halfs else "none (no ratio has an interval)"
        notes = []
        for key, way in (("fast_mode", "fast"), ("same_mode", "same")):
            if way == tag:
                continue  # its own headline
            aa, aa_n, sl, sl_n = headline_counts(ds, key)
            summary[tag][f"{key}_in_note"] = {"aa_flagged": aa, "aa_rows": aa_n, "slow_flagged": sl, "slow_rows": sl_n}
            notes.append(
                f"their {key.replace('_', '-')} ratios (as {WAY_FLAG[way][0]} would headline them, "
                f"without its stop on the stratum): A/A flagged {aa} of {aa_n}, the {args.inject:g}% rows "
                f"{sl} of {sl_n}"
            )
        aa_rows = [c for d in ds for c in d["comparisons"] if c["candidate"] == "local:label=aa"]
        summary[tag]["aa_by_stop"] = {
            how: {
                "aa_flagged": sum(bool(c["significant"]) for c in aa_rows if c["stopped_by"] == how),
                "aa_rows": sum(c["stopped_by"] == how for c in aa_rows),
            }
            for how in ("precision", "budget")
        }
        stops = ", ".join(
            f"{v['aa_flagged']} of {v['aa_rows']} stopped {'on' if how == 'precision' else 'by the'} {how}"
            for how, v in summary[tag]["aa_by_stop"].items()
        )
        parts += [
            f"## {WAY_NAME[tag]} ({len(ds)} runs)",
            "",
            f"Median ratio 95% half-width: {median}; {sum(h <= 0.01 for h in halfs)} of {len(halfs)} "
            f"ratios within ±1%; {stratum_rows} of {n_rows} rows report a mode's stratum. A/A rows flagged "
            f"by how they stopped: {stops}. From the same runs, {'; '.join(notes)}.",
            "",
            table,
            "",
            "Runs: " + ", ".join(f"`{d['run_id']}`" for d in ds) + ".",
            "",
        ]
    if not docs:
        sys.exit(f"no round's JSON document in {OUT} ({args.out}-WAY-N.json, N up to {args.rounds})")
    env = next(iter(docs.values()))[0]["environment"]
    every = [d for tag in docs for d in docs[tag]]
    span = "-".join(
        time.strftime("%H:%M UTC", time.gmtime(t))
        for t in (min(d["started"] for d in every), max(d["finished"] for d in every))
    )
    text = "\n".join(
        [
            "# Validity on a host made noisy: false positives and power under the RT hog",
            "",
            f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `tools/validity.py --hog --rounds "
            f"{args.rounds} --max-time {args.max_time} --ways {','.join(args.ways)}"
            + (f" --out {args.out}" if args.out != "validity-hog" else "")
            + f"` (the runs {span}) on {env.get('cpu_model')}, "
            f"{env.get('cpus_online')} CPUs, kernel {env.get('kernel')} ({platform.node()}). Every run under "
            f"tools/hog.py's RT hog on CPU {hog_cpu()} (SCHED_FIFO, a third of the CPU in 0.5 ms slices through "
            "stretches of 0.5-2 s, idle 0.5-2 s between), every target pinned there. The runs in the order "
            "they ran (round, p as before, f --fast-mode, s --same-mode; the ways rotated round by round): "
            + ", ".join(ran)
            + ".",
            "",
            "Each run: `vmtax compare local local:label=aa local:inject="
            f"{args.inject:g},label=slow --max-time {args.max_time} --cpu {hog_cpu()} [--fast-mode | --same-mode]`"
            + (f" `--bench {' '.join(args.bench)}`" if args.bench else "")
            + ". `aa` is the machine against itself; "
            f"`slow` adds {args.inject:g}% of each operation's own time to every operation (agent `--inject`).",
            "",
            "The host's noise under the hog, just before the rounds (each series of rounds; `vmtax doctor --cpu "
            f"{hog_cpu()} --max-time {args.max_time} --rows N --targets 3`, the hog on):",
            "",
            "```",
            doctor or "(not recorded)",
            "```",
            "",
            *parts,
        ]
    )
    (OUT / f"{args.out}.md").write_text(text)
    (OUT / f"{args.out}-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(text)
    return 0


def against(args) -> int:
    """Old and new package, round after round (ABBA), and the two analyses side by side."""
    old = Path(args.against).resolve()
    mine = {k: v for k, v in os.environ.items() if k != "VMTAX_AGENT"}  # each package finds its own agent
    envs = {"old": {**mine, "PYTHONPATH": str(old / "src")}, "new": {**mine, "PYTHONPATH": str(REPO / "src")}}
    rev = {
        k: subprocess.run(
            ["git", "-C", str(d), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        for k, d in (("old", old), ("new", REPO))
    }
    t0 = time.time()
    order = []
    for n in range(1, args.rounds + 1):
        pair = ("old", "new") if n % 2 else ("new", "old")
        if n < args.first:
            order.append((n, pair[0]))
            order.append((n, pair[1]))
            continue
        for tag in pair:
            order.append((n, tag))
            if args.reuse:
                continue
            cmd = round_command(args, n, tag)
            print(f"[round {n}/{args.rounds} {tag}] $ {' '.join(cmd)}", file=sys.stderr, flush=True)
            started = time.time()
            p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=envs[tag])
            if p.returncode not in (0, 3):
                sys.exit(f"round {n} ({tag}) failed ({p.returncode}): {p.stderr[-2000:]}")
            print(f"  {tag}: exit {p.returncode} in {(time.time() - started) / 60:.1f} min", file=sys.stderr)
    docs = {
        tag: [json.loads((OUT / f"validity-{tag}-{n}.json").read_text()) for n in range(1, args.rounds + 1)]
        for tag in ("old", "new")
    }
    parts, summary = [], {}
    for tag in ("old", "new"):
        table, summary[tag] = analyse(docs[tag], args.inject)
        halfs = [
            c["ratio_ci_high"] / c["ratio"] - 1
            for d in docs[tag]
            for c in d["comparisons"]
            if c.get("ratio") and c.get("ratio_ci_high")
        ]
        summary[tag]["median_half_width"] = statistics.median(halfs) if halfs else None
        median = f"±{statistics.median(halfs) * 100:.2f}%" if halfs else "none (no ratio has an interval)"
        parts += [
            f"## {tag}: {rev[tag]} ({'the older checkout' if tag == 'old' else 'this checkout'})",
            "",
            f"Median ratio 95% CI upper half-width: {median} ({len(halfs)} ratios).",
            "",
            table,
            "",
            "Runs: " + ", ".join(f"`{d['run_id']}`" for d in docs[tag]) + ".",
            "",
        ]
    env = docs["new"][0]["environment"]
    text = "\n".join(
        [
            f"# Validity before and after ({rev['old']} against {rev['new']})",
            "",
            f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `tools/validity.py --against "
            f"CHECKOUT_OF_{rev['old']} --rounds {args.rounds} --max-time {args.max_time}` "
            f"({(time.time() - t0) / 60:.0f} min) on {env.get('cpu_model')}, {env.get('cpus_online')} CPUs, "
            f"kernel {env.get('kernel')} ({platform.node()}). Order of the runs (ABBA, so drift falls on both): "
            + ", ".join(f"{n}{t[0]}" for n, t in order)
            + ".",
            "",
            "Each run: `vmtax compare local local:label=aa local:inject="
            f"{args.inject:g},label=slow --max-time {args.max_time}`, the package and agent from the named checkout.",
            "",
            *parts,
        ]
    )
    (OUT / "validity-against.md").write_text(text)
    (OUT / "validity-against.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(text)
    return 0


def binomial_upper(k: int, n: int) -> float:
    """A 95% upper bound on a rate seen k times in n (Clopper-Pearson)."""
    from scipy.stats import beta

    return 1.0 if k == n else float(beta.ppf(0.95, k + 1, n - k))


def binomial_lower(k: int, n: int) -> float:
    from scipy.stats import beta

    return 0.0 if k == 0 else float(beta.ppf(0.05, k, n - k + 1))


def uniform_said(ps: list[float]) -> str:
    """Whether the A/A rows' p-values are as uniform as a test that holds its
    error rate makes them: the shares below 0.01, 0.05 and 0.10, and a
    Kolmogorov-Smirnov test against the uniform (the sign-flip p-values are
    a little discrete, which makes it conservative)."""
    if not ps:
        return "A/A p-values: none."
    from scipy import stats as sps

    ks = sps.kstest(ps, "uniform")
    below = ", ".join(f"{sum(p < q for p in ps)} below {q:g}" for q in (0.01, 0.05, 0.1))
    return (
        f"A/A p-values, of {len(ps)}: {below} (a test that holds its error rate: 1%, 5%, 10% of them); "
        f"against the uniform, Kolmogorov-Smirnov D {ks.statistic:.3f}, p {ks.pvalue:.2f}."
    )


def lean_said(docs: list[dict]) -> str:
    """Whether any row's A/A ratio leans one way over the runs (a bias of the
    A/A pair, not noise): each row's mean log ratio across runs, the one
    furthest from 0 in its standard errors, and how many rows lie beyond
    Student's 95% point (about 5% of them by chance)."""
    from scipy import stats as sps

    logs: dict[str, list[float]] = {}
    for doc in docs:
        for c in doc["comparisons"]:
            if c["candidate"] == "local:label=aa" and c.get("ratio"):
                logs.setdefault(c["benchmark"], []).append(math.log(c["ratio"]))
    leans = []
    for name, xs in logs.items():
        if len(xs) >= 3 and statistics.stdev(xs) > 0:
            se = statistics.stdev(xs) / math.sqrt(len(xs))
            leans.append((abs(statistics.fmean(xs)) / se, name, statistics.fmean(xs), se, len(xs)))
    if not leans:
        return "A/A ratios by row across runs: too few runs to tell a lean."
    t, name, mean, se, n = max(leans)
    beyond = sum(x[0] > sps.t.ppf(0.975, x[4] - 1) for x in leans)
    return (
        f"A/A ratios by row across runs (mean log ratio): the furthest from 1 is {name}, {mean * 100:+.2f}% "
        f"± {se * 100:.2f}% over {n} runs (t {t:.1f}); {beyond} of {len(leans)} rows beyond Student's 95% point "
        "(about 5% of them by chance)."
    )


def run_lean_said(docs: list[dict]) -> str:
    """Whether the A/A rows lean one way run by run or over the series as a
    whole (a difference between the two sides that holds for a run or for
    hours, where lean_said looks for one row's): each A/A row's signed z
    (its two-sided p-value as a normal deviate, the sign of its log ratio),
    their mean per run, the series' mean with Student's t across runs, and
    how far the runs' means spread against the rows' own spread / sqrt(rows)
    (about 1 when the rows of a run are independent)."""
    from scipy import stats as sps

    means, allz = [], []
    for doc in docs:
        zs = [
            math.copysign(float(sps.norm.isf(max(c["p_value"], 1e-300) / 2)), math.log(c["ratio"]))
            for c in doc["comparisons"]
            if c["candidate"] == "local:label=aa"
            and c.get("ratio")
            and c.get("p_value") is not None
            and c["p_value"] == c["p_value"]
        ]
        if len(zs) >= 2:
            means.append(statistics.fmean(zs))
            allz += zs
    if len(means) < 3:
        return "A/A rows' signed z by run: too few runs to tell a lean."
    t = statistics.fmean(means) / (statistics.stdev(means) / math.sqrt(len(means)))
    per_run = len(allz) / len(means)
    spread = statistics.variance(means) / (statistics.variance(allz) / per_run)
    return (
        f"A/A rows' signed z (the p-value's normal deviate, the ratio's sign), {len(allz)} rows: variance "
        f"{statistics.variance(allz):.3f} (1 for a test that holds its level); their mean over the series "
        f"{statistics.fmean(allz):+.3f}, t {t:+.1f} across {len(means)} runs; the runs' means spread "
        f"{spread:.2f}x as far as independent rows' would (variance ratio)."
    )


def analyse(docs: list[dict], inject: float) -> tuple[str, dict]:
    rows: dict[str, dict] = {}
    for doc in docs:
        for c in doc["comparisons"]:
            r = rows.setdefault(c["benchmark"], {"aa": 0, "aa_n": 0, "slow": 0, "slow_n": 0, "ratios": []})
            if c["candidate"] == "local:label=aa":
                r["aa_n"] += 1
                r["aa"] += bool(c["significant"])
            else:
                r["slow_n"] += 1
                r["slow"] += bool(c["significant"]) and (c["ratio"] or 0) > 1
                if c["ratio"]:
                    r["ratios"].append(c["ratio"])
    aa = sum(r["aa"] for r in rows.values())
    aa_n = sum(r["aa_n"] for r in rows.values())
    slow = sum(r["slow"] for r in rows.values())
    slow_n = sum(r["slow_n"] for r in rows.values())
    ps = [
        c["p_value"]
        for doc in docs
        for c in doc["comparisons"]
        if c["candidate"] == "local:label=aa" and c.get("p_value") is not None
    ]
    from scipy.stats import binom

    lines = [
        f"**A/A rows flagged: {aa} of {aa_n} ({aa / aa_n * 100:.1f}%, 95% upper bound "
        f"{binomial_upper(aa, aa_n) * 100:.1f}%)** — goal at most 5% (so many or more at 5%: binomial p "
        f"{float(binom.sf(aa - 1, aa_n, 0.05)):.2f}).",
        "",
        uniform_said(ps),
        "",
        lean_said(docs),
        "",
        run_lean_said(docs),
        "",
        f"**{inject:g}% slowdown flagged (and above 1): {slow} of {slow_n} "
        f"({slow / slow_n * 100:.1f}%, 95% lower bound {binomial_lower(slow, slow_n) * 100:.1f}%)** "
        "— goal at least 95%.",
        "",
        "| benchmark | A/A flagged | slowdown flagged | median ratio of the slowed target |",
        "|---|---:|---:|---:|",
    ]
    for name, r in rows.items():
        med = f"{statistics.median(r['ratios']):.3f}" if r["ratios"] else "-"
        lines.append(f"| {name} | {r['aa']}/{r['aa_n']} | {r['slow']}/{r['slow_n']} | {med} |")
    summary = {
        "aa_flagged": aa,
        "aa_rows": aa_n,
        "slow_flagged": slow,
        "slow_rows": slow_n,
        "aa_p_below": {str(q): sum(p < q for p in ps) for q in (0.01, 0.05, 0.1)},
        "aa_p_values": len(ps),
        "per_row": {k: {kk: v for kk, v in r.items() if kk != "ratios"} for k, r in rows.items()},
    }
    return "\n".join(lines), summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--max-time", default="6m")
    ap.add_argument("--inject", type=float, default=3.0)
    ap.add_argument("--bench", nargs="+")
    ap.add_argument("--reuse", action="store_true", help="re-analyse the stored rounds only")
    ap.add_argument(
        "--fast-mode",
        action="store_true",
        help="rounds with compare --fast-mode, into results/validity-fast-N.json and validity-fast.md",
    )
    ap.add_argument("--against", metavar="OLD_CHECKOUT", help="also run an older checkout's package, ABBA")
    ap.add_argument(
        "--hog",
        action="store_true",
        help="every round once each way (--ways) under the RT hog (results/validity-hog.md)",
    )
    ap.add_argument(
        "--ways",
        type=ways_arg,
        metavar="WAY,WAY",
        help="with --hog: the ways each round runs (and --reuse reports), of plain, fast (--fast-mode), "
        "same (--same-mode); a round without a way's run is left out of that way's figures",
    )
    ap.add_argument(
        "--first",
        type=int,
        default=1,
        metavar="N",
        help="with --against or --hog: run rounds N..--rounds only, and analyse 1..--rounds (more rounds later)",
    )
    ap.add_argument(
        "--out",
        default="validity-hog",
        metavar="NAME",
        help="with --hog: the series' files, results/NAME.md, NAME.db, NAME-WAY-N.json, "
        "NAME-doctor-N.txt (another host's series beside the first)",
    )
    args = ap.parse_args()
    if args.first != 1 and not (args.against or args.hog):
        ap.error("--first goes with --against or --hog")
    if args.ways and not args.hog:
        ap.error("--ways goes with --hog")
    if args.out != "validity-hog" and not args.hog:
        ap.error("--out goes with --hog")
    if not args.out or "/" in args.out or args.out.startswith("."):
        ap.error(f"--out takes a file name stem in results/, got {args.out!r}")
    args.ways = args.ways or ["plain", "fast"]
    if args.hog and (args.against or args.fast_mode):
        ap.error("--hog runs its ways itself; not with --against or --fast-mode")
    OUT.mkdir(exist_ok=True)
    if args.against:
        return against(args)
    if args.hog:
        return hogged(args)
    commands = []
    t0 = time.time()
    for n in range(1, args.rounds + 1):
        cmd = round_command(args, n)
        commands.append(" ".join(["vmtax", *cmd[3:]]))
        if args.reuse:
            continue
        print(f"[round {n}/{args.rounds}] $ {' '.join(cmd)}", file=sys.stderr, flush=True)
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode not in (0, 3):
            sys.exit(f"round {n} failed ({p.returncode}): {p.stderr[-2000:]}")
    docs = [json.loads((OUT / f"{stem(args)}-{n}.json").read_text()) for n in range(1, args.rounds + 1)]
    table, summary = analyse(docs, args.inject)
    env = docs[0]["environment"]
    text = "\n".join(
        [
            "# Validity: false positives and power at the default budget",
            "",
            f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `tools/validity.py` "
            f"({args.rounds} rounds, {(time.time() - t0) / 60:.0f} min) on {env.get('cpu_model')}, "
            f"{env.get('cpus_online')} CPUs, kernel {env.get('kernel')} ({platform.node()}). "
            "Pinning: as each run's header says (the default, `--cpu auto`).",
            "",
            "Each round: "
            + f"`{commands[0].replace(' --json ' + str(OUT / f'{stem(args)}-1.json'), '')}`"
            + f" (with `--json results/{stem(args)}-N.json`). `aa` is the machine against itself; `slow` "
            f"adds {args.inject:g}% of each operation's own time to every operation (agent `--inject`).",
            "",
            table,
            "",
            "Runs: " + ", ".join(f"`{d['run_id']}`" for d in docs) + ".",
            "",
        ]
    )
    (OUT / f"{stem(args)}.md").write_text(text)
    (OUT / f"{stem(args)}-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
