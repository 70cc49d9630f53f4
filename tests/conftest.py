import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
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


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups
def pytest_collection_modifyitems(config, items):
    """The tiers (pyproject.toml's markers): a test with neither `e2e` nor
    `sim` is a unit test, so `-m unit` selects exactly those.  Under
    pytest-xdist (`make test`: -n 2 --dist loadgroup) every e2e test goes to
    one worker, one after another as without it (they pin targets to one
    CPU, share booted targets and look for what is left behind), while the
    unit tests run on the other.  An e2e test that starts no target (vmtax
    serve's browser tests) names a group of its own, which may go to either."""
    for item in items:
        if item.get_closest_marker("e2e") is None and item.get_closest_marker("sim") is None:
            item.add_marker(pytest.mark.unit)
        elif item.get_closest_marker("e2e") is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group("e2e"))


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
        pytest.skip(
            "no PostgreSQL server here (/usr/lib/postgresql/*/bin: Debian's postgresql package,"
            " which scripts/setup-system.sh installs)"
        )
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


@dataclass
class ShortCompare:
    targets: list[str]  # every target that works here: local, then qemu:accel=tcg, uml, container
    rows: list[str]  # the agent rows, then the workloads where their tools are installed
    proc: subprocess.CompletedProcess
    doc: dict  # its --json document
    markdown: str  # its --markdown scoreboard
    db: Path


SHORT_AGENT_ROWS = ["getppid", "page_fault", "threadswitch"]
SHORT_WORKLOADS = ["sysbench_cpu"]  # tbench (3 s a run at least) has a test of its own on two targets


@pytest.fixture(scope="session")
def short_compare(tmp_path_factory) -> ShortCompare:
    """One short compare of every target that works here, booted once for
    the e2e files that read it (test_explain_e2e: the counts; test_targets_e2e:
    the scoreboard, JSON and pinning; test_workloads_e2e: a real tool in every
    target): three agent rows and sysbench cpu, 1-second tool runs, each row
    ending on precision at its 6th block (the fewest a ratio's 95% interval
    needs; two of them with counting processes)."""
    from vmtax.targets.container import ContainerTarget
    from vmtax.targets.qemu import QemuTarget
    from vmtax.targets.uml import UmlTarget

    targets = (
        ["local"]
        + (["qemu:accel=tcg"] if QemuTarget.available()[0] else [])
        + (["uml"] if UmlTarget.available()[0] else [])
        + (["container"] if ContainerTarget.available()[0] else [])
    )
    rows = SHORT_AGENT_ROWS + (SHORT_WORKLOADS if shutil.which("sysbench") else [])
    out = tmp_path_factory.mktemp("short-compare")
    cmd = [
        sys.executable,
        "-m",
        "vmtax.cli",
        "--db",
        str(out / "run.db"),
        "compare",
        *targets,
        "--bench",
        *rows,
        "--tool-seconds",
        "1",
        "--min-processes",
        "6",
        "--precision",
        "50%",
        "--max-time",
        "6m",
        "--json",
        str(out / "run.json"),
        "--markdown",
        str(out / "run.md"),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return ShortCompare(
        targets, rows, p, json.loads((out / "run.json").read_text()), (out / "run.md").read_text(), out / "run.db"
    )
