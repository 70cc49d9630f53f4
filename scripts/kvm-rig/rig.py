"""`make test-kvm`: vmtax's KVM path run for real, on a host with no usable
KVM of its own, by nesting one inside a TCG guest.

QEMU's TCG emulates AMD-V (SVM, with nested paging) for its AMD CPU models,
whatever the host's CPU: the outer guest (`-accel tcg -cpu EPYC`, Debian's
generic kernel) loads kvm-amd and has a real /dev/kvm.  It runs vmtax
itself, from this host's root filesystem shared read-only over virtio-9p
(a tmpfs overlay takes its writes), so the real controller drives the real
`qemu:accel=kvm` target with the real agent, and reads the VM exits of its
vCPU threads from KVM's own kvm:kvm_exit tracepoint, as on any KVM host.
The alternative, the agent inside and the controller outside, would need a
channel from the host into the inner guest and a second, remote way to read
the exits; here nothing of vmtax changes for the rig.

Timings in there are TCG's and mean nothing; exit COUNTS are KVM's own, and
are checked: `cpuid` one exit per operation (reason cpuid), `getppid` none,
the guest's accel fact `kvm`, and the KVM-only tests (pytest -m kvm) passed.
Exit 0 when all hold, 1 when one does not, 2 when the rig cannot start here.

The outer guest's initramfs (busybox, its modules, outer-init) is cached in
vmtax's cache directory.  Its QEMU and the rig's directory go on every exit
path (Ctrl-C, SIGTERM; SIGKILL: QEMU dies with the rig, the directory is
swept by the next run).  The outer guest has no network (`-nic none`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(HERE.parent))

import rigkit  # noqa: E402

from vmtax import proc  # noqa: E402
from vmtax.errors import TargetError, UserError  # noqa: E402
from vmtax.targets.qemu import QEMU  # noqa: E402

# what the outer guest's kernel needs beyond what it has built in: the 9p
# root, the overlay over it, and KVM on AMD-V
DRIVERS = (
    ("virtio_pci", "VIRTIO_PCI"),
    ("9pnet_virtio", "NET_9P_VIRTIO"),
    ("9p", "9P_FS"),
    ("overlay", "OVERLAY_FS"),
    ("kvm_amd", "KVM_AMD"),
)
TARGET = "qemu:accel=kvm"
BENCH = ("getppid", "cpuid", "page_fault", "pi")
# counted batches of 300 ms: a nested-TCG guest runs a CPUID in ~100 us, and the batch must be long
# against the agent's report of it over the serial channel (~300 bytes, each written an `io` exit);
# processes one after another (lockstep's 1-ms samples are a few CPUIDs in there: its sample of
# cpuid on the nested guest came back as 0.0 and the row failed)
COMPARE_ARGS = (
    "--pairing blocks --min-time-ms 300 --samples 2 --warmup 1 --min-processes 5 --precision 99% --max-time 4m"
)
CPUID_RANGE = (0.9, 1.1)  # exits of reason cpuid per CPUID
GETPPID_MAX = 0.1  # VM exits per getppid


class Failed(Exception):
    """The rig cannot run here (exit 2): one line saying why."""


def outer_kernel() -> tuple[Path, list[str]]:
    """The first kernel under /boot with the drivers the outer guest needs
    (Debian's generic one; the cloud kernel has no 9p)."""
    try:
        return rigkit.outer_kernel(DRIVERS, "the KVM rig's outer guest")
    except UserError as e:
        raise Failed(str(e)) from None


def initramfs(kernel: Path, modules: list[str]) -> Path:
    return rigkit.initramfs(kernel, modules, HERE / "outer-init", "kvm-rig")


def check_paths(*paths: Path) -> None:
    for p in paths:
        if re.search(r"[\s,]", str(p)):
            raise Failed(f"{p}: a path with a space or a comma cannot go on QEMU's or the kernel's command line")


def argv(kernel: Path, initrd: Path, work: Path, smp: int, mem_mb: int) -> list[str]:
    home = Path(os.path.expanduser("~"))
    check_paths(REPO, work, home)
    return [
        QEMU,
        "-accel",
        "tcg",
        "-cpu",
        "EPYC",
        "-smp",
        str(smp),
        "-m",
        f"{mem_mb}M",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-nic",
        "none",
        "-kernel",
        str(kernel),
        "-initrd",
        str(initrd),
        "-append",
        f"console=ttyS0 quiet loglevel=3 panic=-1 rig.repo={REPO} rig.home={home}",
        "-serial",
        f"file:{work / 'console.log'}",
        "-serial",
        "stdio",
        "-fsdev",
        "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
        "-device",
        "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
        "-fsdev",
        f"local,id=rigout,path={work / 'out'},security_model=none,multidevs=remap",
        "-device",
        "virtio-9p-pci,fsdev=rigout,mount_tag=rigout",
    ]


def prepare() -> None:
    """What the outer guest would otherwise build slowly under TCG, made here
    where it is quick and shared with it through the read-only root: the
    venv's byte code and matplotlib's font cache (vmtax imports both), and
    the inner guest's initramfs."""
    vmtax = REPO / ".venv" / "bin" / "vmtax"
    if not os.access(vmtax, os.X_OK):
        raise Failed(f"{vmtax} is missing: run make setup")
    code = (
        "import vmtax.cli, vmtax.kvmexits, vmtax.report.explain, matplotlib.font_manager; "
        "from vmtax import guest; guest.initramfs()"
    )
    p = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    if p.returncode != 0:
        raise Failed("vmtax does not start here: " + (p.stderr.strip().splitlines() or ["?"])[-1])


def run(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    if not shutil.which(QEMU):
        raise Failed(f"{QEMU} is missing (apt install qemu-system-x86)")
    if "," in tempfile.gettempdir():
        raise Failed(f"the temporary directory {tempfile.gettempdir()} holds a comma: give a TMPDIR without one")
    kernel, modules = outer_kernel()
    try:
        initrd = initramfs(kernel, modules)
    except (OSError, TargetError) as e:
        raise Failed(f"cannot build the outer guest's initramfs: {e}") from None
    prepare()
    proc.sweep()
    work = proc.private_dir("kvmrig")
    qemu = None
    try:
        (work / "out").mkdir()
        shutil.copyfile(args.script or HERE / "inside.sh", work / "out" / "inside.sh")
        (work / "out" / "rig.env").write_text(
            f"TARGET='{TARGET}'\nBENCH='{' '.join(args.bench)}'\nCOMPARE_ARGS='{COMPARE_ARGS}'\n"
        )
        cmd = argv(kernel, initrd, work, args.smp, args.mem)
        print(
            f"kvm rig: an outer TCG guest with AMD-V ({kernel.name}, -smp {args.smp}, -m {args.mem}M, "
            f"no network) runs vmtax from this host's root; its timings are TCG's, its exit counts KVM's",
            flush=True,
        )
        with open(work / "qemu.log", "wb") as log:  # QEMU holds its own copy
            qemu = proc.spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
        timer = threading.Timer(args.timeout, lambda: proc.kill_group(qemu))
        timer.daemon = True
        timer.start()
        for line in iter(qemu.stdout.readline, b""):
            sys.stdout.write(line.decode(errors="replace").replace("\r", ""))
            sys.stdout.flush()
        qemu.wait()
        timer.cancel()
        took = time.monotonic() - t0
        if took >= args.timeout:
            print(f"kvm rig: stopped after {args.timeout:.0f} s (--timeout)", file=sys.stderr)
        ok = verdict(work, took)
        if args.keep:
            keep = Path(args.keep)
            keep.mkdir(parents=True, exist_ok=True)
            for f in (work / "out").iterdir():
                shutil.copyfile(f, keep / f.name)
            shutil.copyfile(work / "console.log", keep / "console.log")
        return 0 if ok else 1
    finally:
        if qemu is not None:
            proc.kill_group(qemu)
        shutil.rmtree(work, ignore_errors=True)


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").replace("\r", "").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in lines[-n:] if line.strip())


def _cell(explain: dict, bench: str, key: str, target: str) -> dict:
    """One cell of explain's JSON: mean, ci_low, ci_high ({} where absent)."""
    for b in explain.get("benchmarks", []):
        if b["benchmark"] == bench:
            for r in b["rows"]:
                if r["key"] == key:
                    return r["values"].get(target, {})
    return {}


def _row(explain: dict, bench: str, key: str, target: str) -> float | None:
    v = _cell(explain, bench, key, target).get("mean")
    return v if isinstance(v, (int, float)) else None


def _ci(explain: dict, bench: str, key: str, target: str) -> str:
    c = _cell(explain, bench, key, target)
    lo, hi = c.get("ci_low"), c.get("ci_high")
    return f" (95% CI {lo:.4g}-{hi:.4g})" if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) else ""


def checks(out: Path) -> list[tuple[bool, str]]:
    """(holds, what) for each thing the rig asserts."""
    res: list[tuple[bool, str]] = []
    status = {}
    for line in (out / "status").read_text().splitlines() if (out / "status").exists() else []:
        step, _, rest = line.partition(" ")
        status[step] = rest
    if "init" in status:
        return [(False, f"the outer guest's init: {status['init']}")]
    if "cause" in status:
        return [(False, f"inside the outer guest: {status['cause']}")]
    if "compare" not in status and "inside" in status:  # inside.sh ended before its first step, saying nothing
        return [(False, f"inside the outer guest: inside.sh exited {status['inside']} before vmtax compare ended")]
    if "compare" not in status:
        return [(False, "inside the outer guest: vmtax compare had not ended when the outer guest stopped")]
    res.append((status.get("compare") == "0", f"vmtax compare exit status {status.get('compare', 'none')}"))
    try:
        doc = json.loads((out / "compare.json").read_text())
        explain = json.loads((out / "explain.json").read_text())
    except (OSError, ValueError) as e:
        return res + [(False, f"no results from inside: {e}")]
    facts = next((t.get("facts", {}) for t in doc.get("targets", []) if t.get("name") == TARGET), {})
    res.append(
        (
            facts.get("accel") == "kvm" and facts.get("hypervisor_vendor") == "KVMKVMKVM",
            f"{TARGET}: accel fact {facts.get('accel')!r} (want 'kvm'), the guest sees hypervisor "
            f"{facts.get('hypervisor_vendor')!r}",
        )
    )
    res.append(
        (
            "kvm:kvm_exit" in str(facts.get("host_probe")),
            f"{TARGET}: host probe counts {facts.get('host_probe')!r}"
            + (f"; missing: {facts['host_probe_missing']}" if facts.get("host_probe_missing") else ""),
        )
    )
    cpuid, total = _row(explain, "cpuid", "exits_cpuid", TARGET), _row(explain, "cpuid", "exits", TARGET)
    lo, hi = CPUID_RANGE
    res.append(
        (
            cpuid is not None and lo <= cpuid <= hi,
            f"cpuid: {_g(cpuid)} exits of reason cpuid per op{_ci(explain, 'cpuid', 'exits_cpuid', TARGET)} "
            f"(want {lo}-{hi}); all exits {_g(total)} per op",
        )
    )
    getppid = _row(explain, "getppid", "exits", TARGET)
    res.append(
        (
            getppid is not None and getppid < GETPPID_MAX,
            f"getppid: {_g(getppid)} VM exits per op{_ci(explain, 'getppid', 'exits', TARGET)} "
            f"(want below {GETPPID_MAX})",
        )
    )
    for bench in ("page_fault", "pi"):
        if any(b["benchmark"] == bench for b in explain.get("benchmarks", [])):
            npf = _row(explain, bench, "exits_npf", TARGET)
            res.append(
                (
                    True,
                    f"{bench}: {_g(_row(explain, bench, 'exits', TARGET))} VM exits per op"
                    + (f", {_g(npf)} of them nested page faults" if npf is not None else "")
                    + " (shown, not checked)",
                )
            )
    try:
        suite = ET.parse(out / "kvm-tests.xml").getroot()
        suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
        n, bad = int(suite.get("tests", 0)), int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        res.append(
            (
                n > 0 and bad == 0 and skipped == 0 and status.get("tests") == "0",
                f"KVM-only tests (pytest -m kvm): {n - bad - skipped} passed, {bad} failed, {skipped} skipped",
            )
        )
    except (OSError, ET.ParseError, ValueError) as e:
        res.append((False, f"KVM-only tests: no report ({e})"))
    return res + shared_checks(out, status)


def shared_checks(out: Path, status: dict[str, str]) -> list[tuple[bool, str]]:
    """compare --shared-boot of two KVM guests: it ran, every round on one
    boot shared by both (boots >= 2 a side), each side's cpuid exits counted
    by the probe of the QEMU it moved into."""
    said = f"compare --shared-boot (KVM): exit status {status.get('shared', 'none')}"
    try:
        doc = json.loads((out / "shared.json").read_text())
    except (OSError, ValueError) as e:
        return [(False, f"{said}; no results: {e}")]
    boots = [t.get("facts", {}).get("boots") for t in doc.get("targets", [])]
    exits = [
        r.get("metrics", {}).get("exits_cpuid", {}).get("mean")
        for r in doc.get("results", [])
        if r.get("benchmark") == "cpuid"
    ]
    lo, hi = CPUID_RANGE
    return [
        (
            status.get("shared") == "0" and len(boots) == 2 and all((b or 0) >= 2 for b in boots),
            f"{said}; boots {boots}",
        ),
        (
            len(exits) == 2 and all(e is not None and lo <= e <= hi for e in exits),
            f"compare --shared-boot (KVM): cpuid exits of reason cpuid per op on each side {exits} (want {lo}-{hi})",
        ),
    ]


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def verdict(work: Path, took: float) -> bool:
    res = checks(work / "out")
    print("\nkvm rig: what must hold (exit counts are KVM's own; timings in the outer guest are TCG's)")
    for ok, what in res:
        print(f"  {'ok  ' if ok else 'FAIL'}  {what}")
    good = bool(res) and all(ok for ok, _ in res)
    if not good:
        tail = _tail(work / "console.log")
        if tail:
            print("  the outer guest's console, last lines:\n" + tail)
        qlog = _tail(work / "qemu.log", 5)
        if qlog:
            print("  its QEMU said:\n" + qlog)
    print(f"kvm rig: {'passed' if good else 'FAILED'} in {int(took // 60)} min {int(took % 60)} s")
    return good


def main() -> int:
    p = argparse.ArgumentParser(prog="scripts/kvm-rig/rig.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--bench",
        nargs="+",
        default=list(BENCH),
        help="rows of the compare (getppid and cpuid are checked; default: %(default)s)",
    )
    p.add_argument("--smp", type=int, default=2, help="the outer guest's vCPUs (default 2)")
    p.add_argument("--mem", type=int, default=3072, help="the outer guest's memory in MiB (default 3072)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds before the outer guest is stopped")
    p.add_argument("--keep", metavar="DIR", help="copy the results (JSON, the run's database, logs) to DIR")
    p.add_argument(
        "--script",
        metavar="FILE",
        help="run this shell script inside instead of inside.sh "
        "(its arguments: the repository, the results directory); the checks then fail",
    )
    args = p.parse_args()
    for needed in ("getppid", "cpuid"):
        if needed not in args.bench:
            args.bench.append(needed)

    def stop(signum, frame):
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGINT too where a shell ignored it
        signal.signal(sig, stop)
    try:
        return run(args)
    except Failed as e:
        print(f"kvm rig: cannot run here: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kvm rig: interrupted; its QEMU and directory are gone", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
