"""`vmtax explain`: why a target is slower, per operation, baseline and
candidates side by side -- what each target's own kernel counted (page
faults, context switches, instructions, CPU user/system) and what it cost
the host (CPU, context switches, system calls, VM exits) -- with a one-line
reading where the figures say something clear.

One view-model (rows of cells, readings) and thin writers for the terminal,
Markdown, JSON and HTML.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

from ..metrics import PER_UNIT, describe, order, unit_of
from ..model import BenchSpec, Comparison, Measurement, RunData, Summary
from ..suite.workloads import of_spec
from . import table
from .mdkit import md_cell
from .units import fmt_value, json_number

# The rows of the view, in order: (key, label, unit); a key is a metric name,
# "time" (the benchmark's own figure) or "cpi" (cycles / instructions).
ROWS = [
    ("time", "time / op", "ns"),
    ("instructions", "instructions / op", ""),
    ("cpi", "CPI", ""),
    ("instructions_user", "  of which user", ""),
    ("page_faults", "page faults / op", ""),
    ("context_switches", "context switches / op", ""),
    ("cpu_migrations", "CPU migrations / op", ""),
    ("syscalls", "system calls / op", ""),
    ("cpu_user_ns", "CPU user / op", "ns"),
    ("cpu_sys_ns", "CPU system / op", "ns"),
    ("dtlb_misses", "dTLB misses / op", ""),
    ("llc_misses", "LLC misses / op", ""),
    ("host_cpu_ns", "host CPU / op", "ns"),
    ("host_cpu_user_ns", "  host user", "ns"),
    ("host_cpu_sys_ns", "  host system", "ns"),
    ("host_cpu_sentry_ns", "  of which Sentry", "ns"),
    ("host_cpu_gofer_ns", "  of which Gofer", "ns"),
    ("host_context_switches", "host ctx switches / op", ""),
    ("host_syscalls", "host syscalls / op", ""),
    ("host_syscalls_sentry", "  of which Sentry", ""),
    ("host_syscalls_gofer", "  of which Gofer", ""),
    ("exits", "VM exits / op", ""),
    ("hypercalls", "hypercalls / op", ""),
    ("xen_pf_bounces", "Xen: #PF bounced / op", ""),
    ("xen_ptwr_emulations", "Xen: PTE writes emulated / op", ""),
    ("xen_privop_emulations", "Xen: privops emulated / op", ""),
    ("xen_trap_bounces", "Xen: traps bounced / op", ""),
]
BY_TYPE = ("exits_", "hypercalls_")  # a family's rows by reason or type, each under its total


@dataclass
class Cell:
    mean: float | None
    low: float | None = None
    high: float | None = None


Row = tuple[str, str, str, list[Cell]]  # a Block's row: key, label, unit, a cell per target


@dataclass
class Block:
    """One benchmark: its rows of cells (one per target), and readings."""

    benchmark: str
    description: str
    unit: str
    targets: list[str]
    rows: list[Row] = field(default_factory=list)
    readings: list[str] = field(default_factory=list)
    per: str = "per operation"  # a workload's: per unit of its work


def _cell(s: Summary | None) -> Cell:
    if s is None:
        return Cell(None)
    lo, hi = (s.ci_low, s.ci_high) if math.isfinite(s.ci_high) else (None, None)
    return Cell(s.mean, lo, hi)


def _cpi(m: Measurement) -> Cell:
    c, i = m.metrics.get("cycles"), m.metrics.get("instructions")
    return Cell(c.mean / i.mean) if c and i and i.mean > 0 else Cell(None)


def view(data: RunData, ms: list[Measurement], cs: list[Comparison]) -> list[Block]:
    names = [t.name for t in data.targets]
    facts = {t.name: {**t.facts, "accel": t.accel or t.facts.get("accel")} for t in data.targets}
    mby = {(m.target, m.benchmark.name): m for m in ms}
    blocks = []
    for spec in data.benchmarks:
        present = [n for n in names if (n, spec.name) in mby and mby[(n, spec.name)].summary]
        if not present:
            continue
        if spec.kind == "workload":
            w = of_spec(spec.name)
            # its host cost per unit of work, once per workload (each figure's samples carry the same)
            if w is not None and w.work and spec.name == w.specs()[0].name:
                blocks.append(_workload_block(spec, w.work, present, {n: mby[(n, spec.name)] for n in present}))
            continue
        measured = {n: mby[(n, spec.name)] for n in present}
        b = Block(spec.name, spec.description, spec.unit, present, rows=_rows(spec, present, measured))
        b.readings = readings(spec.name, present, measured, facts)
        blocks.append(b)
    return blocks


def _keys(measured: dict[str, Measurement]) -> list[tuple[str, str, str]]:
    """The rows' (key, label, unit): ROWS, and each count by type that a
    target has under its family's total."""
    extra = order({k for m in measured.values() for k in m.metrics if k.startswith(BY_TYPE)})
    keys = [(k, lbl, u) for k, lbl, u in ROWS]
    for k in extra:  # each under its family's total
        at = next(i for i, row in enumerate(keys) if row[0] == k.split("_")[0]) + 1
        while at < len(keys) and keys[at][0].startswith(k.split("_")[0] + "_"):
            at += 1
        keys.insert(at, (k, "  " + describe(k).label, ""))
    return keys


