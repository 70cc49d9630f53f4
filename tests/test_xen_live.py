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


def gone(binary: str, timeout: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout
    while vmtax_domains(binary) and time.monotonic() < deadline:
        time.sleep(1)
    return vmtax_domains(binary)


def test_no_domain_left_after_ctrl_c_or_a_kill(xl_binary, tmp_path):
    """Two runs at once, each with a domain: one stopped by Ctrl-C (vmtax
    destroys its domain), one killed outright (its relay does)."""
    runs = {
        sig: subprocess.Popen(
            [*vmtax_cmd(), "run", "--target", "xen:type=pv", "--bench", "getppid", "--max-time", "10m"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "VMTAX_DB": str(tmp_path / f"{sig}.db")},
        )
        for sig in (signal.SIGINT, signal.SIGKILL)
    }
    try:
        deadline = time.monotonic() + 600
        while len(vmtax_domains(xl_binary)) < 2:
            for p in runs.values():
                assert p.poll() is None, f"vmtax ended first: {p.stdout.read() if p.stdout else ''}"
            assert time.monotonic() < deadline, "the domains did not start"
            time.sleep(1)
        time.sleep(5)
        for sig, p in runs.items():
            p.send_signal(sig)
        for p in runs.values():
            p.wait(timeout=120)
        assert gone(xl_binary) == []
    finally:
        for p in runs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        for name in vmtax_domains(xl_binary):
            xl(xl_binary, "destroy", name)
