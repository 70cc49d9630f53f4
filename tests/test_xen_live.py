"""The xen target against a real Xen, in dom0 (make test-xen runs these
inside its nested Xen: pytest -m xen; elsewhere they skip, saying why):
a controller stopped by Ctrl-C or killed outright leaves no domain."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from conftest import vmtax_cmd
from vmtax.targets.xen import XenTarget, find_xl, xl

pytestmark = pytest.mark.xen


@pytest.fixture(scope="module")
def xl_binary():
    ok, why = XenTarget.available()
    if not ok:
        pytest.skip(why)
    return find_xl()


def vmtax_domains(binary: str) -> list[str]:
    return [line.split()[0] for line in xl(binary, "list").splitlines()[1:] if line.startswith("vmtax-")]


def started(p: subprocess.Popen, binary: str, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while not vmtax_domains(binary):
        assert p.poll() is None, f"vmtax ended first: {p.stdout.read() if p.stdout else ''}"
        assert time.monotonic() < deadline, "no domain started"
        time.sleep(1)


def gone(binary: str, timeout: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout
    while vmtax_domains(binary) and time.monotonic() < deadline:
        time.sleep(1)
    return vmtax_domains(binary)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_no_domain_left(xl_binary, sig, tmp_path):
    p = subprocess.Popen(
        [*vmtax_cmd(), "run", "--target", "xen:type=pv", "--bench", "getppid", "--max-time", "10m"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "VMTAX_DB": str(tmp_path / "x.db")},
    )
    try:
        started(p, xl_binary)
        time.sleep(5)
        p.send_signal(sig)
        p.wait(timeout=120)
        assert gone(xl_binary) == []
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for name in vmtax_domains(xl_binary):
            xl(xl_binary, "destroy", name)
