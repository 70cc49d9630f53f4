import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

# The tests never touch the user's ~/.cache/vmtax (probe results, cached
# images): one private cache for the whole session, set before any test
# module is imported (some probe targets at import), removed at the end.
_CACHE = tempfile.mkdtemp(prefix="vmtax-test-cache-")

# Run under nohup or as a background job, the suite inherits SIGHUP or SIGINT
# ignored, and so would every vmtax and agent it starts (Python installs no
# Ctrl-C handler when SIGINT is ignored): the tests that send those signals
# need them at their defaults.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
os.environ["XDG_CACHE_HOME"] = _CACHE


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE, ignore_errors=True)

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


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server of the session's own (pgserver.py), started at
    the first test that needs it, stopped and removed at the end."""
    from pgserver import PgServer, binaries
    bin_dir = binaries()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server here (/usr/lib/postgresql/*/bin: Debian's postgresql package,"
                    " which scripts/setup-system.sh installs)")
    server = PgServer(bin_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server):
    """postgresql:// URL of a new, empty results database (a schema of its
    own: the cluster is thrown away at the end of the session)."""
    return pg_server.url("vmtax", schema=pg_server.create_schema())


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path):
    """Where a test's results database is, in each backend: an SQLite file, or
    a new database of the session's PostgreSQL server."""
    if request.param == "sqlite":
        return tmp_path / "vmtax.db"
    return request.getfixturevalue("pg_url")
