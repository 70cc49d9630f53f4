"""From stored samples to Measurements and Comparisons.  The live run and
`vmtax show` both go through here, so a report made later from the store is
the same as the one printed at the end of the run."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from . import metrics as metrics_registry
from . import stats
from .model import BenchSpec, Comparison, Measurement, RunData, Sample, Summary

ALPHA = 0.05


def block_means(samples: list[Sample]) -> dict[tuple[str, str], dict[int, float]]:
    """(target, benchmark) -> {block: the mean of the agent process measured
    in that block} (warmups left out): the units of comparison, paired
    across targets by block.  Runs stored before samples carried their
    block pair the k-th process of each target, as their runner did."""
    acc: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(dict)
    order: dict[tuple[str, str], list[int]] = defaultdict(list)
    for s in samples:
        if s.warmup or s.counting:
            continue
        key = (s.target, s.benchmark)
        if s.process not in acc[key]:
            order[key].append(s.process)
            acc[key][s.process] = [s.block, 0.0, 0]
        unit = acc[key][s.process]
        unit[1] += s.value
        unit[2] += 1
    out = {}
    for key, units in acc.items():
        out[key] = {(block if block >= 0 else order[key].index(proc)): total / n
                    for proc, (block, total, n) in units.items()}
    return out


def _carries_metrics(s: Sample) -> bool:
    """A counted batch; or a workload's timed run, whose metric is read
    without a counter (/proc ticks: no cost to the run)."""
    return s.counting or (bool(s.metrics) and not s.warmup)


def metric_summaries(samples: list[Sample]) -> dict[str, Summary]:
    """Each metric per operation over the counted batches: a Student
    interval over the means of the counting processes (metrics.py); a
    workload's runs carry theirs (host CPU per unit of work)."""
    by: dict[str, tuple[list[float], list[int]]] = {}
    for s in samples:
        if _carries_metrics(s):
            for name, v in s.metrics.items():
                vals, groups = by.setdefault(name, ([], []))
                vals.append(v)
                groups.append(s.process)
    return {name: stats.summarize(v, groups=g) for name, (v, g) in
            ((n, by[n]) for n in metrics_registry.order(by))}


def metric_block_means(samples: list[Sample]) -> dict[str, dict[int, float]]:
    """metric -> {block: the value of the counting process of that block}."""
    acc: dict[str, dict[int, list[float]]] = defaultdict(dict)
    for s in samples:
        if _carries_metrics(s) and s.block >= 0:
            for name, v in s.metrics.items():
                acc[name].setdefault(s.block, []).append(v)
    return {n: {b: sum(v) / len(v) for b, v in blocks.items()} for n, blocks in acc.items()}


def metric_ratios(cand: list[Sample], base: list[Sample]) -> dict[str, tuple[float, float, float]]:
    """name -> (ratio of the means, 95% CI) of every metric both sides counted
    with a positive mean: counting processes paired block by block, the same
    sign-flip interval as the time's (stats.py); unbounded with few blocks."""
    out = {}
    cm, bm = metric_block_means(cand), metric_block_means(base)
    for name in metrics_registry.order(cm.keys() & bm.keys()):
        c, b = stats.paired(cm[name], bm[name])
        if len(c) >= 2 and sum(b) > 0 and sum(c) > 0 and min(c + b) > 0:
            r, lo, hi, _ = stats.compare_paired(c, b)
            out[name] = (r, lo, hi)
        elif c and sum(b) > 0:
            out[name] = (sum(c) / sum(b), float("-inf"), float("inf"))
    return out


def measurement(spec: BenchSpec, target: str, samples: list[Sample],
                stopped_by: str, reason: str = "") -> Measurement:
    real = [s for s in samples if not s.warmup and not s.counting]
    values = [s.value for s in real]
    summary = stats.summarize(values, lower_is_better=spec.direction == "lower",
                              groups=[s.process for s in real]) if values else None
    overhead = sum(s.overhead for s in real) / len(real) if real else None
    cpus = {s.cpu for s in real}
    return Measurement(benchmark=spec, target=target, stopped_by=stopped_by, summary=summary,
                       reason=reason, processes=len({s.process for s in real}),
                       overhead=overhead, cpu=cpus.pop() if len(cpus) == 1 else -1,
                       metrics=metric_summaries(samples))


def compare(spec: BenchSpec, baseline: str, candidate: str, base: dict[int, float],
            cand: dict[int, float], stopped_by: str, alpha: float = ALPHA) -> Comparison | None:
    """Ratio, interval and test over process means paired block by block:
    the runner ran both in one block, in random order, so host drift
    cancels and the sign-flip test holds its error rate (stats.py)."""
    c, b = stats.paired(cand, base)
    if len(c) < 2:
        return None
    r, lo, hi, p = stats.compare_paired(c, b, confidence=1 - alpha)
    return Comparison(benchmark=spec, baseline=baseline, candidate=candidate, ratio=r,
                      ratio_ci_low=lo, ratio_ci_high=hi, p_value=p, significant=p < alpha,
                      stopped_by=stopped_by)


def analyse(data: RunData) -> tuple[list[Measurement], list[Comparison]]:
    by_key: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for s in data.samples:
        by_key[(s.target, s.benchmark)].append(s)
    measurements, comparisons = [], []
    names = [t.name for t in data.targets]
    for spec in data.benchmarks:
        for name in names:
            stopped_by, reason = data.outcomes.get((name, spec.name), ("interrupted", "not finished"))
            if (name, spec.name) not in data.outcomes and not by_key.get((name, spec.name)):
                continue  # never reached
            measurements.append(measurement(spec, name, by_key.get((name, spec.name), []),
                                            stopped_by, reason))
        if len(names) > 1:
            vals = block_means([s for n in names for s in by_key.get((n, spec.name), [])])
            base = vals.get((names[0], spec.name), {})
            for cand_name in names[1:]:
                stopped_by = data.outcomes.get((cand_name, spec.name), ("interrupted", ""))[0]
                c = compare(spec, names[0], cand_name, base, vals.get((cand_name, spec.name), {}),
                            stopped_by)
                if c:
                    ratios = metric_ratios(by_key.get((cand_name, spec.name), []),
                                           by_key.get((names[0], spec.name), []))
                    comparisons.append(replace(c, metrics=ratios))
    return measurements, comparisons
