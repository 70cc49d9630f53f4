"""Where the agent binary is, what it says, and its hash."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .errors import AgentError, UserError
from .metrics import METRICS

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA = 1
INT_MAX = 2**63 - 1  # SQLite's INTEGER: a count beyond it cannot be stored
FLOAT_MAX = 1e18  # ns or counts per operation: beyond it nothing was measured, and
# products of two such stay far from float overflow (the runner's sizing)


def agent_path() -> Path:
    env = os.environ.get("VMTAX_AGENT")
    p = Path(env) if env else REPO_ROOT / "agent" / "build" / "vmtax-agent"
    if not p.is_file() or not os.access(p, os.X_OK):
        raise UserError(f"the agent is not built at {p}: run `make setup` (or set VMTAX_AGENT)")
    return p


@lru_cache(maxsize=8)
def _hash(path: str, mtime: float) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def agent_hash(path: Path | None = None) -> str:
    p = path or agent_path()
    return _hash(str(p), p.stat().st_mtime)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number vmtax accepts")


def parse_line(line: str) -> dict:
    """One protocol line; AgentError for anything that is not one.  What a
    target prints is untrusted: a guest can print anything on its channel."""
    if len(line) > 65536:
        raise AgentError(f"agent output line of {len(line)} characters: {line[:80]!r}...")
    try:
        obj = json.loads(line, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError, RecursionError):
        raise AgentError(f"malformed agent output: {line[:120]!r}") from None
    if not isinstance(obj, dict) or obj.get("schema") != SCHEMA or not isinstance(obj.get("type"), str):
        raise AgentError(f"unexpected agent output (schema {SCHEMA} expected): {line[:120]!r}")
    try:
        return _whole(obj) if "\\u" in line else obj
    except RecursionError:
        raise AgentError(f"malformed agent output: {line[:120]!r}") from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _whole(v):
    """v with every lone surrogate a JSON escape can spell (\\ud800) made
    U+FFFD: no store can hold one (UTF-8 has none), no XML may carry it."""
    if isinstance(v, str):
        return _SURROGATE.sub("\ufffd", v)
    if isinstance(v, dict):
        return {_whole(k): _whole(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_whole(x) for x in v]
    return v


def in_range(v: object, lo: float, hi: float, integer: bool = False) -> bool:
    """Whether v is a JSON number (not a boolean) within [lo, hi], and whole
    where integer: compared exactly, so neither NaN nor an integer of 400
    digits converts (or overflows) on the way."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        return False
    return not integer or isinstance(v, int) or v.is_integer()


def _number(msg: dict, key: str, lo: float, integer: bool = False, default=None):
    v = msg.get(key, default)
    if not in_range(v, lo, INT_MAX if integer else FLOAT_MAX, integer):
        raise AgentError(f"sample line with an invalid {key}: {repr(v)[:40]}")
    return int(v) if integer else float(v)


def calibrated_iters(msg: dict, line: str) -> int:
    """The iteration count of an agent's calibration line, checked."""
    iters = msg.get("iters")
    if not isinstance(iters, int) or not in_range(iters, 1, INT_MAX, True):
        raise AgentError(f"calibration line without a valid iteration count: {line[:120]!r}")
    return iters


def sample_fields(msg: dict, spec) -> dict:
    """The fields of a Sample from one agent sample line, checked: finite
    numbers in range, the benchmark and unit expected, nothing else."""
    if msg.get("bench") != spec.name or msg.get("unit") != spec.unit:
        raise AgentError(
            f"sample for {str(msg.get('bench'))[:40]!r} in {str(msg.get('unit'))[:20]!r}, "
            f"expected {spec.name} in {spec.unit}"
        )
    if not isinstance(msg.get("warmup"), bool):
        raise AgentError(f"sample line with an invalid warmup: {msg.get('warmup')!r}")
    counting = msg.get("counting", False)
    if not isinstance(counting, bool):
        raise AgentError(f"sample line with an invalid counting: {counting!r}")
    value = _number(msg, "value", 0.0)
    if value <= 0:
        raise AgentError(f"sample line with a non-positive value: {value!r}")
    return dict(
        value=value,
        unit=spec.unit,
        seq=_number(msg, "seq", 0, True),
        instance=_number(msg, "instance", 0, True, 0),
        warmup=msg["warmup"],
        iters=_number(msg, "iters", 1, True),
        ops=_number(msg, "ops", 1e-300),
        overhead=_number(msg, "overhead", 0.0),
        tsc_per_op=_number(msg, "tsc_per_op", 0.0),
        cpu=_number(msg, "cpu", -1, True, -1),
        counting=counting,
        metrics=target_metrics(msg) if counting else {},
        **reference(msg),
    )


