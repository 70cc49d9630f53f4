#!/usr/bin/env python3
"""Where a run's time goes and where its variance lives (benchmark script,
not a test).  For a stored comparison (or one it runs), per target:

- time: an agent process's wall time split into start-up (launch to its
  first line: exec, setup, calibration, the channel), the timed samples
  (warmups and measured ones, from their values), and the rest (teardown,
  exit, the channel's round trip);
- variance: the spread of samples within a process, of process means
  between processes, and of the per-block log ratio to the baseline
  (what the ratio's interval is made of);
- the samples per process that would buy the most precision per second,
  n* = sqrt(within^2 * (fixed + warmup) / (between^2 * sample)) (each
  process costs its fixed time plus one sample per warmup and per sample;
  the variance of its mean is between^2 + within^2 / n).

Usage: .venv/bin/python tools/precision.py [--db FILE] RUN [--markdown FILE]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from vmtax import stats  # noqa: E402
from vmtax.analysis import analyse  # noqa: E402
from vmtax.store import Store, default_db_path  # noqa: E402


def per_process(data, procs: list[dict]) -> dict[int, dict]:
    """process -> its row from the store plus its samples' timed seconds."""
    out = {p["process"]: dict(p, timed=0.0, values=[], warm=0) for p in procs}
    for s in data.samples:
        if s.process not in out:
            continue
        row = out[s.process]
        row["timed"] += s.value * s.ops / 1e9
        if s.warmup:
            row["warm"] += 1
        else:
            row["values"].append(s.value)
    return out


def time_split(rows: list[dict]) -> dict[str, float]:
    """Median seconds per process: wall, start-up, timed, rest."""
    ok = [r for r in rows if r["outcome"] == "ok" and r["first_line"]]
    if not ok:
        return {}
    wall = [r["ended"] - r["started"] for r in ok]
    start = [r["first_line"] - r["started"] for r in ok]
    timed = [r["timed"] for r in ok]
    rest = [w - s - t for w, s, t in zip(wall, start, timed, strict=True)]
    return {
        "wall": statistics.median(wall),
        "startup": statistics.median(start),
        "timed": statistics.median(timed),
        "rest": statistics.median(rest),
    }


def variance_parts(rows: list[dict]) -> tuple[float, float] | None:
    """(within, between) relative standard deviations of one benchmark on
    one target: samples around their process's mean, and process means
    around the overall mean (less what within-process noise explains)."""
    groups = [np.asarray(r["values"]) for r in rows if len(r["values"]) >= 2]
    means = [float(np.mean(r["values"])) for r in rows if r["values"]]
    if len(groups) < 3 or len(means) < 3:
        return None
    m = float(np.mean(means))
    n = float(np.mean([g.size for g in groups]))
    within = float(np.mean([g.var(ddof=1) for g in groups])) / (m * m)
    between = max(0.0, float(np.var(means, ddof=1)) / (m * m) - within / n)
    return math.sqrt(within), math.sqrt(between)


def best_samples(within: float, between: float, fixed: float, sample: float, warmup: int) -> float:
    if between <= 0 or sample <= 0:
        return float("inf")
    return math.sqrt(within**2 * (fixed + warmup * sample) / (between**2 * sample))


