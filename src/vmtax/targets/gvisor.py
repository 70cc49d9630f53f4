"""gVisor (runsc) as the container target's OCI runtime: a user-space
kernel, the Sentry, that takes every system call of the sandboxed program
(through ptrace, through its systrap platform, or through KVM), and a file
proxy beside it, the Gofer.

What the container target needs of it: which runsc this is and what it
offers (its version, its platforms, from `runsc --version` and `runsc
flags`), the runtime flags a target's options make (`--network`,
`--platform`: runsc sets up its own network, and refuses to run with
network enabled in the host's root network namespace), whether a platform
boots here (probed once per host boot and runsc binary, remembered as UML's
probe is), and the clean-up of a sandbox whose start hung: its processes
leave podman's process group and `podman rm` does not end them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache

from .. import guest
from ..errors import TargetError, UserError
from ..hostproc import boot_id

PLATFORMS = ("systrap", "ptrace", "kvm")  # every platform gVisor has had; a runsc offers some of them
# net= -> runsc's --network: none keeps loopback only, host shares the host's stack
NETWORK = {"none": "none", "host": "host"}
PROBE_TIMEOUT = 20.0  # s: a platform that does not boot here can hang (KVM nested in a microVM spins)


@dataclass(frozen=True)
class Runsc:
    path: str
    version: str  # 'release-20221219.0' or the packaged '0.0~20221219.0'
    platforms: tuple[str, ...]  # what its --platform offers, its default first
    default: str


def is_runsc(version_line: str) -> bool:
    """Whether an OCI runtime's --version line is gVisor's."""
    return version_line.startswith("runsc ")


@lru_cache(maxsize=4)
def runsc(path: str) -> Runsc:
    """What this runsc is and offers; UserError where it answers neither."""
    try:
        version = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        ).stdout
        got = subprocess.run([path, "flags"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
        flags = got.stdout + got.stderr  # it writes them to stderr
    except (OSError, subprocess.SubprocessError) as e:
        raise UserError(f"{path}: cannot ask runsc what it is: {e}") from None
    m = re.search(r"runsc version (\S+)", version)
    platforms, default = parse_platforms(flags)
    if not m or not platforms:
        raise UserError(f"{path}: not a gVisor runsc (its --version and flags name no version or platform)")
    return Runsc(path, m.group(1), platforms, default)


def parse_platforms(flags: str) -> tuple[tuple[str, ...], str]:
    """The platforms `runsc flags` offers and its default, from the
    --platform flag's text ('specifies which platform to use: ptrace
    (default), kvm.' and, in later releases, 'systrap (default), ptrace, kvm')."""
    m = re.search(r"which platform to use:([^.\n]*)", flags)
    if not m:
        return (), ""
    words = re.findall(r"([a-z]+)(\s*\(default\))?", m.group(1))
    names = [w for w, _ in words if w != "default"]
    default = next((w for w, d in words if d), "")
    if not default:
        d = re.search(r'-platform string[^\n]*\n[^\n]*\(default "([a-z]+)"\)', flags)
        default = d.group(1) if d else (names[0] if names else "")
    ordered = [default] + [n for n in names if n != default] if default in names else names
    return tuple(ordered), default


def check_options(name: str, options: dict[str, str], version_line: str, runtime: str, net: str) -> str | None:
    """The platform a container target asks of gVisor (None: not gVisor);
    UserError for what cannot work: gVisor's options on another runtime, an
    unknown platform, one this runsc is too old for, a network it does not
    offer.  Nothing is started."""
    if not is_runsc(version_line):
        if "platform" in options:
            raise UserError(
                f"target '{name}': platform= is gVisor's option (runtime=runsc); {runtime} is not runsc "
                f"({version_line or 'no version'})"
            )
        return None
    info = runsc(runtime)
    platform = options.get("platform", info.default)
    if platform not in PLATFORMS:
        raise UserError(f"target '{name}': platform must be one of {', '.join(PLATFORMS)} (gVisor's), got '{platform}'")
    if platform not in info.platforms:
        raise UserError(
            f"target '{name}': platform={platform}: runsc {info.version} is too old for it "
            f"(it offers {', '.join(info.platforms)}; systrap came with gVisor's 2023 releases)"
        )
    if net not in NETWORK:
        raise UserError(
            f"target '{name}': net={net} with gVisor: runsc here runs with net={' or net='.join(NETWORK)} "
            "(with podman's other networks runsc's own stack refuses to start: it reads the namespace it is given "
            "as the host's root one)"
        )
    return platform


