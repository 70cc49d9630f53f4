"""compare --shared-boot: every QEMU guest of a run in one boot's state.

A TCG guest's boot carries an offset of its own (results/gate-guests.md):
two guests booted alike differ by some percent on one operation for as
long as they run, and the offset lives in the guest's state, not in QEMU's
process (a guest live-migrated into a new QEMU keeps it). So two guests
that hold one boot's state do not differ by it: each round of
`compare --shared-boot` boots one of the guests afresh (the donor, drawn),
live-migrates its state into a new QEMU process for each of the others and
then for the donor itself, so that every side runs as a migration's
destination (a destination faults its pages in afresh: a donor that ran on
would differ from the others by that). The rounds then draw boots as
--reboot does, and the offset cancels within each block instead of being
averaged over blocks.

What it measures is the hypervisors' difference on one guest state, which
is what a gate of two QEMU builds asks; two guest kernels cannot share a
state (their A/B keeps --reboot). The guests must be able to take one
another's state: one guest configuration (memory, vCPUs, CPU model,
machine, kernel, channel, accelerator), no NIC or disk (their host ends
are each guest's own), and, where the QEMU binaries differ, one versioned
machine type that each of them has (prepare_shared() picks it).

The migration itself (take_state, for QemuTarget.take_state): the new QEMU is started with
`-incoming defer` by the same launcher as a boot (pinned, its stdio the new
channel, dying with the thread that started it), told `migrate-incoming`
on a unix socket in the target's work dir, the source told `migrate` to
it, and the new one waited for until it runs; only then is the old QEMU
killed. Nothing leaves the host.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from .. import proc
from ..errors import TargetError, UserError
from ..hostprobe import Qmp
from .channel import Channel

MIGRATION_TIMEOUT = 60.0  # s: a 1 GiB TCG guest moves in well under a second here
# what a guest's state must find alike on the other side (emulator= is where QEMU's threads run: free)
CHECKED = ("accel", "mem_mb", "smp", "cpu", "machine", "kernel", "modules", "chan")


def machine_types(binary: str) -> tuple[list[str], dict[str, str]]:
    """The machine types a QEMU binary has (`-M help`), and its aliases
    ({"pc": "pc-i440fx-7.2"})."""
    try:
        out = subprocess.run(
            [binary, "-M", "help"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise UserError(f"{binary} -M help: {e}") from None
    names, aliases = [], {}
    for line in out.splitlines()[1:]:
        parts = line.split()
        if not parts:
            continue
        names.append(parts[0])
        m = re.search(r"\(alias of ([^)\s]+)\)", line)
        if m:
            aliases[parts[0]] = m.group(1)
    return names, aliases


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", name.rsplit("-", 1)[-1]))


def common_machine(machine: str, binaries: list[str]) -> str | None:
    """The versioned machine type that every binary has for `machine` (pc,
    q35): the oldest of the types their aliases name that all of them
    list; None where it needs none (one binary, or a machine without
    versions: microvm); UserError where there is none."""
    if len(set(binaries)) < 2:
        return None
    known = {b: machine_types(b) for b in binaries}
    named = {b: aliases.get(machine) for b, (_, aliases) in known.items()}
    if not any(named.values()):
        return None  # no versions (microvm): the same name on both sides
    shared = [
        n
        for n in sorted({n for n in named.values() if n}, key=_version)
        if all(n in names for names, _ in known.values())
    ]
    if not shared:
        said = ", ".join(f"{b}: {n or 'none'}" for b, n in named.items())
        raise UserError(
            f"--shared-boot: the QEMU binaries have no versioned machine type for {machine} in common ({said}): "
            f"a guest's state moves only between the same machine type"
        )
    return shared[0]


def prepare_shared(targets: list) -> None:
    """UserError unless every booted target is a QEMU guest that can take
    the others' state (the module's docstring); each given the versioned
    machine type they must all boot with, where their binaries differ."""
    guests = [t for t in targets if t.boots()]
    others = [t.name for t in guests if t.kind != "qemu"]
    if others:
        raise UserError(
            f"--shared-boot moves one boot's state into every QEMU guest; {', '.join(others)} cannot take it "
            f"(use --reboot)"
        )
    if len(guests) < 2:
        raise UserError("--shared-boot shares a boot between two QEMU guests or more: give two (or use --reboot)")
    for t in guests:
        c = t.config
        if c.nic != "none" or c.disk != "none":
            raise UserError(
                f"--shared-boot: {t.name} has a {'NIC' if c.nic != 'none' else 'disk'}, whose host end is its own "
                f"and cannot take another guest's state (use --reboot)"
            )
    first = guests[0].config
    if len({t.config.binary for t in guests}) > 1 and first.cpu in (None, "max", "host"):
        raise UserError(
            f"--shared-boot between two QEMU binaries needs a named CPU model on every guest (cpu=EPYC, "
            f"cpu=Skylake-Server...): {first.cpu or 'the default, max'} is whatever each build can do, and a guest "
            f"state made on one may use what the other lacks"
        )
    for t in guests[1:]:
        for key in CHECKED:
            if getattr(t.config, key) != getattr(first, key):
                raise UserError(
                    f"--shared-boot: {t.name} differs from {guests[0].name} in {key} "
                    f"({getattr(t.config, key)} vs {getattr(first, key)}): one guest's state fits only a guest "
                    f"configured alike (a guest-kernel A/B keeps --reboot)"
                )
    machine = common_machine(first.machine, [t.config.binary for t in guests])
    for t in guests:
        t.config = replace(t.config, machine_type=machine)


def connect(path: Path, alive: Callable[[], bool] = lambda: True, timeout: float = 10.0) -> Qmp:
    """QMP on a QEMU (its socket appears once it is up); TargetError once
    `alive` says it has gone or after `timeout` s."""
    end = time.monotonic() + timeout
    while True:
        try:
            return Qmp(str(path))
        except (OSError, ValueError) as e:
            if not alive():
                raise TargetError("QEMU exited before its monitor answered") from None
            if time.monotonic() > end:
                raise TargetError(f"no QMP at {path}: {e}") from None
            time.sleep(0.05)


class Monitor(Protocol):
    """What a migration asks of a QEMU's monitor (hostprobe.Qmp)."""

    def execute(self, command: str, arguments: dict | None = None) -> Any: ...