def _rows(spec: BenchSpec, present: list[str], measured: dict[str, Measurement]) -> list[Row]:
    """An agent row's rows of cells, one cell per target: its time, CPI and counts."""
    rows = []
    for key, label, unit in _keys(measured):
        if key == "time":
            cells = [_cell(measured[n].summary) for n in present]
            unit = spec.unit
        elif key == "cpi":
            cells = [_cpi(measured[n]) for n in present]
        else:
            cells = [_cell(measured[n].metrics.get(key)) for n in present]
        # an exit reason no target met is left out: a KVM host counts a score of them
        if any(c.mean for c in cells) if key.startswith(BY_TYPE) else any(c.mean is not None for c in cells):
            rows.append((key, label, unit, cells))
    return rows


def _workload_block(spec, work: str, present: list[str], measured: dict[str, Measurement]) -> Block:
    """A workload's figure and its host cost per unit of work, seed 003's
    figures of merit, with a reading of how much more a unit costs."""
    b = Block(spec.name, spec.description, spec.unit, present, per=f"per {work}")
    b.rows.append(
        (
            "time",
            f"the figure: {spec.name.split('.', 1)[1]} ({spec.unit})",
            spec.unit,
            [_cell(measured[n].summary) for n in present],
        )
    )
    for key in PER_UNIT:
        cells = [_cell(measured[n].metrics.get(key)) for n in present]
        if any(c.mean is not None for c in cells):
            b.rows.append(
                (
                    key,
                    f"{describe(key).label.replace(' per unit', '')} ({unit_of(key, work)})",
                    unit_of(key, work),
                    cells,
                )
            )
    base = measured[present[0]]
    c0, s0 = _m(base, "host_cpu_per_unit"), _m(base, "host_context_switches_per_unit")
    for name in present[1:]:
        c, sw = _m(measured[name], "host_cpu_per_unit"), _m(measured[name], "host_context_switches_per_unit")
        system = _m(measured[name], "host_cpu_sys_per_unit")
        if c and c0 and c > 1.5 * c0:
            split = f", {100 * system / c:.0f}% of it in the host kernel" if system is not None and c > 0 else ""
            more = (
                f"; {_g(sw)} host context switches per {work} against {_g(s0)}"
                if sw is not None and s0 is not None and sw > 1.5 * s0
                else ""
            )
            b.readings.append(
                f"{name}: {c / c0:.3g}x the host CPU per {work} of {present[0]} "
                f"({_g(c)} against {_g(c0)} {unit_of('host_cpu_per_unit', work)}){split}{more}"
            )
    return b


# -- readings --------------------------------------------------------------------
def _m(m: Measurement, key: str) -> float | None:
    s = m.metrics.get(key)
    return s.mean if s is not None else None


def readings(bench: str, targets: list[str], ms: dict[str, Measurement], facts: dict[str, dict]) -> list[str]:
    """What the counts say, one line each, where they say it clearly; never
    more than the figures show."""
    base = targets[0]
    out: list[str] = []
    b = ms[base]
    assert b.summary is not None, "present: measured"
    for name in targets[1:]:
        said = len(out)
        m = ms[name]
        assert m.summary is not None, "present: measured"
        kind, accel = facts[name].get("target_kind"), facts[name].get("accel")
        t, t0 = m.summary.mean, b.summary.mean
        if facts[name].get("gvisor_platform"):
            out.append(_gvisor_reading(name, bench, m, b, facts[name]))
        else:
            out += _host_tasks_reading(name, bench, m, b, base, kind)
        # against the guest's CPU time in the same counted batches: counting
        # slows the guest (its syscall tracepoint), so not the timed figure
        user, exits, guest = _m(m, "host_cpu_user_ns"), _m(m, "exits"), _m(m, "task_clock_ns")
        if kind == "qemu" and accel == "tcg" and user is not None and guest and 0.65 < user / guest < 1.5:
            out.append(
                f"{name}: host user CPU ≈ guest CPU time ({fmt_value(user, 'ns')} against "
                f"{fmt_value(guest, 'ns')} per op, counted batches), no VM exits: TCG emulates "
                "every instruction in user space, at a cost that follows the instructions, not "
                "the kernel entries"
            )
        if exits is not None and exits >= 0.5:
            out.append(_exits_reading(name, exits, m))
        out += _xen_reading(name, m)
        pf, pf0 = _m(m, "page_faults"), _m(b, "page_faults")
        if pf is not None and pf0 is not None and pf > 1.5 * pf0 + 0.05:
            out.append(f"{name}: {_g(pf)} page faults per op against {_g(pf0)} on {base}")
        if t > 1.1 * t0 and _same_counts(m, b) and len(out) == said:
            out.append(
                f"{name}: the same counts per op as {base} within 10%, {t / t0:.2f}x the time: "
                "the operation is the same, each step of it costs more"
            )
    return out


