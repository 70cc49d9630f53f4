"""vmtax compare --reboot, with the reboot replaced by a TCG translation
cache flush (gdb stub single-step: QEMU 7.2 tb_flushes on it) -- an
experiment, not the product.  FLUSH=0: --reboot replaced by nothing
(rounds in one boot)."""
import os, socket, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from vmtax.engine import session
from vmtax.hostprobe import Qmp

MODE = os.environ.get("FLUSH", "1")
PORTS = {}
LOG = open(os.environ.get("FLOG", "flush-log.txt"), "a")

def pkt(data):
    return f"${data}#{sum(data.encode()) % 256:02x}".encode()

def read_packet(s):
    buf = b""
    while True:
        c = s.recv(1)
        if not c:
            raise OSError("closed")
        if c in b"+-" and not buf:
            continue
        buf += c
        if buf.startswith(b"$") and len(buf) >= 4 and buf[-3:-2] == b"#":
            s.sendall(b"+")
            return buf[1:-3].decode()
        if not buf.startswith(b"$"):
            buf = b""

def flush(t):
    if t.name not in PORTS:
        PORTS[t.name] = 47320 + len(PORTS)
        q = Qmp(str(t.workdir / "qmp.sock"))
        q.execute("human-monitor-command", {"command-line": f"gdbserver tcp:127.0.0.1:{PORTS[t.name]}"})
        t._q = q
    s = socket.create_connection(("127.0.0.1", PORTS[t.name]), timeout=10)
    s.sendall(b"\x03"); read_packet(s)
    s.sendall(pkt("s")); read_packet(s)
    s.sendall(pkt("c")); time.sleep(0.02); s.close()
    out = t._q.execute("human-monitor-command", {"command-line": "info jit"})
    LOG.write(f"{time.time():.1f} {t.name} {[l for l in out.splitlines() if 'TB flush' in l]}\n"); LOG.flush()

def restart(self, targets):
    for t in targets:
        if MODE == "1" and t.kind == "qemu":
            flush(t)
    return {}

session.TargetPool.restart = restart
from vmtax.cli import main
sys.exit(main(sys.argv[1:]))