def counters_inside(counters) -> str:
    """What the agent can count inside the sandbox, from its --env report
    (gVisor has no perf_event_open: getrusage stands in where it can)."""
    if not isinstance(counters, dict) or not counters:
        return "the agent reported no counters"
    by: dict[str, list[str]] = {}
    for name, source in counters.items():
        by.setdefault("not counted" if str(source).startswith("not counted") else str(source), []).append(name)
    said = [f"{src}: {', '.join(names)}" for src, names in by.items() if src != "not counted"]
    if "not counted" in by:
        said.append(f"not counted (no such counter in gVisor's kernel): {', '.join(by['not counted'])}")
    return "; ".join(said)


def runtime_flags(platform: str, net: str) -> list[str]:
    """podman's --runtime-flag arguments for this sandbox."""
    return ["--runtime-flag", f"network={NETWORK[net]}", "--runtime-flag", f"platform={platform}"]


def kill_leftovers(cid: str) -> None:
    """End every runsc process of container cid (sandbox, gofer, a create
    that hung), its conmon, and runsc's record of it: they leave podman's process group,
    so a killed podman or `podman rm` of a start that hung leaves them.
    The 64-digit id names them and nothing else."""
    if not re.fullmatch(r"[0-9a-f]{64}", cid):
        return
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        prog = os.path.basename(argv[0]) if argv else b""
        if (prog.startswith(b"runsc") or prog == b"conmon") and any(cid.encode() in a for a in argv):
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
    try:
        subprocess.run(["runsc", "delete", "--force", cid], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        pass


def _key(info: Runsc, platform: str) -> str:
    return f"{boot_id()}|{info.path}|{os.stat(info.path).st_mtime}|{platform}"


def known_failure(info: Runsc, platform: str) -> str:
    """Why a sandbox on this platform did not start here when last probed
    (this host boot, this runsc); '' if it did or was never probed."""
    return guest.probe_memory("gvisor").get(_key(info, platform)) or ""


def probe(info: Runsc, platform: str, base_argv: list[str]) -> str:
    """Whether a sandbox on this platform boots here: '' if it does, else
    why not.  Remembered until the host reboots or runsc changes (the KVM
    platform spins without booting on a host whose /dev/kvm is a nested
    one that cannot run it: PROBE_TIMEOUT)."""
    key = _key(info, platform)
    known = guest.probe_memory("gvisor").get(key)
    if known is not None:
        return known
    return guest.remember_probe("gvisor", key, _try(info, platform, base_argv))


def _try(info: Runsc, platform: str, base_argv: list[str]) -> str:
    try:
        root = str(guest.rootfs_dir())
    except (TargetError, UserError) as e:
        return str(e)
    with tempfile.TemporaryDirectory(prefix="vmtax-gvisor-") as tmp:
        cidfile = os.path.join(tmp, "cid")
        argv = [*base_argv, *runtime_flags(platform, "none"), "--network", "none", "--cidfile", cidfile]
        argv += ["--rootfs", root, "/bin/busybox", "true"]
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT, stdin=subprocess.DEVNULL)
            if p.returncode == 0:
                return ""
            last = (p.stderr.strip().splitlines() or ["?"])[-1]
            return f"runsc --platform={platform} failed: {last[:160]}"
        except subprocess.TimeoutExpired:
            return f"a sandbox on platform {platform} did not start within {PROBE_TIMEOUT:.0f} s"
        except OSError as e:
            return f"podman failed: {e}"
        finally:
            _remove(cidfile)


def _remove(cidfile: str) -> None:
    try:
        with open(cidfile) as f:
            cid = f.read().strip()
    except OSError:
        return
    subprocess.run(["podman", "rm", "-f", "-t", "0", cid], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    kill_leftovers(cid)