def _host_tasks_reading(name: str, bench: str, m: Measurement, b: Measurement, base: str, kind) -> list[str]:
    """A target whose kernel runs in other host tasks: its host context
    switches (and syscalls) per op against the baseline's (a baseline with
    no host count of its own, a Xen guest's, says nothing to compare with)."""
    hcs, hsc = _m(m, "host_context_switches"), _m(m, "host_syscalls")
    bcs, bsc = _m(b, "host_context_switches"), _m(b, "host_syscalls")
    if not (hcs is not None and hcs >= 1 and bcs is not None and bcs < 0.5 and kind != "local"):
        return []
    extra = f" and ~{_g(hsc)} host syscalls" if hsc is not None else ""
    native = f" ({base}: {_g(bcs or 0)}{', ' + _g(bsc) if bsc is not None else ''})"
    why = (
        ": a ptrace round trip through the UML kernel's host process for each trap into the guest kernel"
        if kind == "uml"
        else ": the guest's kernel runs in other host tasks"
    )
    return [f"{name}: ~{_g(hcs)} host context switches{extra} per {bench}{native}{why}"]


def _exits_reading(name: str, exits: float, m: Measurement) -> str:
    """A guest's VM exits per op and their commonest reason
    (exits_userspace counts the vCPU threads' system calls, not exits: no reason)."""
    reasons = {
        k[len("exits_") :]: v.mean for k, v in m.metrics.items() if k.startswith("exits_") and k != "exits_userspace"
    }
    top = max(reasons, key=reasons.__getitem__) if reasons else None
    return (
        f"{name}: {_g(exits)} VM exits per op"
        + (f", mostly {top}" if top else "")
        + ": each is a world switch to the hypervisor and back"
    )


def _xen_reading(name: str, m: Measurement) -> list[str]:
    """A Xen guest's entries into its hypervisor per op: the hypercalls
    by type and the PV events Xen handled for it, where they are one or more."""
    calls = _m(m, "hypercalls")
    events = {k: _m(m, k) or 0.0 for k in ("xen_pf_bounces", "xen_ptwr_emulations", "xen_privop_emulations")}
    if (calls or 0.0) < 0.5 and max(events.values()) < 0.5:
        return []
    kinds = sorted(
        ((k[len("hypercalls_") :], v.mean) for k, v in m.metrics.items() if k.startswith("hypercalls_")),
        key=lambda kv: -kv[1],
    )
    top = ", ".join(f"{op} {_g(v)}" for op, v in kinds[:3] if v >= 0.05)
    said = [describe(k).label.removeprefix("Xen: ") + f" {_g(v)}" for k, v in events.items() if v >= 0.05]
    return [
        f"{name}: {_g(calls or 0.0)} hypercalls per op"
        + (f" ({top})" if top else "")
        + (f"; {', '.join(said)}" if said else "")
        + ": each an entry into Xen and back"
    ]


GVISOR_TRIP = {
    "ptrace": "each system call of the sandboxed program stops its host process (PTRACE_SYSEMU) and "
    "wakes the Sentry, which handles it and resumes the process",
    "systrap": "each system call traps (seccomp SIGSYS) into the Sentry's stub in the program's own "
    "host process, without a ptrace stop",
    "kvm": "the Sentry runs the program in a KVM guest ring: a system call is a VM exit into the Sentry",
}


