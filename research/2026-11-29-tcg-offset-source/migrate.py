"""vmtax compare --reboot with what happens between rounds replaced by live
migrations of the QEMU guests on this host -- an experiment, not the
product.  Does a TCG guest's per-boot offset live in the guest's state or
in the host's placement of QEMU's memory, and do two guests in one state
still differ as two boots do?

MIG=1: each round every guest moves into a new QEMU process (identical
guest state, fresh host memory); MIG=0: nothing, rounds in one boot (the
control); MIG=share: once, at the first round, every guest but the first
named takes the first one's state (the source runs on), no boot after;
MIG=each: every round the first guest is booted afresh and the others take
its state; MIG=donor: as each, and then the first guest moves into a new
QEMU of its own too, so that every side runs in a migration's destination.
MLOG=PATH: the migration log (default migrate-log.txt).
Every workdir (QEMU's sockets, console) lies under a temp dir this script
makes (x55-mig-*), so its QEMUs are told apart by their command lines.

Per migration (restart(), in the main thread: the new QEMU dies with it,
PR_SET_PDEATHSIG, as a boot's does):
  1. argv: the running QEMU's /proc/PID/cmdline (what qemu_argv() built at
     launch) with -serial file:<console> and -qmp unix:<sock> moved into a
     fresh t.workdir/mig<N>/, plus -incoming defer; started by t.spawn(),
     so pinned to t.host_cpu with vmtax's stdio pipes and process group.
  2. migrate-incoming unix:mig<N>/mig.sock on the new one, migrate on the
     old one, query-migrate until completed, query-status until running;
     the old probe closed and the old QEMU killed and reaped (kill_group).
  3. re-attached: t.p, t.channel (a new Channel on the new pipes, console
     log mig<N>/console.log), t.vcpu_cpus / t.emulator_cpus from
     place_threads() (as after_boot), t.host_probe from start_probe() (the
     first boot's idle rates kept, as on a reboot; its settle PINGs cross
     the new channel), checked first with an explicit PING.
"""
import os, shutil, sys, tempfile, time
from pathlib import Path

MODE = os.environ.get("MIG", "1")
LOGPATH = os.environ.get("MLOG", "migrate-log.txt")
MYTMP = tempfile.mkdtemp(prefix="x55-mig-")
os.environ["TMPDIR"] = MYTMP
tempfile.tempdir = MYTMP

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from vmtax import proc  # noqa: E402
from vmtax.engine import session  # noqa: E402
from vmtax.hostprobe import Qmp  # noqa: E402
from vmtax.targets.channel import Channel  # noqa: E402
from vmtax.targets.qemu import place_threads  # noqa: E402

LOG = open(LOGPATH, "a")
COUNT = {}
QMP_PATH = {}  # target name -> the live QEMU's QMP socket (the first boot's: workdir/qmp.sock)


def log(line):
    LOG.write(f"{time.time():.1f} {line}\n")
    LOG.flush()


def qmp_connect(path, timeout=10.0):
    end = time.monotonic() + timeout
    while True:
        try:
            return Qmp(path)
        except (OSError, ValueError):
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def new_argv(pid, old_console, old_qmp, new_dir):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0")[:-1]]
    out, moved = [], set()
    for a in argv:
        if a == f"file:{old_console}":
            a = f"file:{new_dir}/console.log"; moved.add("console")
        elif a.startswith(f"unix:{old_qmp},"):
            a = f"unix:{new_dir}/qmp.sock," + a.split(",", 1)[1]; moved.add("qmp")
        out.append(a)
    if moved != {"console", "qmp"}:
        raise RuntimeError(f"console/qmp not found in QEMU's argv (moved {moved}): {argv}")
    return out + ["-incoming", "defer"]


