"""When a row stops: a pure function of what it has stored so far (each
target's timed samples and process count, whether it is still going), so
that the live judgement and `show` read one truth (analysis.block_means,
the report's strata and intervals) and the rule is tested on its own.

A candidate's width is its ratio to the baseline's (compare; a lone target:
its mean's): the stop's estimate (stats.stop_halfwidth, blind to which side
of a block is ahead) until that reaches the precision, then the wider of it
and the interval the report will give (analysis.reported_halfwidth), so a
row stops only when both say it is precise.  With --same-mode or
--fast-mode a row with two modes is judged over the blocks of its stratum,
where the report will have that stratum (analysis.stop_blocks,
analysis.same_mode, analysis.fast_mode).

With more than one candidate, each stops at the first block its own ratio
to the baseline is as precise as asked on every figure of the job, both
sides with --min-processes processes; the baseline goes on for the others
(judge).  A candidate's stop then rests on its own pairs with the
baseline: with the row's stop (until 2026-11-27) it also waited on the
others' ratios, which read the baseline's side of each block alone, so
which of a candidate's two processes of a block the baseline's was could
decide when it stopped (an A/A pair's sign-flip test holds only where its
stop is blind to that); and a candidate precise early ran on, block after
block, until the slowest was (results/precision.md, 2026-11-27).

The fits behind it (stats.modes, the report's strata) are kept per content
(lru_cache): a row's means change only when a block is added, and the rule
is asked several times a block."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from .. import analysis, stats
from ..model import Modes, Sample, Stratum

Items = tuple[tuple[int, float], ...]  # a side's block means, hashable (block, mean)


class _Config(Protocol):
    """What the stop reads of a run's configuration (plan.RunConfig)."""

    @property
    def precision(self) -> float: ...
    @property
    def min_processes(self) -> int: ...
    @property
    def same_mode(self) -> bool: ...
    @property
    def fast_mode(self) -> bool: ...
    @property
    def median(self) -> bool: ...
    @property
    def median_blocks(self) -> bool: ...


@dataclass(frozen=True)
class StopRule:
    precision: float  # CI half-width as a fraction of the estimate
    min_processes: int = 10  # each side's processes before a row may stop
    same_mode: bool = False  # judge a row with two modes over its same-mode blocks
    fast_mode: bool = False  # or over its fast-mode blocks
    median: bool = False  # a block's process taken at its median sample (compare --median), as the report takes it
    median_blocks: bool = False  # and a ratio at its median block (analysis.paired_ratio), as the report takes it

    @classmethod
    def of(cls, cfg: _Config) -> StopRule:
        """The rule of a run's configuration (plan.RunConfig)."""
        return cls(cfg.precision, cfg.min_processes, cfg.same_mode, cfg.fast_mode, cfg.median, cfg.median_blocks)

    @property
    def stratum(self) -> str | None:
        return stats.SAME if self.same_mode else stats.FAST if self.fast_mode else None


@dataclass(frozen=True)
class Side:
    """One target on one row, as the stop reads it: its timed samples (one
    process per block), how many timed processes it ran, whether it is
    still going, and the row's direction."""

    samples: tuple[Sample, ...]
    processes: int = 0
    active: bool = True
    higher_is_better: bool = False

    def means(self, median: bool = False) -> dict[int, float]:
        """Block -> the mean (or median) of the process measured in it (as `show` reads them)."""
        return next(iter(analysis.block_means(list(self.samples), median).values()), {})


@dataclass(frozen=True)
class Judgement:
    worst: float  # the widest interval still deciding the row (0: none)
    precise: frozenset[str]  # candidates whose own ratio is now precise: they stop
    widths: dict[str, float]  # each going candidate's widest interval over the job's figures (widths)


def widths(rule: StopRule, names: list[str], sides: dict[str, Side]) -> dict[str, float]:
    """The relative CI half-width that decides stopping, per active target
    (names: the targets in order, the baseline first): each candidate's
    ratio to the baseline when comparing (the baseline has none of its
    own), else each target's mean."""
    base, active = names[0], [n for n in names if sides[n].active]
    if len(names) > 1 and sides[base].active:
        bb = sides[base].means(rule.median)
        out = {}
        for n in active:
            if n != base:
                cb = sides[n].means(rule.median)
                out[n] = _width(rule, bb, cb, sides[base].higher_is_better, sides[n].higher_is_better)
        return out
    return {n: _summary_rel(sides[n]) for n in active}


def worst(rule: StopRule, names: list[str], sides: dict[str, Side]) -> float:
    """The widest of widths: the figure that decides stopping."""
    return max(widths(rule, names, sides).values(), default=0.0)