def migrate(source: Monitor, dest: Monitor, uri: str, timeout: float = MIGRATION_TIMEOUT) -> dict:
    """Move the source's state into the destination (started with
    `-incoming defer`) over `uri`; the source left paused when done (the
    caller kills or resumes it), the destination running. query-migrate's
    last answer (total-time, downtime in ms). TargetError where QEMU
    refuses or fails it, or it takes longer than `timeout` s (then
    cancelled); OSError where a monitor goes."""
    dest.execute("migrate-incoming", {"uri": uri})
    source.execute("migrate-set-parameters", {"max-bandwidth": 8 << 30, "downtime-limit": 100})
    end = time.monotonic() + timeout
    source.execute("migrate", {"uri": uri})
    while True:
        state = source.execute("query-migrate") or {}
        if state.get("status") in ("completed", "failed", "cancelled"):
            break
        if time.monotonic() > end:
            source.execute("migrate_cancel")
            raise TargetError(f"the migration did not end in {timeout:.0f} s ({state.get('status')})")
        time.sleep(0.01)
    if state["status"] != "completed":
        raise TargetError(f"the migration {state['status']}: {state.get('error-desc', '')}".rstrip(": "))
    while (dest.execute("query-status") or {}).get("status") != "running":
        if time.monotonic() > end:
            raise TargetError("the guest did not run after its migration")
        time.sleep(0.01)
    return state


