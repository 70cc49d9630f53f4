"""The report of `vmtax doctor`: what the processes it ran say about this
host's noise now -- the spread between processes, two modes, the noise by
distance -- and what precision a budget can buy, as lines for people and
as the JSON document (its keys a contract: add, never rename)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .. import doctor, noise, plan, stats
from ..model import BenchSpec
from ..plan import RunConfig
from .units import fmt_duration, fmt_value


@dataclass(frozen=True)
class Checkup:
    """What doctor measured, and the compare it judges a budget for."""

    target: str
    spec: BenchSpec
    cpu: int | None
    means: list[float]  # each process's mean per operation
    starts: list[float]  # when each began
    process_s: float  # what a process costs, in seconds
    refs: list[float]  # each process's reference loop, ns per step
    budget: float  # --max-time, seconds
    rows: int
    targets: int
    times: list[float]  # the series of short samples for the noise by distance: when each began
    values: list[float]  # and its value


def _halfwidth(h: float) -> float | None:
    return h if math.isfinite(h) else None


def _about(h: float, what: str = "blocks") -> str:
    return f"±{h:.1%}" if math.isfinite(h) else f"unbounded (fewer than {stats.MIN_BLOCKS} {what})"


def report(c: Checkup) -> tuple[dict, list[str]]:
    """(the JSON document, the lines for people)."""
    spec, means = c.spec, c.means
    n = doctor.noise(means, c.starts)
    seen = doctor.state_seen(means, c.refs, n)
    blocks, half = doctor.buyable(means, c.process_s, c.budget * 0.9, c.rows, c.targets)
    pin = f"pinned to host CPU {c.cpu}" if c.cpu is not None else "unpinned"
    doc: dict[str, Any] = {
        "target": c.target,
        "benchmark": spec.name,
        "unit": spec.unit,
        "processes": n.processes,
        "pinned_cpu": c.cpu,
        "mean": n.mean,
        "cv": n.cv,
        "bimodality": n.bimodality,
        "bimodal": n.bimodal,
        "modes": (
            {
                "fast": n.fast,
                "slow": n.slow,
                "slow_share": n.slow_share,
                "mode_seconds": n.run_s,
                "bic_gain": n.modes.bic_gain,
                "separation": n.modes.separation,
            }
            if n.modes
            else None
        ),
        "process_seconds": c.process_s,
        "reference": (
            {
                "mean_ns_per_step": seen.ref_mean,
                "cv": seen.ref_cv,
                "correlation": seen.corr,
                "fast_mode": seen.ref_fast,
                "slow_mode": seen.ref_slow,
                "separates_modes": seen.separates,
            }
            if seen
            else None
        ),
        "budget": {
            "max_time": c.budget,
            "rows": c.rows,
            "targets": c.targets,
            "blocks": blocks,
            "ratio_ci_halfwidth": _halfwidth(half),
            "fast_mode": None,
            "same_mode": None,
        },
    }
    lines = [
        f"{spec.name} on {c.target} ({pin}): {n.processes} fresh processes over "
        f"{c.starts[-1] - c.starts[0] + c.process_s:.0f} s",
        f"  mean {fmt_value(n.mean, spec.unit)} per operation; between-process SD {n.cv:.1%} of the mean",
        _modes_line(n, spec),
        f"  a process costs {c.process_s:.2f} s: a compare of {c.rows} rows on {c.targets} targets in "
        f"{fmt_duration(c.budget)} buys about {blocks} blocks a row, a ratio's 95% CI about {_about(half)}"
        " at the spread between processes run as a block's are (agent rows like this one; a slower "
        "target's blocks take longer and share less of a lasting state)",
    ]
    if n.modes is not None:  # what --fast-mode and --same-mode buy
        both, fast_half = doctor.buyable_fast(means, n, blocks, c.targets)
        same, slow, same_half = doctor.buyable_same(means, n, blocks, c.targets)
        doc["budget"]["fast_mode"] = {"blocks": both, "ratio_ci_halfwidth": _halfwidth(fast_half)}
        doc["budget"]["same_mode"] = {"blocks": same, "slow_blocks": slow, "ratio_ci_halfwidth": _halfwidth(same_half)}
        lines += [
            f"  with compare --fast-mode: about {both} of those blocks both in the fast mode (as these "
            f"processes fell), a fast-mode ratio's 95% CI about {_about(fast_half, 'such blocks')}",
            f"  with compare --same-mode: about {same} of those blocks both in one mode ({same - slow} fast, "
            f"{slow} slow), a same-mode ratio's 95% CI about {_about(same_half, 'such blocks')}",
        ]
    lines += noise_by_distance(doc, c.times, c.values, c.process_s, c.targets, blocks)
    if seen:
        r = "r n/a (no spread)" if seen.corr is None else f"r = {seen.corr:+.2f}"
        lines.append(
            f"  the reference loop around each sample (the host's state): {seen.ref_mean:.3g} ns a step, "
            f"between-process SD {seen.ref_cv:.1%}; with {spec.name} across processes {r}"
        )
        if seen.separates is not None:
            lines.append(
                f"  in {spec.name}'s modes the reference took {seen.ref_fast:.3g} and {seen.ref_slow:.3g} "
                "ns a step: it " + ("separates them" if seen.separates else "does not separate them")
            )
    return doc, lines


def _modes_line(n: doctor.Noise, spec: BenchSpec) -> str:
    m = n.modes  # there where n is bimodal
    if m is not None:
        return (
            f"  two modes: {fmt_value(m.fast, spec.unit)} ({1 - m.slow_share:.0%} of processes) and "
            f"{fmt_value(m.slow, spec.unit)} ({m.slow_share:.0%}); a mode lasts {n.run_s:.1f} s on average "
            f"(two normals fit the logs better than one by {m.bic_gain:.0f} in BIC, "
            f"{m.separation:.1f} SDs apart)"
        )
    if n.processes < stats.MODES_MIN_UNITS:
        return f"  one mode (too few processes to call two: {stats.MODES_MIN_UNITS} needed)"
    return (
        f"  one mode (two modes need two normals on the logs to fit better than one by "
        f"{stats.MODES_BIC_GAIN:g} in BIC, {stats.MODES_SEPARATION:g} SDs apart, "
        f"{stats.MODES_MIN_SHARE:.0%} of processes each)"
    )


def noise_by_distance(
    doc: dict, times: list[float], values: list[float], process_s: float, targets: int, blocks: int
) -> list[str]:
    """doctor's noise by distance (noise.py): into its JSON document, and
    its lines: the curve, what it says of the distance vmtax pairs at, and
    what lockstep pairs buy in `blocks` blocks a row: a block's ratio is
    the mean of its pairs', each as noisy as two samples a step apart, so
    (the host's noise alone, pairs as good as independent) its SD is that
    over the square root of the pairs a block takes."""
    curve = noise.by_distance(times, values)
    unpaired = noise.unpaired_sd_pct(values)
    lag = sum(k * w for k, w in doctor.slot_lags(targets).items())  # a block's two sides, in processes
    step_ms, blocks_ms = RunConfig.step_ms, process_s * lag * 1e3
    lock_sd, block_sd = noise.at(curve, step_ms), noise.at(curve, blocks_ms)
    doc["noise_by_distance"] = [{"ms": c.ms, "sd_pct": round(c.sd_pct, 3), "pairs": c.pairs} for c in curve]
    doc["noise_unpaired_sd_pct"] = round(unpaired, 3) if math.isfinite(unpaired) else None
    sizes = plan.step_sizes("b", {"b": (1000, 1000.0)}, RunConfig())
    pairs = sizes.rounds - sizes.warmup
    lock_half = (
        noise.lockstep_halfwidth(lock_sd, pairs, blocks) if lock_sd is not None and blocks >= stats.MIN_BLOCKS else None
    )
    doc["pairing"] = {
        "lockstep_ms": step_ms,
        "lockstep_sd_pct": lock_sd,
        "blocks_ms": round(blocks_ms, 1),
        "blocks_sd_pct": block_sd,
        "lockstep_pairs_per_block": pairs,
        "lockstep_ratio_ci_halfwidth": lock_half,
    }
    if not curve:
        return ["  noise by distance: too few samples to tell"]
    out = [
        f"  noise by distance (SD of the log ratio of two samples this far apart, one process, "
        f"{len(values)} samples over {times[-1] - times[0]:.1f} s):",
        "    "
        + " · ".join(f"{c.ms:g} ms {c.sd_pct:.1f}%" for c in curve)
        + (f" · at random {unpaired:.1f}%" if math.isfinite(unpaired) else ""),
    ]
    if lock_sd is not None and block_sd is not None and block_sd > 0:
        out.append(
            f"  a compare pairs a baseline's sample with a candidate's about {step_ms:g} ms apart "
            f"(lockstep, the default; a target k times slower: (1+k)×{step_ms / 2:g} ms): {lock_sd:.1f}% a pair"
            + (f" or less (the curve starts at {curve[0].ms:g} ms)" if step_ms < curve[0].ms else "")
            + ", against "
            f"{block_sd:.1f}% {blocks_ms:.0f} ms apart (--pairing blocks, processes of "
            f"{process_s * 1e3:.0f} ms): where the host's noise is what varies, the same interval from about "
            f"{(lock_sd / block_sd) ** 2:.2g} times the pairs"
        )
    if lock_half is not None:
        out.append(
            f"  lockstep blocks of {pairs} pairs: {blocks} blocks a row give a ratio's 95% CI about "
            f"±{lock_half:.2%} from the host's noise alone (what differs between processes comes on top)"
        )
    return out