def judge(rule: StopRule, names: list[str], figures: list[dict[str, Side]]) -> Judgement:
    """A job's stop after a block (figures: each of its rows' sides): the
    candidates that stop on their own precision (with at least three
    targets, the baseline going on and --min-processes on both sides, every
    figure precise), the widest interval over the job's figures that
    still decides once they have stopped, and each candidate's widest."""
    base = figures[0][names[0]]
    per = [widths(rule, names, sides) for sides in figures]
    precise: frozenset[str] = frozenset()
    if len(names) >= 3 and base.active and base.processes >= rule.min_processes:
        precise = frozenset(
            n
            for n in per[0]
            if figures[0][n].processes >= rule.min_processes and max(w.get(n, math.inf) for w in per) <= rule.precision
        )
    return Judgement(
        max(
            (
                w
                for sides, by in zip(figures, per, strict=True)
                for n, w in by.items()
                if sides[n].active and n not in precise
            ),
            default=0.0,
        ),
        precise,
        {n: max(w.get(n, math.inf) for w in per) for n in per[0]},
    )


def _summary_rel(side: Side) -> float:
    if len(side.samples) < 2:
        return float("inf")
    return stats.summarize([s.value for s in side.samples], groups=[s.process for s in side.samples]).ci_rel


def _width(rule: StopRule, bb: dict[int, float], cb: dict[int, float], bhib: bool, chib: bool) -> float:
    """A candidate's width: the estimate, and once it is within the
    precision, the wider of it and the interval the report will give."""
    key = (tuple(bb.items()), tuple(cb.items()), bhib, chib)
    w = _estimate(rule, *key)
    return max(w, _reported(rule.stratum, rule.median_blocks, *key)) if w <= rule.precision else w


def _estimate(rule: StopRule, bb_items: Items, cb_items: Items, bhib: bool, chib: bool) -> float:
    """The stop's estimate of a candidate's half-width (stats.stop_halfwidth:
    blind to which side of a block is ahead): over the stratum its mode
    flag asks where both sides have two modes and the report will have it
    (_holds), else over every block."""
    bb, cb = dict(bb_items), dict(cb_items)
    bm, cm = _modes(bb_items, bhib), _modes(cb_items, chib)
    key = (bb_items, cb_items, bhib, chib)
    if rule.same_mode:  # judged over the blocks in one mode where a side has two (analysis.stop_blocks)
        got = analysis.stop_blocks(bb, cb, bm, cm, same=True)
        if got is not None:
            fast, slow = got
            keep = fast + slow
            w = (
                float("inf")
                if len(keep) < rule.min_processes
                else stats.stop_halfwidth_strata(
                    [cb[k] for k in keep], [bb[k] for k in keep], [0] * len(fast) + [1] * len(slow)
                )
            )
            if w > rule.precision or _holds(stats.SAME, *key):
                return w
    if rule.fast_mode:  # judged in the fast mode where a side has two (analysis.stop_blocks)
        got = analysis.stop_blocks(bb, cb, bm, cm, same=False)
        kept = got[0] if got is not None else None
        if kept is not None and len(kept) < rule.min_processes:
            return float("inf")  # the stratum needs --min-processes blocks, as a row does
        if kept is not None:
            w = stats.stop_halfwidth(*stats.paired({k: cb[k] for k in kept}, {k: bb[k] for k in kept}))
            if w > rule.precision or _holds(stats.FAST, *key):
                return w
    # all blocks: no stratum asked or found, or one the report will not have (_holds)
    return stats.stop_halfwidth(*stats.paired(cb, bb))


@lru_cache(maxsize=4096)
def _modes(items: Items, higher_is_better: bool) -> Modes | None:
    """Two modes among a side's block means (stats.modes, as the report fits them)."""
    return stats.modes([v for _, v in items], higher_is_better=higher_is_better)


@lru_cache(maxsize=4096)
def _stratum(which: str, bb_items: Items, cb_items: Items, bhib: bool, chib: bool) -> Stratum | None:
    """The report's stratum against the baseline (which: stats.SAME,
    analysis.same_mode; stats.FAST, analysis.fast_mode)."""
    fit = analysis.same_mode if which == stats.SAME else analysis.fast_mode
    return fit(dict(bb_items), dict(cb_items), _modes(bb_items, bhib), _modes(cb_items, chib))


def _holds(which: str, bb_items: Items, cb_items: Items, bhib: bool, chib: bool) -> bool:
    """Whether the report will have this stratum's ratio against the
    baseline (analysis.mode_test: the pooled modes each side's own, at a
    ratio it finds): what a stop on the stratum must ask before it stops
    the row, or the row would stop on a ratio the report then leaves out."""
    got = _stratum(which, bb_items, cb_items, bhib, chib)
    return got is not None and math.isfinite(got.ratio)


@lru_cache(maxsize=4096)
def _reported(which: str | None, ranked: bool, bb_items: Items, cb_items: Items, bhib: bool, chib: bool) -> float:
    """The half-width the report will give this candidate's ratio
    (analysis.reported_halfwidth over its `which` stratum; None: no mode
    flag; ranked: at the median block): what the stop asks before it ends a
    row its estimate calls precise."""
    headline = _stratum(which, bb_items, cb_items, bhib, chib) if which else None
    return analysis.reported_halfwidth(dict(bb_items), dict(cb_items), headline, ranked=ranked)
