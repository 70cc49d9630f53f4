"""--shared-boot's checks before anything starts (targets/migration.py):
the machine type two QEMU binaries share, and what their command line gets."""

import os
from dataclasses import replace
from pathlib import Path

import pytest

from vmtax.errors import TargetError, UserError
from vmtax.targets.migration import common_machine, machine_types, migrate, prepare_shared, resume
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


class Monitor:
    """A QEMU monitor that answers from a script: {command: [answers...]}
    (the last repeated), an answer an exception to raise."""

    def __init__(self, answers):
        self.answers, self.asked = {k: list(v) for k, v in answers.items()}, []

    def execute(self, command, arguments=None):
        self.asked.append(command)
        got = self.answers.get(command, [None])
        answer = got.pop(0) if len(got) > 1 else got[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_a_migration_waits_for_completed_and_the_destination_running():
    src = Monitor({"query-migrate": [{"status": "active"}, {"status": "completed", "total-time": 300}]})
    dest = Monitor({"query-status": [{"status": "inmigrate"}, {"status": "running"}]})
    assert migrate(src, dest, "unix:/x", timeout=5)["total-time"] == 300
    assert dest.asked[0] == "migrate-incoming" and src.asked.count("query-migrate") == 2


def test_a_failed_or_endless_migration_is_a_target_error_and_the_endless_one_cancelled():
    failed = Monitor({"query-migrate": [{"status": "failed", "error-desc": "section mismatch"}]})
    with pytest.raises(TargetError, match="the migration failed: section mismatch"):
        migrate(failed, Monitor({}), "unix:/x", timeout=5)
    endless = Monitor({"query-migrate": [{"status": "active"}]})
    with pytest.raises(TargetError, match="did not end in 0 s"):
        migrate(endless, Monitor({}), "unix:/x", timeout=0.05)
    assert "migrate_cancel" in endless.asked


def test_a_destination_that_never_runs_and_a_source_that_never_resumes_end_by_their_timeouts():
    src = Monitor({"query-migrate": [{"status": "completed"}]})
    with pytest.raises(TargetError, match="did not run after its migration"):
        migrate(src, Monitor({"query-status": [{"status": "paused"}]}), "unix:/x", timeout=0.05)
    with pytest.raises(TargetError, match="did not run on"):
        resume(Monitor({"query-status": [{"status": "suspended"}]}), timeout=0.05)
    gone = Monitor({"query-status": [OSError("QMP connection closed")]})
    with pytest.raises(TargetError, match="QMP connection closed"):
        resume(gone, timeout=0.05)
    paused = Monitor({"query-status": [{"status": "postmigrate"}, {"status": "running"}]})
    resume(paused, timeout=5)
    assert paused.asked == ["query-status", "cont", "query-status"]


def test_two_builds_with_the_default_cpu_model_are_refused_in_one_line(tmp_path):
    from vmtax.targets import parse_target

    other = tmp_path / "qemu-b"
    other.write_text('#!/bin/sh\nexec qemu-system-x86_64 "$@"\n')
    other.chmod(0o755)
    try:
        guests = [parse_target("qemu:accel=tcg"), parse_target(f"qemu:accel=tcg,binary={other},label=b")]
    except UserError as e:
        pytest.skip(f"no QEMU target here: {e}")
    with pytest.raises(UserError, match="needs a named CPU model on every guest"):
        prepare_shared(guests)
    emulator = [parse_target("qemu:accel=tcg"), parse_target("qemu:accel=tcg,emulator=together,label=b")]
    prepare_shared(emulator)  # where QEMU's own threads run is the host's business: no guest state
    assert all(t.config.machine_type is None for t in emulator)


def test_shared_boot_takes_longer_processes_unless_samples_is_given():
    from vmtax.cli import _config, build_parser
    from vmtax.plan import SHARED_BOOT_SAMPLES, RunConfig

    def cfg(*flags):
        return _config(build_parser().parse_args(["compare", "qemu", "qemu:label=b", *flags]))

    assert cfg().samples_per_process == RunConfig.samples_per_process
    assert cfg("--reboot").samples_per_process == RunConfig.samples_per_process
    shared = cfg("--shared-boot")
    assert shared.samples_per_process == SHARED_BOOT_SAMPLES > RunConfig.samples_per_process
    assert shared.reboot and shared.shared_boot
    assert cfg("--shared-boot", "--samples", "5").samples_per_process == 5


def test_block_processes_is_one_unless_given_shared_boot_or_not():
    from vmtax.cli import _config, build_parser
    from vmtax.plan import RunConfig

    def cfg(*flags):
        return _config(build_parser().parse_args(["compare", "qemu", "qemu:label=b", *flags]))

    assert cfg().block_processes == cfg("--shared-boot").block_processes == RunConfig.block_processes == 1
    assert cfg("--shared-boot", "--block-processes", "4").block_processes == 4
    for flags in (["--pairing", "blocks"], ["--parallel", "2"]):
        with pytest.raises(UserError, match="--block-processes holds lockstep pairs"):
            cfg("--block-processes", "2", *flags)
