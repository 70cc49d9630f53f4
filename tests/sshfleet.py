"""Real sshd servers for the ssh target's tests: one on this machine's
loopback, and others inside network namespaces standing in for other hosts
(a veth pair each, an address on either end, a hostname of their own in a
UTS namespace).  Everything is started by the test process and removed on
every exit path: the servers die with it (PR_SET_PDEATHSIG, through
vmtax.proc), and namespaces a killed test run left are removed by the next
(named after their owner's pid)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from vmtax import proc
from vmtax.hostproc import descendants, pid_alive

SSHD = "/usr/sbin/sshd"  # sshd re-executes itself: an absolute path
PRIVSEP = Path("/run/sshd")  # Debian's sshd refuses to start without it
NS_PREFIX = "vmtax-t"
NS = re.compile(rf"^{NS_PREFIX}(\d+)-")


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, stdin=subprocess.DEVNULL)


def keygen(path: Path) -> Path:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vmtax-test", "-f", str(path))
    return path


def netns_works() -> tuple[bool, str]:
    """Whether this process may make network namespaces (root, CAP_NET_ADMIN)."""
    if not shutil.which("ip"):
        return False, "iproute2 (ip) is not installed"
    name = f"{NS_PREFIX}{os.getpid()}-probe"
    p = _run("ip", "netns", "add", name, check=False)
    if p.returncode != 0:
        return False, f"ip netns is not permitted here: {p.stderr.strip()}"
    _run("ip", "netns", "del", name, check=False)
    return True, ""


def sweep_namespaces() -> None:
    """Remove what test runs killed outright left: their namespaces (and
    every process in them)."""
    for line in _run("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = NS.match(name)
        if m and int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1))):
            _delete_namespace(name)


def _delete_namespace(name: str) -> None:
    for pid in _run("ip", "netns", "pids", name, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _run("ip", "netns", "del", name, check=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_subnet() -> int:
    """A third octet of 10.231.x.0/24 that no address here uses."""
    used = _run("ip", "-4", "-o", "addr", check=False).stdout
    for k in range(os.getpid() % 200, os.getpid() % 200 + 250):
        octet = k % 250 + 1
        if f"10.231.{octet}." not in used:
            return octet
    raise RuntimeError("no free 10.231.x.0/24 here")


@dataclass
class Server:
    """One sshd: where it listens and how to reach it."""

    name: str
    address: str
    port: int
    config: Path
    cache: Path  # the remote's XDG_CACHE_HOME (sshd's SetEnv)
    known_hosts: Path  # the right host key for address:port
    netns: str | None = None
    hostname: str | None = None
    p: subprocess.Popen | None = None

    @property
    def key_spec(self) -> str:
        return f"[{self.address}]:{self.port}" if self.port != 22 else self.address

    def start(self) -> None:
        argv = [SSHD, "-D", "-e", "-f", str(self.config)]
        if self.netns:  # sh sets the hostname ($0), then is sshd: every value an argument
            argv = [
                "ip",
                "netns",
                "exec",
                self.netns,
                "unshare",
                "--uts",
                "sh",
                "-c",
                'hostname "$0" && exec "$@"',
                self.hostname or self.name,
                *argv,
            ]
        with open(self.config.with_suffix(".log"), "ab") as log:
            self.p = proc.spawn(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while not self.listening():
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"sshd {self.name} did not start: {self.config.with_suffix('.log').read_text()[-500:]}"
                )
            time.sleep(0.02)

    def listening(self) -> bool:
        try:
            with socket.create_connection((self.address, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def kill(self) -> None:
        """The host dies: sshd and every session it runs, at once."""
        if self.netns:
            for pid in _run("ip", "netns", "pids", self.netns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        if self.p is not None:
            for pid in descendants(self.p.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.p.wait(timeout=10)
            self.p = None

    def target(self, **extra: str) -> str:
        """An ssh target string for this server, with the right keys."""
        options = {
            "host": self.address,
            "port": str(self.port),
            "user": "root",
            "key": str(self.config.parent / "user_key"),
            "known_hosts": str(self.known_hosts),
            **extra,
        }
        return "ssh:" + ",".join(f"{k}={v}" for k, v in options.items())


class Fleet:
    """The servers, their keys, and the namespaces they live in."""

    def __init__(self, root: Path, hosts: tuple[str, ...] = ("a", "b"), with_netns: bool = True):
        self.root = root
        self.servers: dict[str, Server] = {}
        self.namespaces: list[str] = []
        self.veths: list[str] = []
        self.made_privsep = False
        self.hosts, self.with_netns = hosts, with_netns

    def __enter__(self) -> Fleet:
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _setup(self) -> None:
        if not PRIVSEP.is_dir():
            PRIVSEP.mkdir(mode=0o755)
            self.made_privsep = True
        self.host_key = keygen(self.root / "host_key")
        self.user_key = keygen(self.root / "user_key")
        self.other_key = keygen(self.root / "other_key")
        self.wrong_host_key = keygen(self.root / "wrong_host_key")
        (self.root / "authorized_keys").write_text(Path(f"{self.user_key}.pub").read_text())
        self.servers["lo"] = self._server("lo", "127.0.0.1", free_port())
        if self.with_netns:
            sweep_namespaces()
            octet = _free_subnet()
            for i, name in enumerate(self.hosts):
                ns, veth = f"{NS_PREFIX}{os.getpid()}-{name}", f"vt{os.getpid()}{name}"
                self.namespaces.append(ns)
                _run("ip", "netns", "add", ns)
                self.veths.append(veth)
                inside = f"10.231.{octet}.{4 * i + 2}"
                _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _run("ip", "addr", "add", f"10.231.{octet}.{4 * i + 1}/30", "dev", veth)
                _run("ip", "link", "set", veth, "up")
                _run("ip", "-n", ns, "addr", "add", f"{inside}/30", "dev", "eth0")
                _run("ip", "-n", ns, "link", "set", "eth0", "up")
                _run("ip", "-n", ns, "link", "set", "lo", "up")
                self.servers[name] = self._server(name, inside, 22, netns=ns, hostname=f"host-{name}")

    def _server(
        self, name: str, address: str, port: int, netns: str | None = None, hostname: str | None = None
    ) -> Server:
        d = self.root
        cache = d / f"cache-{name}"
        config = d / f"sshd-{name}.conf"
        config.write_text(
            "\n".join(
                [
                    f"ListenAddress {address}:{port}",
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {d / 'authorized_keys'}",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "PidFile none",
                    f"SetEnv XDG_CACHE_HOME={cache}",
                    "LogLevel ERROR",
                    "MaxStartups 100",
                    "MaxSessions 100",
                    "",
                ]
            )
        )
        known = d / f"known_hosts-{name}"
        spec = f"[{address}]:{port}" if port != 22 else address
        known.write_text(f"{spec} {' '.join(Path(f'{self.host_key}.pub').read_text().split()[:2])}\n")
        s = Server(name, address, port, config, cache, known, netns, hostname)
        s.start()
        return s

    def wrong_known_hosts(self, name: str) -> Path:
        """A known_hosts that holds another key for this server."""
        s = self.servers[name]
        path = self.root / f"known_hosts-wrong-{name}"
        path.write_text(f"{s.key_spec} {' '.join(Path(f'{self.wrong_host_key}.pub').read_text().split()[:2])}\n")
        return path

    def close(self) -> None:
        for s in self.servers.values():
            s.kill()
        for ns in self.namespaces:
            _delete_namespace(ns)
        for veth in self.veths:  # gone with its peer's namespace; make sure
            _run("ip", "link", "del", veth, check=False)
        self.namespaces, self.veths = [], []
        if self.made_privsep:  # ours to remove, once no sshd (another's) needs it
            deadline = time.monotonic() + 2
            while _sshd_running() and time.monotonic() < deadline:
                time.sleep(0.05)  # ours, killed, may take a moment to go
            if not _sshd_running():
                try:
                    PRIVSEP.rmdir()
                except OSError:
                    pass


def _sshd_running() -> bool:
    """Whether any sshd process lives (zombies aside)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    comm, _, rest = f.read().partition(") ")
            except OSError:
                continue
            if comm.endswith("(sshd") and not rest.startswith("Z"):
                return True
    return False