def report(data, procs: list[dict]) -> str:
    rows = per_process(data, procs)
    by_target: dict[str, list[dict]] = defaultdict(list)
    by_tb: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows.values():
        by_target[r["target"]].append(r)
        by_tb[(r["target"], r["benchmark"])].append(r)
    cfg = data.config
    lockstep = cfg.get("pairing", "blocks") == "lockstep"
    pinned = f"pinned to host CPU {cfg['cpu']}" if cfg.get("cpu") is not None else "unpinned"
    out = [
        f"Run `{data.id}`: `{data.command}`",
        "",
        (
            f"lockstep pairs of {cfg.get('step_ms')} ms samples (an agent row's processes held together, "
            f"stepped by turns: a process's rest holds the other sides' turns, its untimed samples and "
            f"each go's round trip; the best samples/process column assumes processes in turn), {pinned}"
            if lockstep
            else f"{cfg.get('samples_per_process')} samples per process after {cfg.get('warmup')} warmup, "
            f"{cfg.get('min_time_ms')} ms per sample, {pinned}"
        ),
        "",
        "### Where an agent process's time goes (median per process, all benchmarks)",
        "",
        "| target | processes | wall | start-up | timed samples | rest | fixed share |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    fixed_of = {}
    for t in [t.name for t in data.targets]:
        sp = time_split(by_target[t])
        if not sp:
            continue
        fixed_of[t] = sp["wall"] - sp["timed"]
        out.append(
            f"| {t} | {len(by_target[t])} | {sp['wall'] * 1e3:.1f} ms | {sp['startup'] * 1e3:.1f} ms | "
            f"{sp['timed'] * 1e3:.1f} ms | {sp['rest'] * 1e3:.1f} ms | "
            f"{fixed_of[t] / sp['wall'] * 100:.0f}% |"
        )
    out += [
        "",
        "### Where the variance lives (median over benchmarks, relative SD)",
        "",
        "| target | within a process | between processes | per-block log ratio to the baseline "
        "| best samples/process |",
        "|---|---:|---:|---:|---:|",
    ]
    base = data.targets[0].name
    for t in [t.name for t in data.targets]:
        parts, ds, best = [], [], []
        for spec in data.benchmarks:
            r = by_tb.get((t, spec.name), [])
            vp = variance_parts(r)
            if vp:
                parts.append(vp)
                sample = statistics.median([x["timed"] / max(1, len(x["values"]) + x["warm"]) for x in r])
                best.append(best_samples(vp[0], vp[1], fixed_of.get(t, 0.0), sample, int(cfg.get("warmup", 1))))
            if t != base:
                mine = {x["block"]: float(np.mean(x["values"])) for x in r if x["values"]}
                theirs = {
                    x["block"]: float(np.mean(x["values"])) for x in by_tb.get((base, spec.name), []) if x["values"]
                }
                c, b = stats.paired(mine, theirs)
                if len(c) >= 3:
                    ds.append(float(np.std(np.log(c) - np.log(b), ddof=1)))
        if not parts:
            continue
        w = statistics.median(p[0] for p in parts)
        bt = statistics.median(p[1] for p in parts)
        d = f"{statistics.median(ds) * 100:.1f}%" if ds else "-"
        n = statistics.median(best) if best else float("nan")
        out.append(f"| {t} | {w * 100:.1f}% | {bt * 100:.1f}% | {d} | {n:.1f} |")
    _ms, cs = analyse(data)
    if cs:
        widths = [stats.ratio_ci_rel(c.ratio, c.ratio_ci_low, c.ratio_ci_high) for c in cs]
        finite = [x for x in widths if math.isfinite(x)]
        out += [
            "",
            "### Precision of the ratios",
            "",
            f"{len(cs)} ratios; median 95% CI half-width "
            f"±{statistics.median(widths) * 100:.2f}%; within ±1%: {sum(x <= 0.01 for x in widths)}; "
            f"within ±2%: {sum(x <= 0.02 for x in widths)}; unbounded: {len(widths) - len(finite)}",
            "",
            "| candidate | ratios | median ±% | within ±1% | within ±2% |",
            "|---|---:|---:|---:|---:|",
        ]
        for cand in [t.name for t in data.targets[1:]]:
            mine = [w for c, w in zip(cs, widths, strict=True) if c.candidate == cand]
            if mine:
                out.append(
                    f"| {cand} | {len(mine)} | {statistics.median(mine) * 100:.2f} | "
                    f"{sum(x <= 0.01 for x in mine)} | {sum(x <= 0.02 for x in mine)} |"
                )
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", nargs="?", help="run id (default: the latest)")
    ap.add_argument("--db", default=str(default_db_path()))
    ap.add_argument("--markdown", help="also write the report to FILE")
    args = ap.parse_args()
    with Store(args.db, readonly=True) as store:
        run_id = store.resolve(args.run)
        text = report(store.load(run_id), store.processes(run_id))
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