def resume(source: Monitor, timeout: float = 10.0) -> None:
    """Let a source that gave its state away (or did not) run on;
    TargetError where it does not within `timeout` s."""
    end = time.monotonic() + timeout
    while True:
        try:
            if (source.execute("query-status") or {}).get("status") == "running":
                return
            source.execute("cont")
        except OSError as e:
            if time.monotonic() > end:
                raise TargetError(f"the source guest did not run on: {e}") from None
        if time.monotonic() > end:
            raise TargetError("the source guest did not run on after its migration")
        time.sleep(0.01)


def take_state(target: Any, source: Any, argv_of: Callable[..., list[str]]) -> dict:
    """Move a started QEMU guest (QemuTarget) into a new QEMU process that
    holds the state of `source`'s guest (None: its own); argv_of(config,
    accel, plumbing): its command line (qemu.qemu_argv). The old QEMU goes
    once the new one runs; the channel, the threads' placement and the host
    probe are then the new one's (after_boot). A source other than itself
    runs on, also where the move fails. In the thread the guest was launched
    from (the new QEMU dies with it, as a boot's does). query-migrate's
    answer; TargetError where the move fails, the guest left as it was."""
    giver = source or target
    if giver.kind != "qemu":
        raise TargetError(f"{target.name}: a QEMU guest takes the state of another QEMU guest, not of {giver.name}")
    assert target.p is not None and target.plumbing is not None and giver.plumbing is not None, "started"
    for t in {target, giver}:  # a KVM guest's probe holds its monitor, which serves one client at a time
        t.close_probe()
    where = target.workdir / f"move{len(list(target.workdir.glob('move*'))) + 1}"
    # the giver's kernel and initramfs (its ROMs' sizes must match); the console and monitor its own
    plumbing = replace(giver.plumbing, console=where / "console.log", qmp=where / "qmp.sock")
    timeout = MIGRATION_TIMEOUT
    if target.start_by is not None:  # none waits past the run's hard stop
        timeout = max(1.0, min(timeout, target.start_by - time.monotonic()))
    new = None
    try:
        where.mkdir()
        new = target.spawn(argv_of(target.config, target.accel, plumbing) + ["-incoming", "defer"])
        state = _exchange(giver, source is not None, new, plumbing.qmp, where, timeout)
    except BaseException as e:
        if new is not None:
            proc.kill_group(new)
        if isinstance(e, (OSError, ValueError, TargetError)):
            raise TargetError(f"{target.name}: its move into a new QEMU failed: {e}{_last_line(target)}") from None
        raise
    _adopt(target, new, plumbing)
    return state


def _adopt(target: Any, new: subprocess.Popen, plumbing: Any) -> None:
    """The new QEMU is the target's (before the old one goes): its channel,
    its threads placed and its probe made (after_boot)."""
    old, target.p, target.plumbing = target.p, new, plumbing
    try:
        target.channel = Channel(new, target.name, plumbing.console)
        target.probe_note = ""
        target.after_boot()
    finally:
        proc.kill_group(old)


def _exchange(giver: Any, runs_on: bool, new: subprocess.Popen, qmp: Path, where: Path, timeout: float) -> dict:
    """take_state's migration, both monitors closed after it; a giver
    that runs on is resumed whatever happened."""
    dest = connect(qmp, alive=lambda: new.poll() is None)
    try:
        src = connect(giver.plumbing.qmp)
        try:
            return migrate(src, dest, f"unix:{where / 'state.sock'}", timeout)
        finally:
            if runs_on:
                try:
                    resume(src)
                except (OSError, TargetError):
                    pass  # its own next command says what is wrong with it
            src.close()
    finally:
        dest.close()


def _last_line(target: Any) -> str:
    """The last line QEMU wrote to the target's log (its stderr goes there), for a failure's line."""
    try:
        lines = [x for x in target.console_log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return f" (QEMU: {lines[-1][:300]})" if lines else ""
