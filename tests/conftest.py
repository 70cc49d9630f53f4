import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
AGENT = REPO / "agent" / "build" / "vmtax-agent"
AGENT_SAN = REPO / "agent" / "build" / "vmtax-agent-san"


@pytest.fixture
def db(tmp_path):
    return tmp_path / "vmtax.db"


@pytest.fixture(autouse=True)
def _isolated_db(tmp_path, monkeypatch):
    """No test ever writes to the user's real database."""
    monkeypatch.setenv("VMTAX_DB", str(tmp_path / "default.db"))


def vmtax_cmd():
    exe = shutil.which("vmtax") or str(REPO / ".venv" / "bin" / "vmtax")
    return [exe]
