"""From a scale run's stored samples to its figures per instance count
(`vmtax scale`; the run itself is scale.py).  Pure: the live run and
`vmtax show` both read the store through here.

A stage is N copies of a target measured at once, stored as one target
named `TARGET xN` whose samples carry their instance and their round (the
sample's block).  In a round, every instance has a throughput: for an
agent row, operations per second over its timed samples (1e9 * ops / ns:
what it got done while the others ran too); for a workload, the rate its
tool reports.  Per round, the aggregate is their sum and Jain's index
their fairness; across rounds (the units of replication, as processes are
for `run`), each figure is a mean with its Student 95% interval.  The
slowdown is one instance alone (N=1) over one instance of N: the ratio of
the per-instance means, its interval by the delta method.
"""

from __future__ import annotations

from collections import defaultdict

from . import stats
from .model import BenchSpec, Estimate, Interval, RunData, Sample, ScalePoint


def rate_unit(spec: BenchSpec) -> str:
    """The unit of an instance's throughput on this row."""
    return "ops/s" if spec.agent_row else spec.unit


def is_throughput(spec: BenchSpec) -> bool:
    """Whether a row gives a throughput: an agent row (time per operation)
    or a workload's rate (higher is better); a workload's total time does not."""
    return spec.agent_row or spec.direction == "higher"


def instance_rates(samples: list[Sample], spec: BenchSpec) -> dict[int, float]:
    """instance -> its throughput over these samples (one round's)."""
    ops: dict[int, float] = defaultdict(float)
    ns: dict[int, float] = defaultdict(float)
    vals: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        if s.warmup or s.counting or s.benchmark != spec.name:
            continue
        if spec.agent_row:
            ops[s.instance] += s.ops
            ns[s.instance] += s.value * s.ops
        else:
            vals[s.instance].append(s.value)
    if spec.agent_row:
        return {i: 1e9 * ops[i] / ns[i] for i in sorted(ops) if ns[i] > 0}
    return {i: sum(v) / len(v) for i, v in sorted(vals.items())}


def round_rates(samples: list[Sample], spec: BenchSpec, n: int) -> dict[int, list[float]]:
    """round -> every instance's throughput in it, in instance order; only
    rounds in which all n instances delivered (a round cut short by a
    failure or a Ctrl-C is left out)."""
    by_round: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        by_round[s.block].append(s)
    out = {}
    for r in sorted(by_round):
        rates = instance_rates(by_round[r], spec)
        if len(rates) == n:
            out[r] = [rates[i] for i in sorted(rates)]
    return out


def estimate(values: list[float], unit: str, lo: float | None = None, hi: float | None = None) -> Estimate:
    """The mean of values with its Student 95% interval (clipped to [lo, hi])."""
    s = stats.summarize(values)
    low, high = s.ci_low, s.ci_high
    if lo is not None:
        low = max(low, lo)
    if hi is not None:
        high = min(high, hi)
    return Estimate(Interval(s.mean, low, high), unit)


def stage_n(facts: dict) -> int | None:
    scale = facts.get("scale")
    return scale.get("n") if isinstance(scale, dict) else None


def points(data: RunData) -> dict[str, list[ScalePoint]]:
    """benchmark -> its ScalePoints, by increasing N (stages with no
    complete round are left out)."""
    by_key: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for s in data.samples:
        by_key[(s.target, s.benchmark)].append(s)
    stages = sorted((t for t in data.targets if stage_n(t.facts)), key=lambda t: stage_n(t.facts) or 0)
    out: dict[str, list[ScalePoint]] = {}
    for spec in data.benchmarks:
        rows, alone = [], None
        for t in stages:
            scale = t.facts["scale"]
            n = int(scale["n"])
            rounds = round_rates(by_key.get((t.name, spec.name), []), spec, n)
            if not rounds:
                continue
            means = [sum(v) / n for v in rounds.values()]
            if n == 1:
                alone = means
            rows.append(
                _point(
                    spec=spec,
                    stage=t.name,
                    scale=scale,
                    n=n,
                    rounds=rounds,
                    means=means,
                    alone=alone,
                    outcome=data.outcomes.get((t.name, spec.name), ("interrupted", "")),
                )
            )
        out[spec.name] = rows
    return out


def _point(
    spec: BenchSpec,
    stage: str,
    scale: dict,
    n: int,
    rounds: dict[int, list[float]],
    means: list[float],
    alone: list[float] | None,
    outcome: tuple[str, str],
) -> ScalePoint:
    unit = rate_unit(spec)
    per_round = scale.get("rounds", {}).get(spec.name, [])
    cpu = [r["host_cpu_pct"] for r in per_round if r.get("round") in rounds and r.get("host_cpu_pct") is not None]
    mem: dict[int, float] = {}
    for r in per_round:
        for i, mb in enumerate(r.get("host_mem_mib") or []):
            mem[i] = max(mem.get(i, 0.0), mb)
    if n == 1:
        slowdown = Estimate(Interval(1.0, 1.0, 1.0), "x")  # the reference itself
    elif alone:
        slowdown = Estimate(stats.ratio_unpaired(alone, means), "x")
    else:
        slowdown = None
    instances = list(zip(*rounds.values(), strict=True))  # per instance, its rate in each round
    return ScalePoint(
        n=n,
        rounds=len(rounds),
        aggregate=estimate([sum(v) for v in rounds.values()], unit, lo=0.0),
        per_instance=tuple(estimate(list(v), unit, lo=0.0) for v in instances),
        jain=(
            Estimate(Interval(1.0, 1.0, 1.0), "")
            if n == 1
            else estimate([stats.jain(v) for v in rounds.values()], "", lo=1.0 / n, hi=1.0)
        ),
        slowdown=slowdown,
        host_cpu_pct=estimate(cpu, "%", lo=0.0, hi=100.0) if cpu else None,
        host_mem_mb=tuple(mem[i] for i in sorted(mem)),
        vcpus=int(scale.get("vcpus", n)),
        host_cpus=int(scale.get("host_cpus", 0)),
        stopped_by=outcome[0],
        reason=outcome[1],
        round_s=tuple(r["seconds"] for r in per_round if r.get("round") in rounds and r.get("seconds")),
    )


def drawn_out(p: ScalePoint, round_time: float) -> bool:
    """Whether this N's rounds lasted well past the timed work asked: the
    copies did not run side by side all along (a workload's own start-up
    inside each copy is not behind the barrier): a copy that ran with
    fewer others beside it looks faster, and the aggregate and the spread
    mix the start-up's cost with the share each copy got."""
    return bool(p.round_s) and max(p.round_s) > 1.25 * round_time + 0.25


def per_instance_spread(p: ScalePoint) -> tuple[float, float, float]:
    """(mean, min, max) of the instances' throughputs."""
    v = [e.value for e in p.per_instance]
    return sum(v) / len(v), min(v), max(v)