def migrate(t, src=None):
    n = COUNT[t.name] = COUNT.get(t.name, 0) + 1
    old_p = t.p
    old_qmp_path = QMP_PATH.get(t.name, str(t.workdir / "qmp.sock"))
    old_console = t.channel.log if t.channel.log else t.console_log
    new_dir = t.workdir / f"mig{n}"
    new_dir.mkdir()
    uri = f"unix:{new_dir}/mig.sock"
    argv = new_argv(old_p.pid, old_console, old_qmp_path, new_dir)
    before = (list(t.vcpu_cpus), list(t.emulator_cpus))
    tap = t.held.tap
    new_p = t.spawn(argv, pass_fds=(tap.fd,) if tap else ())
    try:
        qn = qmp_connect(f"{new_dir}/qmp.sock")
        qn.execute("migrate-incoming", {"uri": uri})
        qo = qmp_connect(QMP_PATH.get(src.name, str(src.workdir / "qmp.sock")) if src else old_qmp_path)
        qo.execute("migrate-set-parameters", {"max-bandwidth": 8 << 30, "downtime-limit": 100})
        t0 = time.monotonic()
        qo.execute("migrate", {"uri": uri})
        while True:
            s = qo.execute("query-migrate")
            if s.get("status") in ("completed", "failed", "cancelled"):
                break
            if time.monotonic() - t0 > 60:
                raise RuntimeError(f"migration not done in 60 s: {s.get('status')}")
            time.sleep(0.02)
        if s["status"] != "completed":
            raise RuntimeError(f"migration {s['status']}: {s.get('error-desc', '')}")
        while qn.execute("query-status")["status"] != "running":
            if time.monotonic() - t0 > 60:
                raise RuntimeError("the new QEMU did not run")
            time.sleep(0.02)
        if src is not None:  # the source guest runs on: its state is now the target's too
            while qo.execute("query-status")["status"] != "running":
                try:
                    qo.execute("cont")
                except OSError:
                    time.sleep(0.02)
        qo.close(); qn.close()
    except BaseException:
        proc.kill_group(new_p)
        raise
    # the old one: its probe's counters are on its threads; then it goes
    if t.host_probe is not None:
        t.host_probe.close()
        t.host_probe = None
    proc.kill_group(old_p, grace=0.0)
    t.p = new_p
    t.channel = Channel(new_p, t.name, new_dir / "console.log")
    QMP_PATH[t.name] = str(new_dir / "qmp.sock")
    vcpus, t.vcpu_cpus, t.emulator_cpus = place_threads(new_p.pid, t.host_cpu, t.config.emulator)
    t0p = time.monotonic()
    list(t.channel.command("PING", 30))
    ping_ms = 1000 * (time.monotonic() - t0p)
    qmp = None
    if t.accel == "kvm":  # TCG has no VM exits to count (as after_boot)
        try:
            qmp = Qmp(QMP_PATH[t.name])
        except (OSError, ValueError) as e:
            t.probe_note = f"no QMP for exit counts: {e}"
    t.start_probe(t.root_pids, qmp=qmp, vcpu_tids=vcpus if t.accel == "kvm" else None)
    after = (t.vcpu_cpus, t.emulator_cpus)
    log(f"{t.name} mig{n} total_ms={s.get('total-time')} downtime_ms={s.get('downtime')} "
        f"old_pid={old_p.pid} new_pid={new_p.pid} vcpu_tids={vcpus} vcpu_cpus={after[0]} "
        f"emu_cpus={after[1]} pinned_as_before={before == after} ping_ms={ping_ms:.1f} "
        f"settle_ms={t.count_settle_ms} probe={'yes' if t.host_probe else t.probe_note}")


SHARED = []


ORIGINAL = session.TargetPool.restart


def restart(self, targets):
    failed = {}
    qemus = sorted((t for t in targets if t.kind == "qemu"), key=lambda t: ORDER.index(t.name))
    if MODE in ("each", "donor"):  # each round: the first guest booted afresh, its state copied into the others
        # (donor: and into a new QEMU of its own too, so that every side runs in a migration's destination)
        src, rest = qemus[0], qemus[1:]
        failed = ORIGINAL(self, [src])
        QMP_PATH.pop(src.name, None)  # booted afresh: its monitor is in its work dir again
        if failed:
            return {t.name: f"{src.name} did not boot again" for t in qemus}
        for t in rest:
            migrate(t, src)
        if MODE == "donor":
            migrate(src)
        return failed
    if MODE == "share":  # once: every qemu guest gets the state of the first one (by name order of argv)
        if SHARED:
            return failed
        SHARED.append(1)
        src, rest = qemus[0], qemus[1:]
        for t in rest:
            migrate(t, src)
        return failed
    if MODE != "1":
        return failed
    for t in targets:  # in the order the rounds drew
        if t.kind != "qemu":
            continue
        try:
            migrate(t)
        except Exception as e:  # left stopped, as TargetPool.restart leaves one that did not boot
            failed[t.name] = f"migration failed: {e}"
            log(f"{t.name} FAILED {e!r}")
            try:
                t.stop()
            except Exception:
                pass
    return failed


ORDER = [a for a in sys.argv[1:] if a.startswith("qemu")]
session.TargetPool.restart = restart
log(f"start MIG={MODE} argv={sys.argv[1:]} tmp={MYTMP}")
from vmtax.cli import main  # noqa: E402

try:
    rc = main(sys.argv[1:])
finally:
    shutil.rmtree(MYTMP, ignore_errors=True)
sys.exit(rc)