def reference(msg: dict) -> dict:
    """A timed sample's reference times, ns per step right before and right
    after it (agent/harness.h: the host's state it was taken in): two
    finite positive numbers, or none at all (an agent run with --ref-steps
    0, a tiled or counted sample, an older agent)."""
    ref = msg.get("ref_ns")
    if ref is None:
        return {}
    if not (isinstance(ref, list) and len(ref) == 2 and all(in_range(v, 1e-300, FLOAT_MAX) for v in ref)):
        raise AgentError(f"sample line with an invalid ref_ns: {repr(ref)[:60]}")
    return {"ref_before": float(ref[0]), "ref_after": float(ref[1])}


def target_metrics(msg: dict) -> dict[str, float]:
    """The counters of a sample line, per operation: only names the registry
    knows as counted inside a target (a guest cannot claim a host figure),
    each a finite number >= 0; names this vmtax does not know are left out."""
    raw = msg.get("metrics", {})
    if not isinstance(raw, dict):
        raise AgentError(f"sample line with invalid metrics: {str(raw)[:80]!r}")
    out = {}
    for name, v in raw.items():
        if not (isinstance(name, str) and name in METRICS and METRICS[name].side == "target"):
            continue
        if not in_range(v, 0.0, FLOAT_MAX):
            raise AgentError(f"sample line with an invalid {name[:40]}: {repr(v)[:40]}")
        out[name] = float(v)
    return out


REASON_MAX = 500  # characters of a skip's reason or an error's message kept


@dataclass(frozen=True)
class Event:
    """One line of an agent process, read and checked: `kind` is the
    line's type; a calibration carries `iters` (and `instance`), a sample
    its checked `fields` (those of a model.Sample), a skip its `reason`."""

    kind: str
    iters: int | None = None
    instance: int = 0
    fields: dict = field(default_factory=dict)
    reason: str = ""


def events(lines: Iterable[str], spec) -> Iterator[Event]:
    """The one reader of the agent protocol: every line of one agent
    process measuring `spec`, as Events, blank lines skipped.  Anything a
    real agent would not say -- a malformed line, a sample of another
    benchmark, a number out of range, a calibration without a valid count
    -- raises AgentError, and so does the agent's own error line (its
    message cut to REASON_MAX).  Types the caller does not know (env,
    ready) come through as they are."""
    for line in lines:
        if not line.strip():
            continue
        msg = parse_line(line)
        kind = msg["type"]
        if kind == "sample":
            yield Event(kind, fields=sample_fields(msg, spec))
        elif kind == "calibration":
            instance = msg.get("instance", 0)
            yield Event(
                kind,
                iters=calibrated_iters(msg, line),
                instance=instance if in_range(instance, 0, INT_MAX, True) else -1,
            )
        elif kind == "skip":
            yield Event(kind, reason=str(msg.get("reason", ""))[:REASON_MAX])
        elif kind == "error":
            raise AgentError(str(msg.get("message", "agent error"))[:REASON_MAX])
        else:
            yield Event(kind)


FACT_MAX = 4096  # characters of one fact kept


def clean_facts(obj: object) -> dict:
    """A target's facts as plain JSON values: strings (cut to FACT_MAX),
    finite numbers, booleans, null, and one level of such dicts."""

    def scalar(v):
        if isinstance(v, str):
            return v[:FACT_MAX]
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, int):  # a JSON integer of 400 digits: no float, no SQLite INTEGER
            return v if abs(v) <= INT_MAX else None
        return str(v)[:FACT_MAX]

    if not isinstance(obj, dict):
        return {}
    out = {}
    for k, v in list(obj.items())[:200]:
        key = str(k)[:100]
        out[key] = {str(a)[:100]: scalar(b) for a, b in list(v.items())[:100]} if isinstance(v, dict) else scalar(v)
    return out
