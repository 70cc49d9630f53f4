"""The environment of runs: the table of a run's targets (built once,
laid out by the terminal, Markdown, HTML and JSON writers), the notes under
it, and warnings where runs that are shown together differ (pyperf refuses
to mix apples and oranges; we warn)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..model import RunData, TargetInfo
from .view import ALL, HTML, JSON, PEOPLE

# (label, fact key) shown for every target
FACTS = [
    ("kernel", "kernel"),
    ("CPU", "cpu_model"),
    ("CPUs", "cpus_online"),
    ("hypervisor seen", "hypervisor_vendor"),
    ("accel / engine", "accel"),
    ("clocksource", "clocksource"),
    ("THP", "thp_enabled"),
    ("governor", "cpu_governor"),
    ("XSAVE bytes", "xsave_bytes"),
    ("systemd-detect-virt", "systemd_detect_virt"),
]

COMPARED = [("CPU model", "cpu_model"), ("kernel", "kernel")]


@dataclass(frozen=True)
class TargetColumn:
    """One column of the table of a run's targets, said once: its key in
    JSON, its title, its raw value and its text for people, and the formats
    that show it (view.TEXT, MD, HTML, JSON).  A number's column sorts by
    its value on the HTML page."""

    key: str
    title: str
    value: Callable[[TargetInfo, RunData], object]
    text: Callable[[TargetInfo, RunData], str] | None = None
    show: frozenset[str] = ALL
    align: str = "l"

    def text_of(self, t: TargetInfo, data: RunData) -> str:
        if self.text is not None:
            return self.text(t, data)
        v = self.value(t, data)
        return "-" if v is None or v == "" else str(v)


def _fact(key: str) -> Callable[[TargetInfo, RunData], object]:
    return lambda t, data: t.facts.get(key)


def _figure(attr: str, form: str) -> tuple[Callable, Callable]:
    def value(t: TargetInfo, data: RunData) -> float | None:
        return getattr(t, attr)

    return value, lambda t, data: form.format(getattr(t, attr)) if getattr(t, attr) is not None else "-"


def _accel(t: TargetInfo, data: RunData) -> str:
    return str(t.accel or t.facts.get("accel") or t.facts.get("engine") or "-")


_PAGE = frozenset({HTML})  # the facts only the HTML page has room for

TARGET_COLUMNS: list[TargetColumn] = [
    TargetColumn("name", "target", lambda t, data: t.name),
    TargetColumn("kind", "kind", lambda t, data: t.kind),
    TargetColumn("accel", "accel", lambda t, data: t.accel, _accel),
    TargetColumn("boot_s", "boot", *_figure("boot_s", "{:.2f} s"), align="r"),
    TargetColumn("idle_cpu_pct", "idle CPU", *_figure("idle_cpu_pct", "{:.1f}%"), align="r"),
    TargetColumn("mem_overhead_mb", "mem overhead", *_figure("mem_overhead_mb", "{:.0f} MiB"), align="r"),
    TargetColumn("kernel", "kernel", _fact("kernel"), show=PEOPLE),
    TargetColumn("hypervisor_vendor", "hypervisor seen", _fact("hypervisor_vendor"), show=PEOPLE),
    *[
        TargetColumn(key, label, _fact(key), show=_PAGE)
        for label, key in FACTS
        if key not in ("kernel", "hypervisor_vendor", "accel")
    ],
    TargetColumn(
        "agent_hash",
        "agent sha256",
        lambda t, data: data.agent_hashes.get(t.name),
        lambda t, data: (data.agent_hashes.get(t.name) or "-")[:12],
        show=frozenset({HTML, JSON}),
    ),
    TargetColumn("facts", "facts", lambda t, data: t.facts, show=frozenset({JSON})),
]


@dataclass
class Targets:
    """A run's targets, one row each, and the notes under them
    (target_notes), built once for every writer."""

    data: RunData
    notes: list[tuple[list[str], str]]
    columns: list[TargetColumn] = field(default_factory=lambda: list(TARGET_COLUMNS))

    def shown(self, fmt: str) -> list[TargetColumn]:
        return [c for c in self.columns if fmt in c.show]

    def texts(self, fmt: str) -> list[list[str]]:
        cols = self.shown(fmt)
        return [[c.text_of(t, self.data) for c in cols] for t in self.data.targets]

    def values(self, fmt: str) -> list[dict[str, object]]:
        cols = self.shown(fmt)
        return [{c.key: c.value(t, self.data) for c in cols} for t in self.data.targets]


def targets(data: RunData) -> Targets:
    return Targets(data, target_notes(data))


def target_notes(data: RunData) -> list[tuple[list[str], str]]:
    """(targets, note) under the table of targets: why a target runs as it
    does (a KVM probe that failed, so TCG) and which were not measured.  A
    note several targets share (five QEMU guests of a disk comparison, one
    failed KVM probe) is said once, with their names."""
    by: dict[str, list[str]] = {}
    for t in data.targets:
        if t.facts.get("accel_note"):
            by.setdefault(str(t.facts["accel_note"]), []).append(t.name)
    for name, why in data.config.get("skipped_targets", {}).items():
        by.setdefault(f"not measured, it does not work here: {why}", []).append(name)
    return [(names, note) for note, names in by.items()]


def warnings(runs: list[RunData]) -> list[str]:
    """Where runs shown together differ in their baseline's CPU model or
    kernel, or in the agent binary."""
    out = []
    if len(runs) > 1:
        first = runs[0]
        for label, key in COMPARED:
            values = {r.id: (r.targets[0].facts.get(key) if r.targets else None) for r in runs}
            if len(set(values.values())) > 1:
                out.append(
                    f"runs differ in the baseline's {label}: " + "; ".join(f"{rid}: {v}" for rid, v in values.items())
                )
        hashes = {h for r in runs for h in r.agent_hashes.values() if h}
        if len(hashes) > 1:
            out.append(
                f"runs used {len(hashes)} different agent binaries (sha256 "
                + ", ".join(sorted(h[:12] for h in hashes))
                + f"); first run {first.id}"
            )
    for r in runs:
        hashes = {h for h in r.agent_hashes.values() if h}
        if len(hashes) > 1:
            out.append(f"run {r.id}: its targets ran different agent binaries")
    return out
