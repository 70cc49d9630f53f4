"""From stored samples to Measurements and Comparisons.  The live run and
`vmtax show` both go through here, so a report made later from the store is
the same as the one printed at the end of the run."""
from __future__ import annotations

from collections import defaultdict

from . import stats
from .model import BenchSpec, Comparison, Measurement, RunData, Sample

ALPHA = 0.05


def process_means(samples: list[Sample]) -> dict[tuple[str, str], list[float]]:
    """(target, benchmark) -> the mean of each agent process's measured
    values (warmups left out): the independent units of comparison."""
    out: dict[tuple[str, str], tuple[list[float], list[int]]] = defaultdict(lambda: ([], []))
    for s in samples:
        if not s.warmup:
            vals, groups = out[(s.target, s.benchmark)]
            vals.append(s.value)
            groups.append(s.process)
    return {k: stats.cluster_means(v, g) for k, (v, g) in out.items()}


def measurement(spec: BenchSpec, target: str, samples: list[Sample],
                stopped_by: str, reason: str = "") -> Measurement:
    real = [s for s in samples if not s.warmup]
    values = [s.value for s in real]
    summary = stats.summarize(values, lower_is_better=spec.direction == "lower",
                              groups=[s.process for s in real]) if values else None
    overhead = sum(s.overhead for s in real) / len(real) if real else None
    cpus = {s.cpu for s in real}
    return Measurement(benchmark=spec, target=target, stopped_by=stopped_by, summary=summary,
                       reason=reason, processes=len({s.process for s in real}),
                       overhead=overhead, cpu=cpus.pop() if len(cpus) == 1 else -1)


def compare(spec: BenchSpec, baseline: str, candidate: str, base: list[float], cand: list[float],
            stopped_by: str, alpha: float = ALPHA) -> Comparison | None:
    """Ratio and test over per-process means, paired block by block: the
    runner ran cand[i] and base[i] side by side, so host drift cancels."""
    if min(len(base), len(cand)) < 2:
        return None
    r, lo, hi = stats.ratio_ci_paired(cand, base, confidence=1 - alpha)
    p = stats.paired_p(cand, base)
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
            vals = process_means([s for n in names for s in by_key.get((n, spec.name), [])])
            base = vals.get((names[0], spec.name), [])
            for cand_name in names[1:]:
                stopped_by = data.outcomes.get((cand_name, spec.name), ("interrupted", ""))[0]
                c = compare(spec, names[0], cand_name, base, vals.get((cand_name, spec.name), []),
                            stopped_by)
                if c:
                    comparisons.append(c)
    return measurements, comparisons
