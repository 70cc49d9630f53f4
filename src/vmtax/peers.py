"""Host-side peers: the server end of a network workload (an iperf3
server, a sockperf responder), started on the host for each run, reached
from inside the target through its NIC (the bare machine: over loopback,
the same pair), and ended after the run; a peer dies with vmtax too.

A peer listens on the one address its target reaches (Target.peer_listen):
the host's loopback, or the host end of a tap or bridge inside the network
namespace vmtax made for that target -- never on a wildcard address."""

from __future__ import annotations

import shlex
import socket
import subprocess
import tempfile
import time

from .errors import TargetError
from .proc import kill_group, other_cpus, spawn


def free_port() -> int:
    """A TCP port free on this host's loopback now (a workload's server or peer)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_peer(w, port: int, target_cpu: int | None, bind: str = "127.0.0.1", ns=None) -> subprocess.Popen:
    """The host side of a network workload, listening on bind:port (inside
    the network namespace ns, when given) within 10 s (TargetError if not),
    on a CPU other than the target's when the target is pinned; it dies with
    vmtax (proc.spawn) and is killed after each run by the caller."""
    others = other_cpus(target_cpu)
    argv = shlex.split(w.peer.format(port=port, bind=bind))
    if ns is not None:
        argv = ns.argv(argv)
    # a file, not a pipe: a chatty peer never blocks on it; read on failure, closed on every way out below
    err = tempfile.TemporaryFile()  # noqa: SIM115
    try:
        p = spawn(
            argv, cpu=others[0] if others else None, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
        )
    except OSError as e:
        err.close()
        raise TargetError(f"{w.name}: cannot start its peer {argv[0]} on the host: {e}") from None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if p.poll() is not None:
            err.seek(0)
            why = err.read().decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            err.close()
            raise TargetError(f"{w.name}: its peer {argv[0]} exited at once ({p.returncode}): {why[0][:200]}")
        if listening(port, p.pid):
            err.close()  # the peer keeps its descriptor
            return p
        time.sleep(0.05)
    kill_group(p)
    err.close()
    raise TargetError(f"{w.name}: its peer {argv[0]} did not listen on port {port} within 10 s")


def listening(port: int, pid: int | None = None) -> bool:
    """Whether a TCP socket listens on this port in this process's network
    namespace, or in pid's (/proc/PID/net/tcp and tcp6: no connection is
    made, which a server could take for a client)."""
    want = f":{port:04X}"
    where = f"/proc/{pid}/net" if pid is not None else "/proc/net"
    for table in (f"{where}/tcp", f"{where}/tcp6"):
        try:
            with open(table) as f:
                for line in f.readlines()[1:]:
                    parts = line.split()
                    if len(parts) > 3 and parts[1].endswith(want) and parts[3] == "0A":
                        return True
        except OSError:
            continue
    return False
