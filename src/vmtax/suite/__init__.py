"""The benchmark registry: micro benchmarks come from `vmtax-agent --list`
(the agent's table is the single source of truth for them); workloads, the
real tools, from workloads.py.  A workload's rows are `<workload>.<metric>`."""

from __future__ import annotations

import json
import subprocess
from functools import lru_cache

from ..agent import agent_path
from ..errors import AgentError, UserError
from ..model import BenchSpec
from . import workloads

DEFAULT_SUITE = "default"  # every micro benchmark the agent has
ALL_SUITE = "all"  # that and every workload


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[BenchSpec, ...]:
    try:
        out = subprocess.run([path, "--list"], capture_output=True, check=True, timeout=30).stdout
        rows = json.loads(out)
    except (subprocess.SubprocessError, OSError, json.JSONDecodeError) as e:
        raise AgentError(f"cannot read the benchmark table from {path}: {e}") from None
    return tuple(BenchSpec(**row) for row in rows)


def micro_benchmarks() -> tuple[BenchSpec, ...]:
    return _load(str(agent_path()))


def all_benchmarks() -> tuple[BenchSpec, ...]:
    """Every row: the agent's table, then every workload's figures."""
    return micro_benchmarks() + tuple(workloads.all_specs())


def suites(specs: tuple[BenchSpec, ...] | None = None) -> list[str]:
    specs = specs or all_benchmarks()
    seen: list[str] = []
    for s in specs:
        if s.suite not in seen:
            seen.append(s.suite)
    return seen


def select(
    suite_names: list[str] | None = None,
    bench_names: list[str] | None = None,
    specs: tuple[BenchSpec, ...] | None = None,
) -> list[BenchSpec]:
    """The benchmarks named, in table order.  A workload's name selects
    every figure it reports.  Unknown names are a UserError.  With neither,
    the default suite: every micro benchmark."""
    specs = specs or all_benchmarks()
    by_name = {s.name: s for s in specs}
    known_suites = suites(specs)
    chosen: set[str] = set()
    for name in bench_names or []:
        figures = [s.name for s in specs if s.name.startswith(name + ".")]
        if name not in by_name and not figures:
            raise UserError(f"unknown benchmark '{name}' (see `vmtax list`)")
        chosen.update(figures or [name])
    for suite in suite_names or []:
        if suite == ALL_SUITE:
            chosen.update(by_name)
        elif suite == DEFAULT_SUITE:
            chosen.update(s.name for s in specs if s.kind == "micro")
        elif suite in known_suites:
            chosen.update(s.name for s in specs if s.suite == suite)
        else:
            raise UserError(f"unknown suite '{suite}' (known: {', '.join([DEFAULT_SUITE, ALL_SUITE, *known_suites])})")
    if not suite_names and not bench_names:
        chosen.update(s.name for s in specs if s.kind == "micro")
    return [s for s in specs if s.name in chosen]
