"""Where the agent binary is, what it says, and its hash."""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from .errors import AgentError, UserError

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA = 1


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


def parse_line(line: str) -> dict:
    """One protocol line; AgentError for anything that is not one."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        raise AgentError(f"malformed agent output: {line[:120]!r}") from None
    if not isinstance(obj, dict) or obj.get("schema") != SCHEMA or "type" not in obj:
        raise AgentError(f"unexpected agent output (schema {SCHEMA} expected): {line[:120]!r}")
    return obj
