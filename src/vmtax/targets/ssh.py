"""Another machine, over the system's OpenSSH client.

`ssh:host=H,user=U,port=P,key=FILE,known_hosts=FILE`, or the short form
`ssh:H` (`ssh:U@H`); accept_new=yes trusts a host key seen for the first
time (StrictHostKeyChecking=accept-new; the default is yes: the key must
already be in known_hosts); machine=NAME says which targets share CPUs
(see machine()).  The user's ~/.ssh/config applies, as it does to `ssh`.

One ControlMaster connection per target (its socket in a private directory
here) carries everything: the probe, the agent's copy, and one session
that runs a small shell loop there for the whole run (the framed channel
of channel.py: an agent process per command, no session or handshake
each).  The agent is copied by its SHA-256 into the remote's
${XDG_CACHE_HOME:-~/.cache}/vmtax/agent-<sha256> and reused while its hash
matches.  What the remote's login shell receives is always
`exec sh -c '<fixed script>' vmtax-ssh 'arg' ...`: single-quoted words
only, the values as the script's arguments, never spliced into its text.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from .. import proc
from ..agent import agent_hash, agent_path
from ..errors import TargetError, UserError
from ..hostproc import boot_id
from .base import Target, option_number
from .channel import Channel

CACHE = '"${XDG_CACHE_HOME:-$HOME/.cache}/vmtax"'
# What the remote tells at start: its OS and architecture, its boot id (two
# targets with one kernel share CPUs), the CPUs its processes may use, a
# tmpfs for the agent's files, and whether the agent with this hash is there.
PROBE = (
    "h=$1; a=" + CACHE + '/agent-$h; echo "os $(uname -s) $(uname -m)"; '
    'echo "boot_id $(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"; '
    'echo "cpus $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"; '
    'if [ -d /dev/shm ] && [ -w /dev/shm ]; then echo "shm yes"; else echo "shm no"; fi; '
    'if [ -x "$a" ] && [ "$(sha256sum < "$a" 2>/dev/null | cut -c1-64)" = "$h" ]; '
    'then echo "agent cached"; else echo "agent missing"; fi'
)
# The agent on stdin -> a temporary file -> checked -> renamed into place:
# another vmtax copying at the same time never sees a partial file.
COPY = (
    "h=$1; d=" + CACHE + '; mkdir -p "$d" && t=$(mktemp "$d/.agent-$h.XXXXXX") || exit 1; '
    'if cat > "$t" && chmod 755 "$t" && [ "$(sha256sum < "$t" | cut -c1-64)" = "$h" ]; '
    'then mv -f "$t" "$d/agent-$h"; else rm -f "$t"; '
    'echo "the copy of the agent does not have its sha256 (is sha256sum there?)" >&2; '
    "exit 1; fi"
)
# The remote end of the channel (channel.py): one session for the whole run,
# an agent process per RUN line, its stdout, then @@VMTAX-END <status>.  The
# line holds the arguments shell-quoted by vmtax (and checked: WORD), which
# `eval "set -- ..."` turns back into exactly those arguments.
SHELL = (
    "a=" + CACHE + '/agent-$1; echo @@VMTAX-READY; while IFS= read -r line; do case "$line" in '
    '"RUN "*) eval "set -- ${line#RUN }"; "$a" "$@" </dev/null; echo "@@VMTAX-END $?";; '
    'PING) echo "@@VMTAX-END 0";; *) echo "@@VMTAX-END 127";; esac; done'
)

HOST = re.compile(r"^[A-Za-z0-9_.:%\[\]-]+$")
USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# a word for the remote shell: printable ASCII but the backslash (which
# fish and csh read inside single quotes)
WORD = re.compile(r"^[\x20-\x5b\x5d-\x7e]*$")
CONNECT_TIMEOUT = 10  # seconds to reach the host and log in
ALIVE = (5, 3)  # ServerAliveInterval, ServerAliveCountMax: a silent host is dead after 15 s


def remote_command(script: str, args: list[str]) -> str:
    """The one string the remote login shell parses: `exec sh -c SCRIPT
    vmtax-ssh ARGS...`, every word single-quoted."""
    for a in args:
        if not WORD.match(a):
            raise TargetError(f"cannot pass {a[:60]!r} to a remote shell (a control character or a backslash)")
    return "exec sh -c " + " ".join(shlex.quote(w) for w in [script, "vmtax-ssh", *args])


def _path_option(name: str, options: dict[str, str], key: str, must_exist: bool = True) -> str | None:
    """A file option: ~ expanded, made absolute, readable; refused where
    ssh would read it as something else (whitespace splits a list, %
    starts a token, quotes)."""
    if key not in options:
        return None
    path = os.path.abspath(os.path.expanduser(options[key]))
    if not path or re.search(r"[\s%\"'\\]", path):
        raise UserError(
            f"target '{name}': {key}={options[key]}: a path for ssh cannot hold whitespace, %, quotes or a backslash"
        )
    if must_exist and not (os.path.isfile(path) and os.access(path, os.R_OK)):
        raise UserError(f"target '{name}': {key}={options[key]} is not a readable file")
    return path


def _destination(name: str, options: dict[str, str]) -> tuple[str, str | None]:
    """The host and the user (None: ssh's default) of host=, user= or host=U@H."""
    host = options.get("host", "")
    user = options.get("user")
    if "@" in host and user is None:  # ssh:U@H
        user, host = host.rsplit("@", 1)
    if not host:
        raise UserError(f"target '{name}': say which host (ssh:HOST or ssh:host=HOST)")
    if not HOST.match(host) or host.startswith("-"):
        raise UserError(f"target '{name}': host={host} is not a host name or address")
    if user is not None and not USER.match(user):
        raise UserError(f"target '{name}': user={user} is not a user name")
    return host, user


def _host_key_options(name: str, options: dict[str, str]) -> tuple[str | None, str]:
    """known_hosts= (it need not exist yet with accept_new=yes) and accept_new= (yes or no)."""
    accept_new = options.get("accept_new", "no")
    if accept_new not in ("yes", "no"):
        raise UserError(f"target '{name}': accept_new must be yes or no, got '{accept_new}'")
    return _path_option(name, options, "known_hosts", must_exist=accept_new != "yes"), accept_new


class SshTarget(Target):
    kind = "ssh"
    summary = "another machine over OpenSSH: the agent copied there by its hash"
    allowed_options = frozenset({"host", "user", "port", "key", "known_hosts", "accept_new", "machine"})
    positional = "host"
    remote = True

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        self.host, self.user = _destination(name, options)
        self.port = option_number(name, options, "port", None, lo=1, hi=65535, integer=True)
        self.key = _path_option(name, options, "key")
        self.known_hosts, self.accept_new = _host_key_options(name, options)
        self.machine_name = options.get("machine")
        self.workdir: Path | None = None
        self.master: subprocess.Popen | None = None
        self.shell: subprocess.Popen | None = None  # the session the channel runs in
        self.channel: Channel | None = None
        self.local_cpu: int | None = None
        self.copied: bool | None = None
        self._remote: dict[str, str] = {}
        self._hash = ""

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return (True, "") if shutil.which("ssh") else (False, "the OpenSSH client (ssh) is not installed")

    @property
    def where(self) -> str:
        return f"{self.host} port {self.port}" if self.port else self.host

    # -- the ssh command line -----------------------------------------------------
    def ssh_argv(self, *extra: str, level: str = "ERROR") -> list[str]:
        """ssh's argv for this host: the host key checked, no prompt, no
        forwarding, the control socket; the master logs at INFO, so that
        why it ended ("Timeout, server not responding") is in its log."""
        assert self.workdir is not None, "start() made it"
        argv = [
            "ssh",
            "-T",
            "-x",
            "-a",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=" + ("accept-new" if self.accept_new == "yes" else "yes"),
            "-o",
            f"ConnectTimeout={CONNECT_TIMEOUT}",
            "-o",
            f"ServerAliveInterval={ALIVE[0]}",
            "-o",
            f"ServerAliveCountMax={ALIVE[1]}",
            "-o",
            f"LogLevel={level}",
            "-o",
            "RemoteCommand=none",
            "-o",
            "PermitLocalCommand=no",
            "-o",
            "ClearAllForwardings=yes",
            "-o",
            f"ControlPath={self.workdir / 'cm'}",
        ]
        if self.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.key:
            argv += ["-i", self.key, "-o", "IdentitiesOnly=yes"]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.user:
            argv += ["-l", self.user]
        return argv + list(extra) + ["--", self.host]

    def _client(self, script: str, args: list[str]) -> list[str]:
        return self.ssh_argv("-o", "ControlMaster=no") + [remote_command(script, args)]

    # -- start and stop -----------------------------------------------------------
    def pin(self, cpu: int | None) -> None:
        """Pinning is the remote's business: with --cpu set, the agent runs
        on the remote's last CPU (as --cpu auto picks here); the ssh
        processes here keep off this machine's pinned CPU."""
        self.local_cpu = cpu

    def start(self) -> None:
        proc.sweep()
        self.workdir = proc.private_dir(self.kind)
        self._hash = agent_hash()
        err_path = self.workdir / "master.err"
        with open(err_path, "wb") as err:
            self.master = proc.spawn(
                self.ssh_argv("-M", "-N", "-o", "ControlPersist=no", level="INFO"),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        self._keep_off_pinned_cpu(self.master.pid)
        deadline = time.monotonic() + CONNECT_TIMEOUT + 20
        while not (self.workdir / "cm").exists():  # the socket appears once logged in
            if self.master.poll() is not None:
                raise TargetError(f"{self.name}: {explain(self._master_err(), self)}")
            if time.monotonic() > deadline:
                raise TargetError(f"{self.name}: no login to {self.where} within {CONNECT_TIMEOUT + 20} s")
            time.sleep(0.02)
        self._remote = self._probe()
        machine = self._remote.get("os", "")
        if machine != f"Linux {os.uname().machine}":
            raise TargetError(
                f"{self.name}: the agent runs on Linux {os.uname().machine}; {self.where} is {machine or 'unknown'}"
            )
        self.copied = self._remote.get("agent") != "cached"
        if self.copied:
            self._copy_agent()
        if self.local_cpu is not None:
            self.host_cpu = _last_cpu(self._remote.get("cpus", ""))
        self._open_channel()

    def _open_channel(self) -> None:
        """The session the agent runs in.  Not tied to the thread that
        starts it (a reopened one starts on a runner's thread): it ends
        with the master, which dies with vmtax."""
        assert self.workdir is not None, "start() made it"
        if self.shell is not None:
            proc.kill_group(self.shell)
        with open(self.workdir / "channel.log", "ab") as log:
            self.shell = proc.spawn(
                self._client(SHELL, [self._hash]),
                die_with_vmtax=False,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        self._keep_off_pinned_cpu(self.shell.pid)
        self.channel = Channel(self.shell, self.name, self.workdir / "channel.log")
        try:
            self.channel.wait_ready(CONNECT_TIMEOUT + 20)
        except TargetError:
            self._master_gone()
            raise TargetError(f"{self.name}: {self._why(self._tail(), self.shell.poll() or 255)}") from None

    def _probe(self) -> dict[str, str]:
        out = self._call(PROBE, [self._hash], "probe")
        return {k: v.strip() for k, _, v in (line.partition(" ") for line in out.splitlines())}

    def _copy_agent(self) -> None:
        with open(agent_path(), "rb") as f:
            self._call(COPY, [self._hash], "copy the agent to", stdin=f)

    def _call(self, script: str, args: list[str], what: str, stdin=None) -> str:
        """One short remote command over the connection; its stdout."""
        try:
            p = subprocess.run(
                self._client(script, args), stdin=stdin or subprocess.DEVNULL, capture_output=True, timeout=120
            )
        except subprocess.TimeoutExpired:
            raise TargetError(f"{self.name}: could not {what} {self.where} within 120 s") from None
        if p.returncode != 0:
            err = p.stderr.decode("utf-8", "replace")
            raise TargetError(f"{self.name}: could not {what} {self.where}: {self._why(err, p.returncode)}")
        return p.stdout.decode("utf-8", "replace")

    def _keep_off_pinned_cpu(self, pid: int) -> None:
        others = proc.other_cpus(self.local_cpu)
        if others:
            try:
                os.sched_setaffinity(pid, set(others))
            except OSError:
                pass

    def _master_err(self) -> str:
        if self.workdir is None:  # stopped, or never started
            return ""
        try:
            return proc.read_tail(self.workdir / "master.err")
        except OSError:
            return ""

    def _why(self, stderr: str, status: int) -> str:
        """What went wrong, in one line: the connection's own error where
        the master is gone, else the command's."""
        if self.master is not None and self.master.poll() is not None:
            return f"lost the connection to {self.where}: {_last(self._master_err() or stderr) or 'no message'}"
        if status == 255:
            return explain(stderr, self)
        lines = [line for line in stderr.strip().splitlines() if line.strip()]
        return lines[-1] if lines else f"exit status {status}"

    def stop(self) -> None:
        if self.shell is not None:
            proc.kill_group(self.shell)
            self.shell, self.channel = None, None
        if self.master is not None:
            if self.master.poll() is None:
                try:  # end the master cleanly: it tells the remote to end its sessions
                    subprocess.run(
                        self.ssh_argv("-O", "exit"), capture_output=True, timeout=5, stdin=subprocess.DEVNULL
                    )
                except (OSError, subprocess.SubprocessError):
                    pass
            proc.kill_group(self.master, grace=0.5)
            self.master = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    # -- running --------------------------------------------------------------------
    def scratch_dir(self) -> str | None:
        return "/dev/shm" if self._remote.get("shm") == "yes" else "/tmp"

    def host_machine(self) -> str:
        """machine=NAME where given; else the remote's boot id, so that two
        targets on one kernel (this one too: ssh to localhost, a network
        namespace) are measured one at a time, as they share CPUs."""
        if self.machine_name:
            return "machine=" + self.machine_name
        remote = self._remote.get("boot_id", "")
        return "" if not remote or remote == boot_id() else "boot_id=" + remote

    def run_agent(self, args: list[str], timeout: float) -> Iterator[str]:
        if self.master is None or self.master.poll() is not None:
            why = (_last(self._master_err()) or "no message") if self.master is not None else "not started"
            raise TargetError(f"{self.name}: lost the connection to {self.where}: {why}")
        for a in args:
            if not WORD.match(a):
                raise TargetError(f"cannot pass {a[:60]!r} to a remote shell (a control character or a backslash)")
        if self.channel is None or self.channel.broken:
            self._open_channel()  # an agent that timed out: the host is still there
        assert self.channel is not None, "_open_channel opened it"
        return self._answer(self.channel.command("RUN " + shlex.join(args), timeout))

    def _answer(self, lines: Iterator[str]) -> Iterator[str]:
        try:
            yield from lines
        except TargetError:
            if self._master_gone():
                raise TargetError(f"{self.name}: {self._why('', 255)}") from None
            raise

    def _master_gone(self, wait: float = 2.0) -> bool:
        """Whether the connection is gone: the session ends a moment
        before its master does when the host dies, so wait that moment."""
        if self.master is None:
            return False
        try:
            self.master.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _tail(self) -> str:
        if self.workdir is None:  # stopped, or never started
            return ""
        try:
            return proc.read_tail(self.workdir / "channel.log")
        except OSError:
            return ""

    def own_facts(self) -> dict:
        facts = {**super().own_facts(), "ssh_host": self.host, "ssh_port": self.port or 22}
        if self._remote:
            facts.update(scratch_parent=self.scratch_dir(), agent_copied=self.copied)
        if self.user:
            facts["ssh_user"] = self.user
        if self.machine_name:
            facts["machine"] = self.machine_name
        return facts


def _last_cpu(cpus: str) -> int | None:
    """The highest of a CPU list like '0-3,6', where it holds two or more
    (as --cpu auto picks here); None otherwise."""
    found: set[int] = set()
    for part in filter(None, cpus.replace(" ", "").split(",")):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        found.update(range(int(lo), int(hi or lo) + 1))
    return max(found) if len(found) >= 2 else None


def explain(stderr: str, t: SshTarget) -> str:
    """ssh's error, in one line that says what to do."""
    text = stderr.strip()
    where = t.where
    known = t.known_hosts or "~/.ssh/known_hosts"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "has changed and you have requested strict" in text:
        fp = re.search(r"(SHA256:[A-Za-z0-9+/=]+)", text)
        return (
            f"the host key of {where} is not the one {known} holds (it sent "
            f"{fp.group(1) if fp else 'another key'}): refusing to connect; if the host was "
            f"reinstalled, remove the old key (ssh-keygen -R) and check the new one"
        )
    if "host key is known for" in text or "Host key verification failed" in text:
        return (
            f"the host key of {where} is not in {known}: add it after checking its fingerprint "
            "(ssh-keyscan), or trust it on first use with accept_new=yes"
        )
    if "Permission denied" in text or "Too many authentication failures" in text:
        who = f" as {t.user}" if t.user else ""
        key = f" with the key {t.key}" if t.key else ""
        return f"authentication failed at {where}{who}{key} (ssh: {_last(text)})"
    if re.search(
        r"Connection refused|timed out|No route to host|Network is unreachable|"
        r"Could not resolve hostname|Name or service not known|Connection reset",
        text,
    ):
        return f"cannot reach {where}: {_last(text).removeprefix('ssh: ')}"
    if re.search(
        r"closed by remote host|Broken pipe|Connection closed|Timeout, server|"
        r"client_loop|mux_client",
        text,
    ):
        return f"the connection to {where} broke: {_last(text)}"
    return f"ssh to {where} failed: {_last(text) or 'no message'}"


def _last(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
