"""`make test-xen`: vmtax's Xen path run for real, on a host with no Xen of
its own, by nesting one inside a TCG guest.

Debian's Xen 4.17 (xen-hypervisor-4.17-amd64) boots under QEMU's TCG with
`-cpu EPYC,-monitor` and `smap=0 smep=0` on its command line (TCG's SMAP
breaks Xen's PV bounce frame; MWAIT would #GP in its idle loop); Debian's
generic kernel is its PV dom0.  Nothing is installed on this host: the
packages are downloaded (`apt-get download`) and extracted into vmtax's
cache; the outer guest shares this host's root read-only over virtio-9p
(a tmpfs overlay takes its writes), copies the tools tree in and starts
xenstored, xenconsoled and xl.  vmtax runs there, from this clone: the
real controller starts the real `xen:` targets (a PV and a PVH domU) and
compares them with dom0, then explains them with xentrace's counts.  A
second boot of the same outer guest without Xen measures bare Linux on
the same emulated machine: the baseline a domU's ratio is taken to (dom0
is itself a PV guest, so no boot under Xen has a bare side).

Timings in there are TCG's and mean nothing about a production Xen; the
COUNTS (hypercalls and PV events per operation) are Xen's own, and are
checked: getppid ~1 iret hypercall per op in a PV domU, a page fault ~1
mmu_update, CPUID none; getppid no hypercall in a PVH domU; and
`compare --reboot` gives its rounds fresh PV domUs (three boots or more).
Exit 0 when all hold, 1 when one does not, 2 when the rig cannot start here.

Its QEMU and temporary directory go on every exit path (Ctrl-C, SIGTERM;
SIGKILL: QEMU dies with the rig, the directory is swept by the next run).
The outer guest has no network (`-nic none`).
"""

from __future__ import annotations

import argparse
import glob
import gzip
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(HERE.parent))

import rigkit  # noqa: E402

from vmtax import guest, proc  # noqa: E402
from vmtax.errors import TargetError, UserError  # noqa: E402
from vmtax.targets.qemu import QEMU  # noqa: E402

PACKAGES = (
    "xen-hypervisor-4.17-amd64 xen-utils-4.17 xen-utils-common xenstore-utils libxenmisc4.17 libxenstore4 "
    "libxentoolcore1 libxentoollog1 libxencall1 libxenevtchn1 libxenforeignmemory1 libxengnttab1 "
    "libxendevicemodel1 libxenhypfs1"
).split()
DRIVERS = (
    ("virtio_pci", "VIRTIO_PCI"),
    ("9pnet_virtio", "NET_9P_VIRTIO"),
    ("9p", "9P_FS"),
    ("overlay", "OVERLAY_FS"),
    ("xen_evtchn", "XEN_DEV_EVTCHN"),
    ("xenfs", "XENFS"),
    ("xen_privcmd", "XEN_PRIVCMD"),
    ("xen_gntdev", "XEN_GNTDEV"),
    ("xen_gntalloc", "XEN_GRANT_DEV_ALLOC"),
)
BENCH = ("getppid", "page_fault", "forkwait", "mmap")
CPUID_BENCH = ("cpuid",)
# samples of 100 ms, 5 processes a row at least (two of them counting: an interval on each count), a
# precision any row meets by then: the counts are what is checked, and TCG's timings mean little
ARGS = "--min-time-ms 100 --samples 2 --warmup 1 --min-processes 5 --precision 99%"
MAX_TIME = "5m"  # the compare of four rows; the CPUID one has 2m
XEN_ARGS = (
    "console=com1 com1=115200,8n1 dom0_mem=1536M,max:1536M dom0_max_vcpus=1 dom0_vcpus_pin noreboot smap=0 smep=0 "
    "guest_loglvl=all"  # a guest Xen crashes says why on the console
)
PV, PVH = "xen:type=pv", "xen:type=pvh"
# what must hold (counts per op, Xen's own)
CHECKS = (
    ("getppid", PV, "hypercalls_iret", 0.9, 1.2, "iret hypercalls per getppid, PV domU"),
    ("page_fault", PV, "hypercalls_mmu_update", 0.9, 1.2, "mmu_update hypercalls per page fault, PV domU"),
    ("page_fault", PV, "xen_pf_bounces", 0.9, 1.2, "#PF bounces per page fault, PV domU"),
    ("cpuid", PV, "hypercalls", 0.0, 0.05, "hypercalls per CPUID, PV domU"),
    ("getppid", PVH, "hypercalls", 0.0, 0.05, "hypercalls per getppid, PVH domU"),
    ("cpuid", PVH, "exits_cpuid", 0.9, 1.2, "VM exits of reason cpuid per CPUID, PVH domU"),
)