def _gvisor_reading(name: str, bench: str, m: Measurement, b: Measurement, facts: dict) -> str:
    """gVisor's host round trips per operation, its platform named, who on
    the host spent the CPU (the Sentry, the Gofer, the program), and where
    the counts inside are getrusage's zeros where the baseline (b) counted
    some: gVisor's accounting."""
    platform = facts["gvisor_platform"]
    got = facts.get("counters")
    sources: dict = got if isinstance(got, dict) else {}
    zeros = [
        k.replace("_", " ")
        for k in ("page_faults", "context_switches")
        if str(sources.get(k, "")).startswith("getrusage") and _m(m, k) == 0 and (_m(b, k) or 0) > 0.05
    ]
    hcs, hsc, cpu = _m(m, "host_context_switches"), _m(m, "host_syscalls"), _m(m, "host_cpu_ns")
    sentry, gofer = _m(m, "host_cpu_sentry_ns"), _m(m, "host_cpu_gofer_ns")
    said = f"{name}: gVisor on platform {platform}: ~{_g(hsc)} host syscalls and ~{_g(hcs)} host context switches"
    said += f" per {bench}"
    if cpu and sentry is not None:
        said += f"; of its {fmt_value(cpu, 'ns')} host CPU the Sentry {100 * min(sentry, cpu) / cpu:.0f}%"
        said += f", the Gofer {100 * min(gofer, cpu) / cpu:.0f}%" if gofer is not None else ""
    if hcs is not None and hcs >= 1:
        said += f": {GVISOR_TRIP.get(platform, 'the Sentry takes the call')}"
    if zeros:
        said += f" (inside, its getrusage gave 0 {' and '.join(zeros)}: gVisor's accounting, not the operation's)"
    return said


def _same_counts(m: Measurement, b: Measurement) -> bool:
    keys = [
        k for k in ("page_faults", "context_switches", "syscalls", "instructions") if k in m.metrics and k in b.metrics
    ]
    if not keys:
        return False
    for k in keys:
        x, y = m.metrics[k].mean, b.metrics[k].mean
        if abs(x - y) > 0.1 * max(abs(y), 0.01):
            return False
    return True


def _g(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


# -- writers -----------------------------------------------------------------------
def _fmt(c: Cell, unit: str) -> str:
    if c.mean is None:
        return "-"
    v = fmt_value(c.mean, unit) if unit == "ns" else _g(c.mean)
    if c.low is not None and c.high is not None and c.mean and abs(c.mean) > 0:
        half = (c.high - c.low) / 2 / abs(c.mean)
        if half >= 0.0005:
            v += f" ±{half * 100:.0f}%" if half >= 0.1 else f" ±{half * 100:.1f}%"
    return v


def text(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        out.append(f"{b.benchmark} — {b.description}")
        rows = [[label] + [_fmt(c, unit) for c in cells] for _, label, unit, cells in b.rows]
        out.append(table.render([b.per] + b.targets, rows, align="l" + "r" * len(b.targets)))
        out += [f"  · {r}" for r in b.readings]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def markdown(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        out += [
            f"#### {md_cell(b.benchmark)}",
            "",
            md_cell(b.description),
            "",
            f"| {b.per} | " + " | ".join(md_cell(t) for t in b.targets) + " |",
            "|---|" + "---:|" * len(b.targets),
        ]
        out += [
            "| " + md_cell(label.strip()) + " | " + " | ".join(md_cell(_fmt(c, unit)) for c in cells) + " |"
            for _, label, unit, cells in b.rows
        ]
        out += [""] + [f"- {md_cell(r)}" for r in b.readings] + [""]
    return "\n".join(out)


def to_json(blocks: list[Block]) -> list[dict]:
    return [
        {
            "benchmark": b.benchmark,
            "unit": b.unit,
            "targets": b.targets,
            "rows": [
                {
                    "key": k,
                    "label": label.strip(),
                    "unit": unit,
                    "values": {
                        t: {"mean": json_number(c.mean), "ci_low": json_number(c.low), "ci_high": json_number(c.high)}
                        for t, c in zip(b.targets, cells, strict=True)
                    },
                }
                for k, label, unit, cells in b.rows
            ],
            "readings": b.readings,
        }
        for b in blocks
    ]


def html(blocks: list[Block]) -> str:
    parts = [
        '<p class="meta">Per operation, from the counting processes (one batch with counters on, '
        "every few blocks; counted batches are never timed): the target's own kernel's counts, then "
        "what its host processes cost the host; a workload's: what the host spent per unit of its work "
        "(per GB moved, per 1000 transactions), from every run. ± is the 95% CI half-width.</p>"
    ]
    for b in blocks:
        head = "".join(f"<th>{escape(t)}</th>" for t in b.targets)
        body = "".join(
            '<tr><td class="l">'
            + escape(label)
            + "</td>"
            + "".join(f"<td>{escape(_fmt(c, unit))}</td>" for c in cells)
            + "</tr>"
            for _, label, unit, cells in b.rows
        )
        reads = "".join(f"<li>{escape(r)}</li>" for r in b.readings)
        parts.append(
            f'<h4>{escape(b.benchmark)}</h4><p class="meta">{escape(b.description)}</p>'
            f'<table><thead><tr><th class="l">{escape(b.per)}</th>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>" + (f"<ul>{reads}</ul>" if reads else "")
        )
    return "".join(parts)
