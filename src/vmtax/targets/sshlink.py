"""The ssh target's connection to its host: where and how to log in, as
its options say (Destination), and the one ControlMaster connection that
carries everything (SshLink): its argv, short commands over it, and its
errors in one line that says what to do.  What the remote's login shell
receives is always `exec sh -c '<fixed script>' vmtax-ssh 'arg' ...`:
single-quoted words only (remote_command)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import TargetError, UserError
from .options import option_number

HOST = re.compile(r"^[A-Za-z0-9_.:%\[\]-]+$")
USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# a word for the remote shell: printable ASCII but the backslash (which
# fish and csh read inside single quotes)
WORD = re.compile(r"^[\x20-\x5b\x5d-\x7e]*$")
CONNECT_TIMEOUT = 10  # seconds to reach the host and log in
ALIVE = (5, 3)  # ServerAliveInterval, ServerAliveCountMax: a silent host is dead after 15 s


def check_words(args: list[str]) -> None:
    """TargetError for an argument a remote shell cannot be given as one word."""
    for a in args:
        if not WORD.match(a):
            raise TargetError(f"cannot pass {a[:60]!r} to a remote shell (a control character or a backslash)")


def remote_command(script: str, args: list[str]) -> str:
    """The one string the remote login shell parses: `exec sh -c SCRIPT
    vmtax-ssh ARGS...`, every word single-quoted."""
    check_words(args)
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


@dataclass(frozen=True)
class Destination:
    """Where an ssh target logs in and how its host key is checked."""

    host: str
    user: str | None  # None: ssh's default
    port: int | None
    key: str | None
    known_hosts: str | None
    accept_new: str  # yes: trust a host key seen for the first time

    @classmethod
    def parse(cls, name: str, options: dict[str, str]) -> Destination:
        host, user = _destination(name, options)
        port = option_number(name, options, "port", None, lo=1, hi=65535, integer=True)
        known_hosts, accept_new = _host_key_options(name, options)
        return cls(host, user, port, _path_option(name, options, "key"), known_hosts, accept_new)

    @property
    def where(self) -> str:
        return f"{self.host} port {self.port}" if self.port else self.host


class SshLink:
    """One ControlMaster connection to a host (its socket in a private
    directory here): opened, used for short commands and by the target's
    sessions, and closed cleanly (it tells the remote to end them)."""

    def __init__(self, name: str, dest: Destination):
        self.name, self.dest = name, dest
        self.workdir: Path | None = None
        self.master: subprocess.Popen | None = None
        self.local_cpu: int | None = None  # this machine's pinned CPU, which the ssh processes keep off

    def argv(self, *extra: str, level: str = "ERROR") -> list[str]:
        """ssh's argv for this host: the host key checked, no prompt, no
        forwarding, the control socket; the master logs at INFO, so that
        why it ended ("Timeout, server not responding") is in its log."""
        assert self.workdir is not None, "open() made it"
        d = self.dest
        argv = [
            "ssh",
            "-T",
            "-x",
            "-a",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=" + ("accept-new" if d.accept_new == "yes" else "yes"),
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
        if d.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={d.known_hosts}"]
        if d.key:
            argv += ["-i", d.key, "-o", "IdentitiesOnly=yes"]
        if d.port:
            argv += ["-p", str(d.port)]
        if d.user:
            argv += ["-l", d.user]
        return argv + list(extra) + ["--", d.host]

    def client(self, script: str, args: list[str]) -> list[str]:
        """A session over the connection that runs script with args there."""
        return self.argv("-o", "ControlMaster=no") + [remote_command(script, args)]

    def open(self, workdir: Path) -> None:
        """Log in: the master started, and waited for until its socket appears."""
        self.workdir = workdir
        with open(workdir / "master.err", "wb") as err:
            self.master = proc.spawn(
                self.argv("-M", "-N", "-o", "ControlPersist=no", level="INFO"),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        self.keep_off_pinned_cpu(self.master.pid)
        deadline = time.monotonic() + CONNECT_TIMEOUT + 20
        while not (workdir / "cm").exists():  # the socket appears once logged in
            if self.master.poll() is not None:
                raise TargetError(f"{self.name}: {explain(self.master_err(), self.dest)}")
            if time.monotonic() > deadline:
                raise TargetError(f"{self.name}: no login to {self.dest.where} within {CONNECT_TIMEOUT + 20} s")
            time.sleep(0.02)

    def call(self, script: str, args: list[str], what: str, stdin=None) -> str:
        """One short remote command over the connection; its stdout."""
        try:
            p = subprocess.run(
                self.client(script, args), stdin=stdin or subprocess.DEVNULL, capture_output=True, timeout=120
            )
        except subprocess.TimeoutExpired:
            raise TargetError(f"{self.name}: could not {what} {self.dest.where} within 120 s") from None
        if p.returncode != 0:
            err = p.stderr.decode("utf-8", "replace")
            raise TargetError(f"{self.name}: could not {what} {self.dest.where}: {self.why(err, p.returncode)}")
        return p.stdout.decode("utf-8", "replace")

    def keep_off_pinned_cpu(self, pid: int) -> None:
        others = proc.other_cpus(self.local_cpu)
        if others:
            try:
                os.sched_setaffinity(pid, set(others))
            except OSError:
                pass

    def master_err(self) -> str:
        if self.workdir is None:  # closed, or never opened
            return ""
        try:
            return proc.read_tail(self.workdir / "master.err")
        except OSError:
            return ""

    def check_alive(self) -> None:
        """TargetError where the connection is gone (or was never made)."""
        if self.master is None or self.master.poll() is not None:
            why = (_last(self.master_err()) or "no message") if self.master is not None else "not started"
            raise TargetError(f"{self.name}: lost the connection to {self.dest.where}: {why}")

    def why(self, stderr: str, status: int) -> str:
        """What went wrong, in one line: the connection's own error where
        the master is gone, else the command's."""
        if self.master is not None and self.master.poll() is not None:
            return f"lost the connection to {self.dest.where}: {_last(self.master_err() or stderr) or 'no message'}"
        if status == 255:
            return explain(stderr, self.dest)
        lines = [line for line in stderr.strip().splitlines() if line.strip()]
        return lines[-1] if lines else f"exit status {status}"

    def gone(self, wait: float = 2.0) -> bool:
        """Whether the connection is gone: a session ends a moment before
        its master does when the host dies, so wait that moment."""
        if self.master is None:
            return False
        try:
            self.master.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self) -> None:
        """End the master cleanly (it tells the remote to end its sessions),
        and take its directory away; safe to call twice."""
        if self.master is not None:
            if self.master.poll() is None:
                try:
                    subprocess.run(self.argv("-O", "exit"), capture_output=True, timeout=5, stdin=subprocess.DEVNULL)
                except (OSError, subprocess.SubprocessError):
                    pass
            proc.kill_group(self.master, grace=0.5)
            self.master = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


def explain(stderr: str, t: Destination) -> str:
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