class Failed(Exception):
    """The rig cannot run here (exit 2): one line saying why."""


def xen_tree() -> tuple[Path, Path]:
    """Xen's packages downloaded and extracted into the cache (never
    installed): the hypervisor as an ELF QEMU's -kernel boots, and the tools
    tree dom0 copies in."""
    base = guest.cache_dir() / "xen-rig"
    root, elf = base / "root", base / "xen.elf"
    if elf.exists() and (root / "usr" / "lib" / "xen-4.17" / "bin" / "xl").exists():
        return elf, root
    debs = base / "debs"
    shutil.rmtree(base, ignore_errors=True)
    debs.mkdir(parents=True)
    os.chmod(debs, 0o777)  # apt's _apt user writes there
    p = subprocess.run(
        ["apt-get", "download", *PACKAGES], cwd=debs, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if p.returncode != 0:
        raise Failed("cannot download Xen's packages: " + (p.stderr.strip().splitlines() or ["?"])[-1])
    for deb in sorted(debs.glob("*.deb")):
        x = subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], capture_output=True, text=True)
        if x.returncode != 0:
            raise Failed(f"cannot extract {deb.name}: {x.stderr.strip()}")
    gz = sorted(glob.glob(str(root / "boot" / "xen-4.17*-amd64.gz")))
    if not gz:
        raise Failed("xen-hypervisor-4.17-amd64 holds no boot/xen-4.17*-amd64.gz")
    with gzip.open(gz[-1]) as src, open(elf.with_suffix(".tmp"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.replace(elf.with_suffix(".tmp"), elf)
    return elf, root


def outer_kernel() -> tuple[Path, list[str]]:
    """The first kernel under /boot with the drivers the outer guest needs
    (Debian's generic one; the cloud kernel has no 9p)."""
    try:
        return rigkit.outer_kernel(DRIVERS, "the Xen rig's outer guest")
    except UserError as e:
        raise Failed(str(e)) from None


def initramfs(kernel: Path, modules: list[str]) -> Path:
    return rigkit.initramfs(kernel, modules, HERE / "outer-init", "xen-rig")


def binds(*paths: Path) -> str:
    """The paths the outer guest must bind through its fresh /tmp and /run."""
    out = []
    for p in paths:
        real = p.resolve()
        if re.search(r"[\s,]", str(real)):
            raise Failed(f"{real}: a path with a space or a comma cannot go on the kernel's command line")
        if real.parts[1:2] in (("tmp",), ("run",)):
            out.append(str(real))
    return ",".join(dict.fromkeys(out))


def argv(mode: str, xen: Path, kernel: Path, initrd: Path, work: Path, bind: str) -> list[str]:
    linux = f"loglevel=3 rig.mode={mode}" + (f" rig.bind={bind}" if bind else "")
    common = [
        QEMU,
        "-accel",
        "tcg",
        "-cpu",
        "EPYC,-monitor",
        "-smp",
        "2",
        "-m",
        "4096",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-nic",
        "none",
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
    if mode == "xen":
        return common + [
            "-kernel",
            str(xen),
            "-append",
            XEN_ARGS,
            "-initrd",
            f"{kernel} console=hvc0 {linux},{initrd}",
        ]
    bare = f"console=ttyS0 mem=1536M maxcpus=1 {linux}"
    return common + ["-kernel", str(kernel), "-initrd", str(initrd), "-append", bare]


def prepare() -> None:
    """What the outer guest would otherwise build slowly under TCG, made here
    and shared with it through the read-only root: the venv's byte code,
    matplotlib's font cache and the domUs' initramfs."""
    vmtax = REPO / ".venv" / "bin" / "vmtax"
    if not os.access(vmtax, os.X_OK):
        raise Failed(f"{vmtax} is missing: run make setup")
    code = (
        "import vmtax.cli, vmtax.xentrace, vmtax.report.explain, matplotlib.font_manager; "
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


def boot(cmd: list[str], work: Path, timeout: float, log_name: str) -> None:
    """One outer guest, its console relayed here and kept in work/log_name."""
    with open(work / f"{log_name}.qemu.log", "wb") as qlog, open(work / f"{log_name}.console", "w") as console:
        qemu = proc.spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=qlog)
        timer = threading.Timer(timeout, lambda: proc.kill_group(qemu))
        timer.daemon = True
        timer.start()
        try:
            assert qemu.stdout is not None
            for raw in iter(qemu.stdout.readline, b""):
                line = raw.decode(errors="replace").replace("\r", "")
                console.write(line)
                console.flush()  # a rig's progress, read live
                sys.stdout.write("  " + line)
                sys.stdout.flush()
            qemu.wait()
        finally:
            timer.cancel()
            proc.kill_group(qemu)


def run(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    if not shutil.which(QEMU):
        raise Failed(f"{QEMU} is missing (apt install qemu-system-x86)")
    if "," in tempfile.gettempdir():
        raise Failed(f"the temporary directory {tempfile.gettempdir()} holds a comma: give a TMPDIR without one")
    xen, root = xen_tree()
    kernel, modules = outer_kernel()
    try:
        initrd = initramfs(kernel, modules)
    except (OSError, TargetError) as e:
        raise Failed(f"cannot build the outer guest's initramfs: {e}") from None
    prepare()
    proc.sweep()
    work = proc.private_dir("xenrig")
    try:
        out = work / "out"
        out.mkdir()
        shutil.copyfile(args.script or HERE / "inside.sh", out / "inside.sh")
        (out / "rig.env").write_text(
            f"REPO='{REPO}'\nCACHE='{guest.cache_dir().parent}'\nXENROOT='{root}'\n"
            f"BENCH='{' '.join(BENCH)}'\nCPUID_BENCH='{' '.join(CPUID_BENCH)}'\nARGS='{ARGS}'\nMAX_TIME='{MAX_TIME}'\n"
        )
        bind = binds(REPO, guest.cache_dir())
        print(
            f"xen rig: outer TCG guests (-cpu EPYC,-monitor, -smp 2, no network) from this host's root: "
            f"Xen {xen.name} with {kernel.name} as its PV dom0, then the same kernel bare; timings are TCG's, "
            "hypercall counts Xen's own",
            flush=True,
        )
        for mode in ("xen", "bare"):
            left = args.timeout - (time.monotonic() - t0)
            if left <= 60:
                print(f"xen rig: no time left for the {mode} boot (--timeout)", file=sys.stderr)
                break
            print(f"xen rig: booting the outer guest ({mode})", flush=True)
            boot(argv(mode, xen, kernel, initrd, work, bind), work, left, mode)
        took = time.monotonic() - t0
        return 0 if verdict(work, took) else 1
    finally:
        if args.keep:  # what there is, on every path: an interrupted rig's consoles too
            keep = Path(args.keep)
            keep.mkdir(parents=True, exist_ok=True)
            for f in list(work.glob("out/*")) + list(work.glob("*.console")) + list(work.glob("*.qemu.log")):
                if f.is_file():
                    shutil.copyfile(f, keep / f.name)
        shutil.rmtree(work, ignore_errors=True)


def _cell(explain: dict, bench: str, key: str, target: str) -> dict:
    """The target's cell of a row, from the first run that measured it there."""
    for b in explain.get("benchmarks", []):
        if b["benchmark"] == bench:
            for r in b["rows"]:
                if r["key"] == key and r["values"].get(target):
                    return r["values"][target]
    return {}


def _g(x) -> str:
    return "-" if not isinstance(x, (int, float)) else f"{x:.4g}"


def checks(out: Path) -> list[tuple[bool, str]]:
    """(holds, what) for each thing the rig asserts."""
    status: dict[str, str] = {}
    for line in (out / "status").read_text().splitlines() if (out / "status").exists() else []:
        step, _, rest = line.partition(" ")
        status[step] = rest
    if "init" in status:
        return [(False, f"the outer guest's init: {status['init']}")]
    res = [
        (status.get(s) == "0", f"{s}: exit status {status.get(s, 'none (it never ran)')}")
        for s in (
            *("toolstack", "compare", "explain", "compare-cpuid", "explain-cpuid"),
            *("lockstep", "explain-lockstep", "reboot", "tests", "bare"),
        )
    ]
    try:  # compare --reboot: a domain of its own for each round
        doc = json.loads((out / "compare-reboot.json").read_text())
        boots = next(t["facts"].get("boots") for t in doc["targets"] if t["name"] == "xen:type=pv")
        res.append(
            (isinstance(boots, int) and boots >= 3, f"boots of the PV domU under --reboot: {boots} (want 3 or more)")
        )
    except (OSError, ValueError, KeyError, StopIteration) as e:
        res.append((False, f"no compare-reboot.json from inside: {e}"))
    explain: dict = {"benchmarks": []}
    for name in ("explain.json", "explain-cpuid.json", "explain-lockstep.json"):
        try:
            explain["benchmarks"] += json.loads((out / name).read_text()).get("benchmarks", [])
        except (OSError, ValueError) as e:
            res.append((False, f"no {name} from inside: {e}"))
    for bench, target, key, lo, hi, what in CHECKS:
        c = _cell(explain, bench, key, target)
        mean = c.get("mean")
        ci = f" (95% CI {_g(c.get('ci_low'))}-{_g(c.get('ci_high'))})" if "ci_low" in c else ""
        res.append((isinstance(mean, (int, float)) and lo <= mean <= hi, f"{what}: {_g(mean)}{ci} (want {lo}-{hi})"))
    return res


def verdict(work: Path, took: float) -> bool:
    res = checks(work / "out")
    print("\nxen rig: what must hold (hypercall counts are Xen's own; timings in the outer guest are TCG's)")
    for ok, what in res:
        print(f"  {'ok  ' if ok else 'FAIL'}  {what}")
    good = bool(res) and all(ok for ok, _ in res)
    if not good:
        for mode in ("xen", "bare"):
            path = work / f"{mode}.console"
            lines = path.read_text(errors="replace").splitlines()[-12:] if path.exists() else []
            if lines:
                print(f"  the outer guest's console ({mode}), last lines:\n" + "\n".join("    " + x for x in lines))
    print(f"xen rig: {'passed' if good else 'FAILED'} in {int(took // 60)} min {int(took % 60)} s")
    return good


def main() -> int:
    p = argparse.ArgumentParser(prog="scripts/xen-rig/rig.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--timeout", type=float, default=2400, help="seconds before the rig stops its outer guests")
    p.add_argument("--keep", metavar="DIR", help="copy the results (JSON, the runs' databases, logs) to DIR")
    p.add_argument(
        "--script",
        metavar="FILE",
        help="run this shell script inside instead of inside.sh (its arguments: the mode, xen or bare, "
        "and the results directory); the checks then fail",
    )
    args = p.parse_args()

    def stop(signum, frame):
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        return run(args)
    except Failed as e:
        print(f"xen rig: cannot run here: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("xen rig: interrupted; its QEMU and directory are gone", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
