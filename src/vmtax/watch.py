"""Did it change?  Three questions over stored runs, pure (no I/O):

- gate: in one compare run (a baseline build A and a candidate build B,
  interleaved in blocks), which rows regressed beyond a threshold, with the
  family-wise error held over all rows (Holm's step-down: valid for any
  dependence between the rows' tests, and uniformly more powerful than
  Bonferroni; rows of one run share a host and are not independent, which
  rules out Benjamini-Hochberg's independence-based guarantee for the
  *family-wise* rate a CI gate needs: one false alarm per run is what a
  team pays for).
- over runs: a gate whose unit is a run, each a fresh boot of every
  target (over_runs): where a guest instance carries an offset of its
  own, the interval over one run's blocks cannot hold it; the interval
  over runs does.
- diff: one target pair in two runs (other times, maybe other hosts): the
  ratio of ratios with its interval, and the facts that differ.
- history: each row's ratio over stored runs, and where its level changed
  (change points by Apache Otava's E-divisive means, the method of Fleming
  et al., "Hunter", ICPE 2023), each annotated with the facts that changed
  there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from . import stats
from .errors import UserError
from .model import ALL_BLOCKS, FAST_MODE, SAME_MODE, Bounded, Comparison, Interval, RunData
from .plan import RunConfig

ALPHA = 0.05  # family-wise error rate of a gate, over all its rows
Z95 = 1.959963984540054
VERDICTS = ("pass", "improved", "inconclusive", "error", "regressed")
# facts that differ between any two runs without a change of build, host or
# options: a namespace's inode, the random block order, a private scratch directory
VOLATILE = frozenset(
    {"seed", "tap", "bridge", "emulator_threads_on", "vcpu_threads_on", "idle_cpu_pct", "boot_s", "tmpdir"}
)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def _worse(c: Comparison) -> tuple[float, float, float]:
    """(ratio, CI low, CI high) oriented so that above 1 is worse: a latency
    row as it is, a throughput row inverted."""
    if c.benchmark.direction == "higher":
        inv = lambda x: 1 / x if x > 0 else math.inf
        return inv(c.ratio), inv(c.ratio_ci_high), inv(c.ratio_ci_low)
    return c.ratio, c.ratio_ci_low, c.ratio_ci_high


STRATUM_SAID = {
    FAST_MODE: "; in the fast mode (--fast-mode)",
    SAME_MODE: "; over the blocks both ran in the same mode (--same-mode)",
}


@dataclass(frozen=True)
class GateRow:
    benchmark: str
    candidate: str
    unit: str
    direction: str
    ci: Interval | None  # the row's ratio and its interval (None: no ratio)
    p_value: float | None
    p_adjusted: float | None
    verdict: str
    why: str
    estimand: str = ALL_BLOCKS  # FAST_MODE/SAME_MODE: a compare --fast-mode/--same-mode row with two modes, gated so

    @property
    def ratio(self) -> float | None:
        return None if self.ci is None else self.ci.point

    @property
    def ci_low(self) -> float | None:
        return None if self.ci is None else self.ci.low

    @property
    def ci_high(self) -> float | None:
        return None if self.ci is None else self.ci.high


@dataclass(frozen=True)
class Gate:
    threshold: float
    alpha: float
    verdict: str  # the run's: regressed if any row is, else error if any, else inconclusive if any, else pass
    rows: tuple[GateRow, ...]
    reference: tuple = ()  # analysis.ReferenceCheck per candidate, when gated --reference
    runs: int = 1  # the runs gated together, each a replicate (over_runs)

    @property
    def exit_code(self) -> int:
        """0 pass (improvements included), 1 regressed, 4 a row failed (nothing to judge there), 3 inconclusive only."""
        return {"regressed": 1, "error": 4, "inconclusive": 3}.get(self.verdict, 0)


OVER_RUNS = "over runs"  # a row's estimand gated over several runs (over_runs)


def over_runs(runs: list[tuple[RunData, list[Comparison]]], alpha: float = ALPHA) -> list[Comparison]:
    """One comparison per row and candidate of several compare runs of the
    same targets, each run one replicate (its own boot of every target):
    the geometric mean of the runs' ratios, its interval and p-value
    Student's over the runs' log ratios (stats.ratio_over_replicates):
    what a guest instance carries of its own varies from run to run, so
    it is counted, where one run's interval over its blocks cannot hold it.  A row some run could
    not compare is left out (the gate says inconclusive or error, from the
    last run's outcomes).  UserError where the runs compare other targets."""
    names = [t.name for t in runs[0][0].targets]
    for data, _ in runs[1:]:
        if [t.name for t in data.targets] != names:
            theirs = ", ".join(t.name for t in data.targets)
            raise UserError(
                f"run {data.id} compares {theirs}; run {runs[0][0].id} compares {', '.join(names)}: "
                f"a gate over runs needs the same targets in each"
            )
    by: dict[tuple[str, str], list[Comparison]] = {}
    for _, cs in runs:
        for c in cs:
            if math.isfinite(c.ratio) and c.ratio > 0:
                by.setdefault((c.benchmark.name, c.candidate), []).append(c)
    out = []
    for got in by.values():
        if len(got) < len(runs):
            continue
        ci, p = stats.ratio_over_replicates([c.ratio for c in got], 1 - alpha)
        out.append(
            Comparison(
                benchmark=got[-1].benchmark,
                baseline=got[-1].baseline,
                candidate=got[-1].candidate,
                ci=ci,
                p_value=p,
                significant=p < alpha,
                stopped_by=OVER_RUNS,
            )
        )
    return out


def gate(data: RunData, comparisons: list[Comparison], threshold: float = 0.02, alpha: float = ALPHA) -> Gate:
    """Each compared row's verdict against a threshold (a fraction):
    regressed when significant after Holm's correction over every row with
    a test and worse than the threshold; improved likewise in the better
    direction; inconclusive when not regressed but its interval reaches past
    the threshold (or it has no interval); else pass.  A row the run
    could not compare is an error where the candidate or the baseline
    failed it (their message says why), else inconclusive."""
    tested = [c for c in comparisons if math.isfinite(c.p_value)]
    adjusted = dict(
        zip([(c.benchmark.name, c.candidate) for c in tested], holm([c.p_value for c in tested]), strict=True)
    )
    rows = []
    for c in comparisons:
        p_adj = adjusted.get((c.benchmark.name, c.candidate))
        verdict, why = _verdict(c, p_adj, threshold, alpha)
        rows.append(
            GateRow(
                benchmark=c.benchmark.name,
                candidate=c.candidate,
                unit=c.benchmark.unit,
                direction=c.benchmark.direction,
                ci=c.ci,
                p_value=c.p_value,
                p_adjusted=p_adj,
                verdict=verdict,
                why=why + STRATUM_SAID.get(c.estimand, ""),
                estimand=c.estimand,
            )
        )
    rows += _uncompared(data, {(c.benchmark.name, c.candidate) for c in comparisons})
    found = {r.verdict for r in rows}
    verdict = next((v for v in ("regressed", "error", "inconclusive") if v in found), "pass")
    return Gate(threshold, alpha, verdict, tuple(rows))


def _verdict(c: Comparison, p_adj: float | None, threshold: float, alpha: float) -> tuple[str, str]:
    """A compared row's verdict and why, its Holm-adjusted p given."""
    limit = 1 + threshold
    r, _lo, hi = _worse(c)
    significant = p_adj is not None and p_adj < alpha
    if significant and r > limit:
        return "regressed", f"worse by {r - 1:+.2%} beyond {threshold:.2%}, adjusted p {p_adj:.3g}"
    if significant and r < 1 / limit:
        return "improved", f"better by {1 - r:.2%} beyond {threshold:.2%}, adjusted p {p_adj:.3g}"
    if not math.isfinite(hi):
        return "inconclusive", "no interval (too few blocks)"
    if hi > limit:
        return "inconclusive", f"the interval reaches {hi - 1:+.2%}, past {threshold:.2%}" + (
            f"; adjusted p {p_adj:.3g}" if p_adj is not None else ""
        )
    return "pass", f"within {threshold:.2%}"


def _uncompared(data: RunData, compared: set[tuple[str, str]]) -> list[GateRow]:
    """A row per candidate and benchmark the run could not compare: an error
    where the candidate or the baseline failed it, else inconclusive."""
    rows = []
    names = [t.name for t in data.targets]
    for spec in data.benchmarks:
        for cand in names[1:]:
            if (spec.name, cand) not in compared and (cand, spec.name) in data.outcomes:
                how, reason = data.outcomes[(cand, spec.name)]
                base_how, base_reason = data.outcomes.get((names[0], spec.name), ("", ""))
                if how != "error" and base_how == "error":
                    how, reason = "the baseline's error", base_reason
                rows.append(
                    GateRow(
                        benchmark=spec.name,
                        candidate=cand,
                        unit=spec.unit,
                        direction=spec.direction,
                        ci=None,
                        p_value=None,
                        p_adjusted=None,
                        verdict="error" if how in ("error", "the baseline's error") else "inconclusive",
                        why=f"no ratio: {how}{': ' + reason if reason else ''}"[:300],
                    )
                )
    return rows


# -- facts ----------------------------------------------------------------------------
def known_as(data: RunData) -> dict[str, str]:
    """Each target's name across runs: its label= where it has one (so that
    `local:label=b` and `local:label=b,inject=3` are one series, the option
    a fact that changed), else its target string."""
    return {t.name: str(t.facts.get("label") or t.name) for t in data.targets}


OPTION_DEFAULTS = {f.name: f.default for f in fields(RunConfig)}  # every option a run's configuration stores


def flat_facts(data: RunData) -> dict[str, str]:
    """Everything a run says about where and how it ran, flattened to
    'what.key' -> text: vmtax's version, its host, its options, and every
    target's facts (versions of QEMU, kernels, CPU model and microcode...).
    An option a run stored before it existed reads as its default, as the
    run ran (not as a fact that changed when vmtax learned it)."""
    out = {"vmtax.version": str(data.vmtax_version), "run.host": str(data.host)}
    for k, v in sorted({**OPTION_DEFAULTS, **data.config}.items()):
        if k not in VOLATILE and k not in ("targets", "benchmarks"):
            out[f"option.{k}"] = _text(v)
    names = known_as(data)
    for t in data.targets:
        _flatten(names[t.name], {"accel": t.accel, **t.facts}, out)
    return out


def _flatten(prefix: str, value, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in VOLATILE:
                _flatten(f"{prefix}.{k}", v, out)
    else:
        out[prefix] = _text(value)


def _text(v) -> str:
    return "-" if v is None else str(v)


def facts_that_differ(a: dict[str, str], b: dict[str, str]) -> list[tuple[str, str, str]]:
    """(key, in a, in b) for every fact that differs ('absent' where one lacks it)."""
    return [
        (k, a.get(k, "absent"), b.get(k, "absent"))
        for k in sorted(a.keys() | b.keys())
        if a.get(k, "absent") != b.get(k, "absent")
    ]


# -- diff -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Change(Bounded):
    """A ratio in run A and in run B, and B's over A's with its interval."""

    benchmark: str
    baseline: str
    candidate: str
    unit: str
    direction: str
    ratio_a: float
    ratio_b: float
    ci: Interval  # the change, B's ratio over A's, and its interval
    estimand_a: str = ALL_BLOCKS  # which blocks each run's ratio is over (Comparison.estimand)
    estimand_b: str = ALL_BLOCKS
    candidate_b: str = ""  # run B's candidate, where the diff paired two single candidates (Diff.paired)

    def __post_init__(self):
        if not self.candidate_b:
            object.__setattr__(self, "candidate_b", self.candidate)

    @property
    def change(self) -> float:
        return self.ci.point


def _log_se(c: Comparison) -> float:
    """The standard error of log(ratio) that its 95% interval implies (inf: none)."""
    if not (c.ratio_ci_low > 0 and math.isfinite(c.ratio_ci_high)):
        return math.inf
    return (math.log(c.ratio_ci_high) - math.log(c.ratio_ci_low)) / (2 * Z95)


def ratio_of_ratios(a: Comparison, b: Comparison) -> Interval:
    """B's ratio over A's, and its 95% interval: the two runs are
    independent, so the variances of the log ratios add (each read off its
    run's interval, taken as symmetric in log)."""
    change = b.ratio / a.ratio
    se = math.hypot(_log_se(a), _log_se(b))
    if not math.isfinite(se):
        return Interval(change, 0.0, math.inf)
    return Interval(change, change * math.exp(-Z95 * se), change * math.exp(Z95 * se))


@dataclass
class Diff:
    run_a: str
    run_b: str
    changes: list[Change]
    facts: list[tuple[str, str, str]]
    only_a: list[str] = field(default_factory=list)  # targets in one run only
    only_b: list[str] = field(default_factory=list)
    paired: tuple[str, str, str] | None = None  # (baseline, A's candidate, B's): two single candidates paired


def _single_pair(a: RunData, b: RunData) -> tuple[str, str, str] | None:
    """(baseline, A's candidate, B's) where each run compares one candidate
    with a baseline known alike and the candidates are known apart (a
    before/after pair: label=old, label=new); None otherwise."""
    as_a, as_b = known_as(a), known_as(b)
    if len(a.targets) != 2 or len(b.targets) != 2:
        return None
    (base_a, cand_a), (base_b, cand_b) = ([as_a[t.name] for t in a.targets], [as_b[t.name] for t in b.targets])
    return (base_a, cand_a, cand_b) if base_a == base_b and cand_a != cand_b else None


def diff(a: RunData, cs_a: list[Comparison], b: RunData, cs_b: list[Comparison]) -> Diff:
    """The same (baseline, candidate, benchmark) in two runs; where each run
    compares a single candidate with the same baseline, those two
    candidates, paired (Diff.paired says so).  ValueError when the runs
    share no compared row and cannot be paired so."""
    as_a, as_b = known_as(a), known_as(b)
    names_a, names_b = list(as_a.values()), list(as_b.values())
    paired = _single_pair(a, b)
    if paired:  # B's candidate read as A's
        as_b = {n: paired[1] if known == paired[2] else known for n, known in as_b.items()}
    by_b = {(as_b[c.baseline], as_b[c.candidate], c.benchmark.name): c for c in cs_b}
    changes = []
    for ca in cs_a:
        cb = by_b.get((as_a[ca.baseline], as_a[ca.candidate], ca.benchmark.name))
        if cb is None:
            continue
        changes.append(
            Change(
                benchmark=ca.benchmark.name,
                baseline=as_a[ca.baseline],
                candidate=as_a[ca.candidate],
                unit=ca.benchmark.unit,
                direction=ca.benchmark.direction,
                ratio_a=ca.ratio,
                ratio_b=cb.ratio,
                ci=ratio_of_ratios(ca, cb),
                estimand_a=ca.estimand,
                estimand_b=cb.estimand,
                candidate_b=paired[2] if paired else "",
            )
        )
    if not changes:
        common = sorted(set(names_a) & set(names_b))
        raise ValueError(
            f"runs {a.id} and {b.id} have no compared row in common (targets: "
            f"{', '.join(names_a)} | {', '.join(names_b)}"
            f"{'; in both: ' + ', '.join(common) if common else '; none in both'})"
        )
    facts_b = flat_facts(b)
    if paired:  # B's candidate's facts under A's candidate's name: side by side, not 'absent' in one run
        facts_b = {
            (paired[1] + k[len(paired[2]) :] if k.startswith(paired[2] + ".") else k): v for k, v in facts_b.items()
        }
        return Diff(a.id, b.id, changes, facts_that_differ(flat_facts(a), facts_b), paired=paired)
    return Diff(
        a.id,
        b.id,
        changes,
        facts_that_differ(flat_facts(a), facts_b),
        [n for n in names_a if n not in names_b],
        [n for n in names_b if n not in names_a],
    )


# -- history --------------------------------------------------------------------------
@dataclass(frozen=True)
class Point(Bounded):
    run: str
    started: float
    ci: Interval  # the ratio and its interval
    estimand: str = ALL_BLOCKS  # which blocks the ratio is over (Comparison.estimand)

    @property
    def ratio(self) -> float:
        return self.ci.point


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first point of the new level
    run: str
    before: float  # mean ratio before and after
    after: float
    p_value: float
    facts: tuple[tuple[str, str, str], ...]  # what differs between the run before and this one


@dataclass
class Series:
    benchmark: str
    baseline: str
    candidate: str
    unit: str
    direction: str
    points: list[Point]
    changes: list[ChangePoint] = field(default_factory=list)


def series(runs: list[tuple[RunData, list[Comparison]]]) -> list[Series]:
    """Each (baseline, candidate, benchmark)'s ratio over the runs, oldest
    first; targets matched by what they are known as (known_as)."""
    out: dict[tuple[str, str, str], Series] = {}
    for data, cs in sorted(runs, key=lambda r: r[0].started):
        names = known_as(data)
        for c in cs:
            key = (names[c.baseline], names[c.candidate], c.benchmark.name)
            s = out.setdefault(key, Series(c.benchmark.name, *key[:2], c.benchmark.unit, c.benchmark.direction, []))
            s.points.append(Point(data.id, data.started, c.ci, c.estimand))
    return list(out.values())


def change_points(
    s: Series, facts: dict[str, dict[str, str]], max_pvalue: float = 0.01, window: int = 50
) -> list[ChangePoint]:
    """Where the series' level changed (Otava's E-divisive means with a
    t-test, at max_pvalue), each with the facts that differ between the run
    before it and the run at it (facts: run id -> flat_facts), the row's
    estimand first where it changed there (a fast-mode ratio after an
    all-blocks one, compare --fast-mode)."""
    if len(s.points) < 4:
        return []
    from otava.analysis import compute_change_points  # numpy and scipy: loaded only for history

    values = [math.log(p.ratio) for p in s.points]
    found, _ = compute_change_points(values, window_len=window, max_pvalue=max_pvalue)
    out = []
    for cp in found:
        i = int(cp.index)
        if not 0 < i < len(s.points):
            continue
        before = math.exp(sum(values[:i]) / i)
        after = math.exp(sum(values[i:]) / (len(values) - i))
        at, prev = s.points[i], s.points[i - 1]
        moved = [("estimand", prev.estimand, at.estimand)] if prev.estimand != at.estimand else []
        out.append(
            ChangePoint(
                i,
                at.run,
                before,
                after,
                float(cp.stats.pvalue),
                tuple(moved + facts_that_differ(facts.get(prev.run, {}), facts.get(at.run, {}))),
            )
        )
    return out
