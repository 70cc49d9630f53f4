"""--shared-boot's checks before anything starts (targets/migration.py):
the machine type two QEMU binaries share, and what their command line gets."""

import os
from dataclasses import replace
from pathlib import Path

import pytest

from vmtax.errors import UserError
from vmtax.targets.migration import common_machine, machine_types
from vmtax.targets.qemu import Plumbing, QemuConfig, qemu_argv


def fake_qemu(tmp_path: Path, name: str, default: str, others: list[str]) -> str:
    """A script that answers `-M help` as a QEMU binary whose pc is `default`."""
    lines = [
        "Supported machines are:",
        "microvm              microvm (i386)",
        f"pc                   Standard PC (i440FX + PIIX, 1996) (alias of {default})",
        f"{default}        Standard PC (i440FX + PIIX, 1996) (default)",
        *[f"{m}        Standard PC (i440FX + PIIX, 1996)" for m in others],
        "q35                  Standard PC (Q35 + ICH9, 2009) (alias of pc-q35-7.2)",
        "pc-q35-7.2           Standard PC (Q35 + ICH9, 2009)",
    ]
    path = tmp_path / name
    path.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n")
    os.chmod(path, 0o755)
    return str(path)


def test_the_machine_types_and_aliases_of_a_binary(tmp_path):
    names, aliases = machine_types(fake_qemu(tmp_path, "q", "pc-i440fx-8.0", ["pc-i440fx-7.2"]))
    assert aliases == {"pc": "pc-i440fx-8.0", "q35": "pc-q35-7.2"}
    assert {"microvm", "pc", "pc-i440fx-8.0", "pc-i440fx-7.2"} <= set(names)


def test_two_builds_share_the_older_versioned_machine_both_have(tmp_path):
    new = fake_qemu(tmp_path, "new", "pc-i440fx-8.0", ["pc-i440fx-7.2", "pc-i440fx-7.1"])
    old = fake_qemu(tmp_path, "old", "pc-i440fx-7.2", ["pc-i440fx-7.1"])
    assert common_machine("pc", [new, old]) == "pc-i440fx-7.2"
    assert common_machine("pc", [new, new]) is None  # one binary: its own alias on every side
    assert common_machine("microvm", [new, old]) is None  # no versions


def test_builds_without_a_machine_in_common_are_one_line(tmp_path):
    a = fake_qemu(tmp_path, "a", "pc-i440fx-9.0", [])
    b = fake_qemu(tmp_path, "b", "pc-i440fx-7.2", [])
    with pytest.raises(UserError, match="no versioned machine type for pc in common"):
        common_machine("pc", [a, b])


def test_the_command_line_boots_the_versioned_machine_where_one_is_set():
    cfg = QemuConfig()
    plumbing = Plumbing(kernel=Path("/k"), initrd=Path("/i"), console=Path("/c"), qmp=Path("/q"))
    argv = qemu_argv(cfg, "tcg", plumbing)
    assert argv[argv.index("-M") + 1] == "pc"
    argv = qemu_argv(replace(cfg, machine_type="pc-i440fx-7.2"), "tcg", plumbing)
    assert argv[argv.index("-M") + 1] == "pc-i440fx-7.2"
