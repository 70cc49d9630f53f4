"""From stored samples to Measurements and Comparisons.  The live run and
`vmtax show` both go through here, so a report made later from the store is
the same as the one printed at the end of the run."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import TypeGuard

import numpy as np

from . import metrics as metrics_registry
from . import stats
from .model import (
    FAST_MODE,
    BenchSpec,
    Comparison,
    Interval,
    Measurement,
    Modes,
    RunData,
    Sample,
    Stratum,
    Summary,
    TargetInfo,
    headline_of,
)
from .stats.summary import Values

ALPHA = 0.05


def block_means(samples: list[Sample], median: bool = False) -> dict[tuple[str, str], dict[int, float]]:
    """(target, benchmark) -> {block: the mean of the agent process measured
    in that block} (warmups left out): the units of comparison, paired
    across targets by block.  With `median` (compare --median) a process
    is taken at its median sample instead, which a sample cut into by
    another job moves little.  A block of several processes a target
    (--block-processes) is their mean, or with `median` their geometric
    mean: each process's offset of its own averaged out, a block's pairs
    weighed alike.  Runs stored before samples carried their block pair
    the k-th process of each target, as their runner did."""
    acc: dict[tuple[str, str], dict[int, tuple[int, list[float]]]] = defaultdict(dict)  # (block, its values)
    order: dict[tuple[str, str], list[int]] = defaultdict(list)
    for s in samples:
        if s.warmup or s.counting:
            continue
        key = (s.target, s.benchmark)
        if s.process not in acc[key]:
            order[key].append(s.process)
            acc[key][s.process] = (s.block, [])
        acc[key][s.process][1].append(s.value)
    of = statistics.median if median else _mean
    out = {}
    for key, units in acc.items():
        blocks: dict[int, list[float]] = defaultdict(list)
        for proc, (block, v) in units.items():
            blocks[block if block >= 0 else order[key].index(proc)].append(of(v))
        out[key] = {b: xs[0] if len(xs) == 1 else (stats.geomean if median else _mean)(xs) for b, xs in blocks.items()}
    return out


def _mean(values: list[float]) -> float:
    """The plain mean (a sum over a count, as the stored runs' figures were made)."""
    return sum(values) / len(values)


def block_samples(samples: list[Sample]) -> dict[int, list[float]]:
    """{block: its timed samples} of one target's row (warmups and counted
    batches left out; none for a run stored before samples carried their
    block): what stats.host_state splits."""
    out: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        if not s.warmup and not s.counting and s.block >= 0:
            out[s.block].append(s.value)
    return dict(out)


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
    return {name: stats.summarize(v, groups=g) for name, (v, g) in ((n, by[n]) for n in metrics_registry.order(by))}


def metric_block_means(samples: list[Sample]) -> dict[str, dict[int, float]]:
    """metric -> {block: the value of the counting process of that block}."""
    acc: dict[str, dict[int, list[float]]] = defaultdict(dict)
    for s in samples:
        if _carries_metrics(s) and s.block >= 0:
            for name, v in s.metrics.items():
                acc[name].setdefault(s.block, []).append(v)
    return {n: {b: sum(v) / len(v) for b, v in blocks.items()} for n, blocks in acc.items()}


def metric_ratios(cand: list[Sample], base: list[Sample]) -> dict[str, Interval]:
    """name -> the ratio of the means and its 95% CI of every metric both sides counted
    with a positive mean: counting processes paired block by block, the same
    sign-flip interval as the time's (stats.py); unbounded with few blocks."""
    out = {}
    cm, bm = metric_block_means(cand), metric_block_means(base)
    for name in metrics_registry.order(cm.keys() & bm.keys()):
        c, b = stats.paired(cm[name], bm[name])
        if len(c) >= 2 and sum(b) > 0 and sum(c) > 0 and min(c + b) > 0:
            r, lo, hi, _ = stats.compare_paired(c, b)
            out[name] = Interval(r, lo, hi)
        elif c and sum(b) > 0:
            out[name] = Interval(sum(c) / sum(b), float("-inf"), float("inf"))
    return out


def measurement(spec: BenchSpec, target: str, samples: list[Sample], stopped_by: str, reason: str = "") -> Measurement:
    real = [s for s in samples if not s.warmup and not s.counting]
    values = [s.value for s in real]
    summary = (
        stats.summarize(values, lower_is_better=spec.direction == "lower", groups=[s.process for s in real])
        if values
        else None
    )
    overhead = sum(s.overhead for s in real) / len(real) if real else None
    cpus = {s.cpu for s in real}
    two = (
        stats.modes(stats.cluster_means(values, [s.process for s in real]), higher_is_better=spec.direction == "higher")
        if values
        else None
    )
    return Measurement(
        benchmark=spec,
        target=target,
        stopped_by=stopped_by,
        summary=summary,
        reason=reason,
        processes=len({s.process for s in real}),
        overhead=overhead,
        cpu=cpus.pop() if len(cpus) == 1 else -1,
        metrics=metric_summaries(samples),
        modes=two,
    )


def mode_test(
    base: dict[int, float], cand: dict[int, float], base_modes: Modes | None, cand_modes: Modes | None, which: str
) -> tuple[stats.ModeTest, list[int]] | None:
    """The test within a mode of the host (stats.ModeTest: the modes found
    on both sides' values pooled, at every ratio tested) over the paired
    blocks (their ids beside it); None unless both sides' process means fell
    in two modes, each on its own (the runner's stop, stop_blocks, goes by
    this call too), and, at the test's ratio, the pooled modes are those
    each side shows on its own (modes_agree).  With one side called and the
    other not, the stratum would set one side's fast mode against the
    other's mix wherever the other's modes went undetected (modes a few SDs
    apart): biased, so there is none."""
    if base_modes is None or cand_modes is None:
        return None
    common = sorted(base.keys() & cand.keys())
    if len(common) < 2:
        return None
    starts = (cand_modes.fast / base_modes.fast, cand_modes.slow / base_modes.slow)  # each side's modes lined up
    t = stats.ModeTest([cand[k] for k in common], [base[k] for k in common], which, base_modes.higher_is_better, starts)
    return (t, common) if modes_agree(t, base_modes, cand_modes) else None


def modes_agree(t: stats.ModeTest, base_modes: Modes, cand_modes: Modes) -> bool:
    """Whether the modes ModeTest found at its ratio, from both sides pooled,
    are the ones each side shows on its own: for each side, at least
    stats.MODE_AGREE of its processes the pooled fit counts in a mode are in
    the mode its own fit puts them (True where there is no ratio: nothing is
    kept, the row's note says so).  Two sides can each fall in two modes
    that are not one state of the host: under the RT hog a TCG guest's
    `cpuid` had a tail of processes 2.7x its fast ones beside the hog's
    1.5x, and at the ratio the pooled fit took that tail for the slow mode
    with every bare-machine process in it (the bare machine's own fit: 46%
    slow), keeping 17 of 92 blocks at a ratio 1.9x the all-blocks one
    (`20261126-192538-4e41`; every other row of the demo under the hog:
    0.90-1.00)."""
    c, b = t.agreement(cand_modes, base_modes)
    if math.isnan(c) and math.isnan(b):
        return True
    return c >= stats.MODE_AGREE and b >= stats.MODE_AGREE


def stop_blocks(
    base: dict[int, float], cand: dict[int, float], base_modes: Modes | None, cand_modes: Modes | None, same: bool
) -> tuple[list[int], list[int]] | None:
    """What the runner's stop judges a mode's stratum by: (the blocks both
    sides' processes fell in their fast mode, those both in their slow mode
    if `same`, else empty), each side's mode by its own cut, a mode counted
    from SAME_MIN blocks with `same`; None as mode_test.  Cheap (each side's
    fit is kept from block to block) and steady, where the report's rule
    (mode_test) refits at every ratio it tries: a stop on the report's kept
    blocks spends the budget worse (results/precision.md).  The stop's
    choice of blocks depends on which side got which process; the reported
    test does not."""
    if base_modes is None or cand_modes is None:
        return None
    both = sorted(base.keys() & cand.keys())
    fast = [k for k in both if not base_modes.is_slow(base[k]) and not cand_modes.is_slow(cand[k])]
    if not same:
        return fast, []
    slow = [k for k in both if base_modes.is_slow(base[k]) and cand_modes.is_slow(cand[k])]
    return (fast if len(fast) >= SAME_MIN else []), (slow if len(slow) >= SAME_MIN else [])


def _stratum(
    base: dict[int, float],
    cand: dict[int, float],
    base_modes: Modes | None,
    cand_modes: Modes | None,
    which: str,
    alpha: float,
) -> Stratum | None:
    got = mode_test(base, cand, base_modes, cand_modes, which)
    if got is None:
        return None
    t, common = got
    fast, slow = t.kept()
    lo, hi = t.interval(1 - alpha)
    return Stratum(
        Interval(t.ratio, lo, hi, 1 - alpha),
        len(fast) + len(slow),
        len(common),
        t.p(1.0) if math.isfinite(t.ratio) else math.nan,
        slow_blocks=len(slow),
    )


def fast_mode(
    base: dict[int, float],
    cand: dict[int, float],
    base_modes: Modes | None,
    cand_modes: Modes | None,
    alpha: float = ALPHA,
) -> Stratum | None:
    """Where both sides' process means fell in two modes: the ratio over
    the blocks whose two processes both ran in the fast mode, by the
    sign-flip test within the modes (stats.ModeTest: one rule, from both
    sides pooled at each ratio tested, so the test stays exact).  It
    estimates the tax in the fast mode; the all-blocks ratio estimates it
    over the modes as they fell (tools/modes.py measures the error rate by
    simulation, tools/validity.py --hog on the host)."""
    return _stratum(base, cand, base_modes, cand_modes, stats.FAST, alpha)


SAME_MIN = stats.STRATUM_MIN  # a mode's blocks counted in the same-mode ratio only from this many (a spread)


def same_mode(
    base: dict[int, float],
    cand: dict[int, float],
    base_modes: Modes | None,
    cand_modes: Modes | None,
    alpha: float = ALPHA,
) -> Stratum | None:
    """Where both sides' process means fell in two modes: the ratio over
    the blocks whose two processes ran in the same mode, both fast or both
    slow, each mode weighted by its blocks over the spread of their levels
    (stats.StratifiedTest, within stats.ModeTest's modes); the blocks that
    straddle the modes, the noisiest, are left out.  It estimates the tax
    with both sides in one state of the host, where the tax is the same in
    either (each mode's own ratio: fast_mode and slow_mode, in the note); a
    mode with fewer than SAME_MIN blocks does not count (then it is the
    other mode's ratio)."""
    return _stratum(base, cand, base_modes, cand_modes, stats.SAME, alpha)


def slow_mode(
    base: dict[int, float],
    cand: dict[int, float],
    base_modes: Modes | None,
    cand_modes: Modes | None,
    alpha: float = ALPHA,
) -> Stratum | None:
    """The ratio over the blocks both sides ran in the slow mode (beside
    same_mode: the tax in the contended state); None as fast_mode, or with
    fewer than SAME_MIN such blocks."""
    s = _stratum(base, cand, base_modes, cand_modes, stats.SLOW, alpha)
    return s if s is not None and s.blocks >= SAME_MIN else None


def _headlines(f: Stratum | None) -> TypeGuard[Stratum]:
    """Whether a row reports this stratum as its ratio (headline_stratum): it has a finite interval."""
    return f is not None and f.ci.bounded


def headline_stratum(c: Comparison, which: str, alpha: float = ALPHA) -> Comparison:
    """--fast-mode (which: FAST_MODE) or --same-mode (SAME_MODE): a row with
    two modes and that stratum's interval reports it as its ratio (and
    test), the all-blocks ratio beside it."""
    f = c.fast_mode if which == FAST_MODE else c.same_mode
    if not _headlines(f):
        return c
    every = Stratum(c.ci, f.of_blocks, f.of_blocks, c.p_value)
    return replace(
        c,
        ci=f.ci,
        p_value=f.p_value,
        significant=f.p_value < alpha,
        all_modes=every,
        headline=which,
    )


def compare(
    spec: BenchSpec,
    baseline: str,
    candidate: str,
    base: dict[int, float],
    cand: dict[int, float],
    stopped_by: str,
    alpha: float = ALPHA,
    ranked: bool = False,
) -> Comparison | None:
    """Ratio, interval and test over process means paired block by block:
    the runner ran both in one block, in random order, so host drift
    cancels and the sign-flip test holds its error rate (stats.py); ranked
    (--median): the median block and the signed-rank test (paired_ratio)."""
    c, b = stats.paired(cand, base)
    if len(c) < 2:
        return None
    r, lo, hi, p = paired_ratio(c, b, 1 - alpha, ranked)
    return Comparison(
        benchmark=spec,
        baseline=baseline,
        candidate=candidate,
        ci=Interval(r, lo, hi, 1 - alpha),
        p_value=p,
        significant=p < alpha,
        stopped_by=stopped_by,
    )


def paired_ratio(c: Values, b: Values, confidence: float, ranked: bool) -> tuple[float, float, float, float]:
    """(ratio, CI low, CI high, p) over values paired block by block: the
    ratio of the blocks' means and the sign-flip test (stats.compare_paired),
    or ranked (a run with median_blocks: compare --median) the median
    block's ratio and the signed-rank test (stats.compare_ranked), which an
    outlying block moves as one rank among k."""
    return (stats.compare_ranked if ranked else stats.compare_paired)(c, b, confidence=confidence)


def reported_halfwidth(
    base: dict[int, float],
    cand: dict[int, float],
    headline: Stratum | None,
    alpha: float = ALPHA,
    ranked: bool = False,
) -> float:
    """The relative half-width of the interval the report will give this
    row (analyse): its `headline` stratum (fast_mode or same_mode, as its
    mode flag asks; None without one) where headline_stratum takes it, else
    every block.  What the runner's stop confirms before it ends a row its
    estimate calls precise: the estimate (stats.stop_halfwidth and its
    strata) is blind to which side is ahead and steady from block to block,
    but a row that stops at the first block it reaches the goal then
    reports an interval just past it about as often as not (a quiet AMD
    run: 6 of its 27 rows stopped on precision at +-1.01-1.05%)."""
    if _headlines(headline):
        return headline.ci.rel_halfwidth
    c, b = stats.paired(cand, base)
    if len(c) < 2:
        return float("inf")
    r, lo, hi, _ = paired_ratio(c, b, 1 - alpha, ranked)
    return stats.ratio_ci_rel(r, lo, hi)


def base_modes(
    spec: BenchSpec, base: dict[int, float], cand: dict[int, float], every: Modes | None
) -> tuple[Modes | None, int]:
    """The baseline's modes for its comparison with `cand`, over the blocks
    the two share, and how many those are (0 where it shares them all).  A
    candidate that stopped on precision while the baseline went on with
    others (engine.stop.judge) was judged, and its interval confirmed, by
    the baseline's modes over their shared blocks; judged by the baseline's
    modes over all its blocks instead, its cut could move and the report
    fall back to every block, wider than the stop saw.  `every`, the modes
    over all its blocks, where it shares them all."""
    if base.keys() <= cand.keys():
        return every, 0
    shared = [v for k, v in base.items() if k in cand]
    return (stats.modes(shared, higher_is_better=spec.direction == "higher") if shared else None), len(shared)


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
            measurements.append(measurement(spec, name, by_key.get((name, spec.name), []), stopped_by, reason))
        if len(names) > 1:
            two = {m.target: m.modes for m in measurements if m.benchmark.name == spec.name}
            comparisons += _row_comparisons(data, spec, {n: by_key.get((n, spec.name), []) for n in names}, two)
    return measurements, comparisons


def _row_comparisons(
    data: RunData, spec: BenchSpec, samples: dict[str, list[Sample]], two: dict[str, Modes | None]
) -> list[Comparison]:
    """One row's comparisons, each candidate's with the baseline (samples:
    each target's; two: each target's modes), with their metrics, strata
    and host state, headlined as the run asked."""
    names = [t.name for t in data.targets]
    vals = block_means([s for n in names for s in samples[n]], median=bool(data.config.get("median")))
    base = vals.get((names[0], spec.name), {})
    base_blocks = block_samples(samples[names[0]])
    which = headline_of(data.config)
    out = []
    for cand_name in names[1:]:
        stopped_by = data.outcomes.get((cand_name, spec.name), ("interrupted", ""))[0]
        cand = vals.get((cand_name, spec.name), {})
        c = compare(spec, names[0], cand_name, base, cand, stopped_by, ranked=bool(data.config.get("median_blocks")))
        if c is None:
            continue
        (bm, shared), cm = base_modes(spec, base, cand, two.get(names[0])), two.get(cand_name)
        c = replace(
            c,
            metrics=metric_ratios(samples[cand_name], samples[names[0]]),
            fast_mode=fast_mode(base, cand, bm, cm),
            same_mode=same_mode(base, cand, bm, cm),
            slow_mode=slow_mode(base, cand, bm, cm),
            base_modes=bm if shared else None,
            base_shared=shared,
            host_state=stats.host_state(
                base_blocks, block_samples(samples[cand_name]), higher_is_better=spec.direction == "higher"
            ),
        )
        out.append(headline_stratum(c, which) if which else c)
    return out


# -- the reference loop as a control variate (opt-in: gate --reference) ----------------
@dataclass(frozen=True)
class ReferenceCheck:
    """What the reference adjustment did for one candidate."""

    candidate: str
    used: bool
    why: str  # said in the report: why it was used, or not
    beta: float | None = None  # the log ratio's slope on the log reference ratio, pooled over rows
    ci: Interval | None = None  # the reference loop's own candidate/baseline ratio and its 95% CI
    rows: int = 0

    @property
    def ratio(self) -> float | None:
        return None if self.ci is None else self.ci.point

    @property
    def ci_low(self) -> float | None:
        return None if self.ci is None else self.ci.low

    @property
    def ci_high(self) -> float | None:
        return None if self.ci is None else self.ci.high


def runs_reference_alike(base: TargetInfo, cand: TargetInfo) -> str:
    """'' when both targets run the agent's reference loop alike, so that its
    ratio's expectation is 1 (declared from what they are, never tested on the
    samples it adjusts); else why not.  Alike: one kind of target on this
    machine whose user-mode ALU loop runs on the CPU as it is -- two local or
    container targets, two UML builds, two QEMU guests under KVM -- or two
    guests of one QEMU build under TCG (a code generator translates the
    loop: two builds may translate it differently).  ssh targets are other
    machines."""
    if base.kind != cand.kind:
        return f"{cand.name} is a {cand.kind} target and the baseline a {base.kind} one"
    if base.kind == "ssh":
        return "ssh targets are other machines"
    if base.kind == "qemu" and "tcg" in (base.accel, cand.accel):
        same = all(base.facts.get(k) == cand.facts.get(k) for k in ("qemu", "qemu_binary"))
        if base.accel != cand.accel or not same:
            return f"under TCG the loop is translated, and {cand.name} is not the baseline's QEMU build and accelerator"
    return ""


MAX_BETA = 3.0  # a slope beyond this is the fit's noise, not the host's state


def _ref_ok(v: float | None) -> TypeGuard[float]:
    return v is not None and math.isfinite(v) and v > 0


def _centred_log_ratios(rows: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Every row's block log ratios log(c/b), each row centred on its own mean."""
    return np.concatenate([np.log(c) - np.log(b) - np.mean(np.log(c) - np.log(b)) for c, b in rows])


def reference_adjusted(
    data: RunData, comparisons: list[Comparison], alpha: float = ALPHA
) -> tuple[list[Comparison], list[ReferenceCheck]]:
    """Each comparison again, adjusted by the reference loop the agent timed
    around its samples, where that is honest: a control variate whose
    expectation is known.  A block's log ratio d is replaced by d - beta * x,
    x its log reference ratio (half the correction on each side, so that
    swapping a block's labels still negates it, as the sign-flip test
    assumes), beta one slope per candidate pooled over its rows (each row
    centred on its own means).  x's expectation is taken as 0, which only a
    candidate that runs the loop as the baseline does earns
    (runs_reference_alike: declared, the real guard), and its reference
    ratio over every block must not contradict: a finite 95% interval that
    holds 1.  That check only catches a shift of the loop larger than its
    interval; a smaller one would pass into every ratio, times beta, which
    is why the rule is declared and the loop's ratio is printed beside the
    verdicts.  (An equivalence test, the interval within a fraction of the
    threshold, was tried: on a bimodal host the loop's own interval is as
    wide as the host is noisy, so it refused exactly where the adjustment
    helps.)  Where any of this
    fails, or a row has too few blocks with readings (a workload, a run
    stored before they were read) or is a throughput row, the row is left
    as it was.  Measured on the validity harness's A/A pairs: intervals
    19% narrower at the same false-alarm rate (results/precision.md); never
    across kinds of target."""
    names = [t.name for t in data.targets]
    if len(names) < 2:
        return list(comparisons), []
    found = _reference_readings(data, comparisons)
    checks = [_reference_check(data, cand, found, alpha) for cand in names[1:]]
    use = {ch.candidate: ch.beta for ch in checks if ch.used and ch.beta is not None}
    out = []
    for c in comparisons:
        key = (c.benchmark.name, c.candidate)
        if c.candidate not in use or key not in found:
            out.append(c)
            continue
        cm, bm, cr, br = found[key]  # the candidate's and the baseline's means and reference readings
        half = np.exp(-use[c.candidate] * (np.log(cr) - np.log(br)) / 2)
        try:
            r, lo, hi, p = paired_ratio(cm * half, bm / half, 1 - alpha, bool(data.config.get("median_blocks")))
        except ValueError:  # not finite and positive after all: leave the row as measured
            out.append(c)
            continue
        out.append(replace(c, ci=Interval(r, lo, hi, 1 - alpha), p_value=p, significant=p < alpha))
    return out, checks


_Readings = dict[tuple[str, str], tuple[np.ndarray, ...]]


def _reference_readings(data: RunData, comparisons: list[Comparison]) -> _Readings:
    """Per (row, candidate) with stats.MIN_BLOCKS blocks read on both sides: the
    candidate's and the baseline's block means and reference readings, in
    that order (lower-is-better rows only; a mode's headline is left as
    reported)."""
    names = [t.name for t in data.targets]
    lower = {spec.name for spec in data.benchmarks if spec.direction == "lower"}
    found: _Readings = {}
    by_bench: dict[str, list[Sample]] = defaultdict(list)
    for s in data.samples:
        if s.benchmark in lower:
            by_bench[s.benchmark].append(s)
    fast = {(c.benchmark.name, c.candidate) for c in comparisons if c.all_modes is not None}
    for bench, samples in by_bench.items():
        median = bool(data.config.get("median"))
        vals = block_means(samples, median)
        refs = block_means(
            [
                replace(s, value=s.ref_before / 2 + s.ref_after / 2)
                for s in samples
                if _ref_ok(s.ref_before) and _ref_ok(s.ref_after)
            ],
            median,
        )
        base, rbase = vals.get((names[0], bench), {}), refs.get((names[0], bench), {})
        for cand in names[1:]:
            cv, rc = vals.get((cand, bench), {}), refs.get((cand, bench), {})
            blocks = [
                k
                for k in sorted(set(base) & set(cv) & set(rbase) & set(rc))
                if all(_ref_ok(m[k]) for m in (cv, base, rc, rbase))
            ]  # an overflowing mean is no reading
            if len(blocks) >= stats.MIN_BLOCKS and (bench, cand) not in fast:
                found[(bench, cand)] = tuple(np.array([m[k] for k in blocks]) for m in (cv, base, rc, rbase))
    return found


def _reference_check(data: RunData, cand: str, found: _Readings, alpha: float) -> ReferenceCheck:
    """Whether `cand`'s rows may be adjusted by the reference loop, and by
    which slope (beta, pooled over its rows), or why not."""
    info = {t.name: t for t in data.targets}
    mine = [v for (_, c), v in found.items() if c == cand]
    why_not = runs_reference_alike(info[data.targets[0].name], info[cand])
    if not mine:
        return ReferenceCheck(cand, False, f"no row with {stats.MIN_BLOCKS} blocks of reference readings on both sides")
    rc, rb = np.concatenate([m[2] for m in mine]), np.concatenate([m[3] for m in mine])
    r, lo, hi, _ = stats.compare_paired(rc, rb, confidence=1 - alpha)
    d = _centred_log_ratios([(c, b) for c, b, _, _ in mine])  # each row's, less that row's mean
    x = _centred_log_ratios([(c, b) for _, _, c, b in mine])
    beta = float(np.dot(d, x) / np.dot(x, x)) if np.dot(x, x) > 0 else 0.0
    if not why_not and not (math.isfinite(lo) and math.isfinite(hi)):
        why_not = f"the reference loop's own ratio on {cand} has no finite interval: nothing to check it by"
    elif not why_not and not lo <= 1 <= hi:
        why_not = (
            f"the reference loop itself ran {r - 1:+.2%} on {cand} [{lo:.4g}, {hi:.4g}]: its "
            "expectation is not 1 here, so the adjustment would move the ratio"
        )
    if not why_not and not (math.isfinite(beta) and abs(beta) <= MAX_BETA):
        why_not = f"the fitted slope {beta:.3g} is beyond +-{MAX_BETA:g}: noise, not the host's state"
    used = not why_not
    return ReferenceCheck(
        cand,
        used,
        why_not or f"adjusted: {len(mine)} row(s), beta {beta:.2f}",
        beta=beta,
        ci=Interval(r, lo, hi, 1 - alpha),
        rows=len(mine) if used else 0,
    )
