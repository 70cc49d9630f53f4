"""A finished run's summary: what the dashboard's lists read of it without
analysing it again.  Its verdict line and gate verdict (the runs list, the
gates) and each ratio with its interval and its two sides' own means (a
row's history, the diff), worked out from the run's analysis by the same
functions whether they are stored or not.

record() stores it (store.save_summary) once a run has ended: vmtax compare
and vmtax run do so at their end (cli.py), and catch_up() then summarises
up to CATCH_UP_RUNS older runs that lack one.  A stored summary carries the
VERSION of the analysis that worked it out: one of another version is read
as none, and a run without one (a store from before summaries, a run still
running or abandoned, a summary that could not be written) is analysed
where it is read, as before.  Raise VERSION whenever what any function here
gives for a run would change (tests/test_serve.py holds a run's summary as
this VERSION gives it, and fails when the analysis gives another)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..analysis import analyse
from ..errors import StoreError, UserError
from ..model import ALL_BLOCKS, BenchSpec, Comparison, Interval, Measurement, RunData, Stratum
from ..report import scoreboard
from ..report.console import gate_of
from ..report.units import parse_precision
from ..store import Store

VERSION = 1
CATCH_UP_RUNS = 20  # runs without a summary of VERSION summarised at the end of each run, newest first

_GATE = re.compile(r"--gate(?:=|\s+)'?([0-9.]+%?)")


@dataclass(frozen=True)
class Summary:
    verdict: dict | None
    gate: dict | None
    figures: list[dict]  # store.base.FIGURE's keys


def gate_threshold(command: str) -> float | None:
    """The threshold a compare run was gated at (compare --gate T), from its command line."""
    m = _GATE.search(command)
    if not m:
        return None
    try:
        return parse_precision(m.group(1))
    except ValueError:
        return None


def verdict_of(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> dict | None:
    """A compare run's verdict: its ratios, how many reached the precision asked, how many are flagged."""
    if data.kind != "compare" or len(data.targets) < 2:
        return None
    v = scoreboard.build(data, ms, cs).verdict
    return {"ratios": v.ratios, "precise": v.precise, "flagged": v.significant, "line": v.share()}


def gate_of_run(data: RunData, cs: list[Comparison]) -> dict | None:
    """A gated compare run's verdict, as the gate gave it (its rows regressed, its threshold)."""
    threshold = gate_threshold(data.command)
    if threshold is None or len(data.targets) < 2 or not cs:
        return None
    try:
        g = gate_of(data, cs, threshold, "--reference" in data.command)
    except UserError:  # nothing to gate
        return None
    return {
        "threshold": threshold,
        "verdict": g.verdict,
        "regressed": [f"{r.benchmark} on {r.candidate}" for r in g.rows if r.verdict == "regressed"],
    }


def _side(m: Measurement | None, prefix: str) -> dict:
    sm = m.summary if m is not None else None
    nan = float("nan")
    return {
        f"{prefix}_mean": sm.mean if sm else nan,
        f"{prefix}_ci_low": sm.ci_low if sm else nan,
        f"{prefix}_ci_high": sm.ci_high if sm else nan,
    }


def figures(ms: list[Measurement], cs: list[Comparison], benchmark: str | None = None) -> list[dict]:
    """Each ratio (of benchmark, where given) with its interval and its two sides' own means."""
    by = {(m.target, m.benchmark.name): m for m in ms}
    return [
        {
            "benchmark": c.benchmark.name,
            "suite": c.benchmark.suite,
            "baseline": c.baseline,
            "candidate": c.candidate,
            "unit": c.benchmark.unit,
            "direction": c.benchmark.direction,
            "estimand": c.estimand,
            "ratio": c.ratio,
            "ci_low": c.ratio_ci_low,
            "ci_high": c.ratio_ci_high,
            **_side(by.get((c.baseline, c.benchmark.name)), "base"),
            **_side(by.get((c.candidate, c.benchmark.name)), "cand"),
        }
        for c in cs
        if benchmark is None or c.benchmark.name == benchmark
    ]


def comparisons(figs: list[dict]) -> list[Comparison]:
    """The ratios of figures as the comparisons `vmtax diff` reads (watch.diff): each ratio,
    its interval and which blocks it is over; no test (p-value NaN), no strata."""
    nan = float("nan")
    out = []
    for f in figs:
        spec = BenchSpec(f["benchmark"], f["suite"], f["unit"], f["direction"], "")
        # Comparison.estimand: the headline where the all-blocks ratio is set aside
        aside = {"all_modes": Stratum(Interval(nan, nan, nan), 0, 0), "headline": f["estimand"]}
        out.append(
            Comparison(
                benchmark=spec,
                baseline=f["baseline"],
                candidate=f["candidate"],
                ci=Interval(f["ratio"], f["ci_low"], f["ci_high"]),
                p_value=nan,
                significant=False,
                stopped_by="",
                **(aside if f["estimand"] != ALL_BLOCKS else {}),
            )
        )
    return out


def of(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> Summary:
    """The summary of a run (data with its samples) from its analysis."""
    return Summary(verdict_of(data, ms, cs), gate_of_run(data, cs), figures(ms, cs))


def record(store: Store, run_id: str) -> None:
    """Store the summary of a run that has ended (nothing for one still running)."""
    data = store.load(run_id)
    if data.status == "running":
        return
    ms, cs = analyse(data) if data.kind != "scale" else ([], [])
    s = of(data, ms, cs)
    store.save_summary(run_id, VERSION, s.verdict, s.gate, s.figures)


def catch_up(store: Store, limit: int = CATCH_UP_RUNS) -> list[str]:
    """Store the summaries of the newest ended runs that have none of this VERSION (runs
    stored before summaries, or summarised by another version of the analysis), at most
    `limit` of them: the runs summarised.  A run that cannot be analysed is left to be
    analysed where it is read."""
    ids = [
        r[0]
        for r in store.read(
            "SELECT r.id FROM runs r WHERE r.status <> 'running' AND NOT EXISTS (SELECT 1 FROM run_summaries s"
            " WHERE s.run_id = r.id AND s.version = ?) ORDER BY r.started DESC LIMIT ?",
            (VERSION, limit),
        )
    ]
    done = []
    for run_id in ids:
        try:
            record(store, run_id)
        except StoreError:
            raise  # the store's trouble: the caller says it
        except Exception:  # an old run this analysis cannot read: read (and said) where its page is
            continue
        done.append(run_id)
    return done
