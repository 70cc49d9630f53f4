"""Another machine, over the system's OpenSSH client.

`ssh:host=H,user=U,port=P,key=FILE,known_hosts=FILE`, or the short form
`ssh:H` (`ssh:U@H`); accept_new=yes trusts a host key seen for the first
time (StrictHostKeyChecking=accept-new; the default is yes: the key must
already be in known_hosts); machine=NAME says which targets share CPUs
(see machine()).  The user's ~/.ssh/config applies, as it does to `ssh`.

One ControlMaster connection per target (sshlink.py) carries everything: the probe, the agent's copy, and one session
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
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from .. import proc
from ..agent import agent_hash, agent_path
from ..errors import TargetError
from ..hostproc import boot_id
from .base import Target
from .channel import Channel
from .sshlink import CONNECT_TIMEOUT, Destination, SshLink, check_words

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


class SshTarget(Target):
    kind = "ssh"
    summary = "another machine over OpenSSH: the agent copied there by its hash"
    allowed_options = frozenset({"host", "user", "port", "key", "known_hosts", "accept_new", "machine"})
    positional = "host"
    remote = True

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        dest = Destination.parse(name, options)
        self.host, self.user, self.port, self.key = dest.host, dest.user, dest.port, dest.key
        self.known_hosts, self.accept_new = dest.known_hosts, dest.accept_new
        self.machine_name = options.get("machine")
        self.link = SshLink(name, dest)
        self.shell: subprocess.Popen | None = None  # the session the channel runs in
        self.channel: Channel | None = None
        self.copied: bool | None = None
        self._remote: dict[str, str] = {}
        self._hash = ""

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return (True, "") if shutil.which("ssh") else (False, "the OpenSSH client (ssh) is not installed")

    @property
    def where(self) -> str:
        return self.link.dest.where

    @property
    def master(self) -> subprocess.Popen | None:
        return self.link.master

    @property
    def workdir(self) -> Path | None:
        return self.link.workdir

    def ssh_argv(self, *extra: str, level: str = "ERROR") -> list[str]:
        """ssh's argv for this host (SshLink.argv)."""
        return self.link.argv(*extra, level=level)

    # -- start and stop -----------------------------------------------------------
    def pin(self, cpu: int | None) -> None:
        """Pinning is the remote's business: with --cpu set, the agent runs
        on the remote's last CPU (as --cpu auto picks here); the ssh
        processes here keep off this machine's pinned CPU."""
        self.link.local_cpu = cpu

    def start(self) -> None:
        proc.sweep()
        self._hash = agent_hash()
        self.link.open(proc.private_dir(self.kind))
        self._remote = probe(self.link, self._hash)
        machine = self._remote.get("os", "")
        if machine != f"Linux {os.uname().machine}":
            raise TargetError(
                f"{self.name}: the agent runs on Linux {os.uname().machine}; {self.where} is {machine or 'unknown'}"
            )
        self.copied = self._remote.get("agent") != "cached"
        if self.copied:
            copy_agent(self.link, self._hash)
        if self.link.local_cpu is not None:
            self.host_cpu = _last_cpu(self._remote.get("cpus", ""))
        self._open_channel()

    def _open_channel(self) -> None:
        """The session the agent runs in.  Not tied to the thread that
        starts it (a reopened one starts on a runner's thread): it ends
        with the master, which dies with vmtax."""
        workdir = self.link.workdir
        assert workdir is not None, "start() made it"
        if self.shell is not None:
            proc.kill_group(self.shell)
        with open(workdir / "channel.log", "ab") as log:
            self.shell = proc.spawn(
                self.link.client(SHELL, [self._hash]),
                die_with_vmtax=False,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        self.link.keep_off_pinned_cpu(self.shell.pid)
        self.channel = Channel(self.shell, self.name, workdir / "channel.log")
        try:
            self.channel.wait_ready(CONNECT_TIMEOUT + 20)
        except TargetError:
            self.link.gone()
            raise TargetError(f"{self.name}: {self.link.why(self._tail(), self.shell.poll() or 255)}") from None

    def stop(self) -> None:
        if self.shell is not None:
            proc.kill_group(self.shell)
            self.shell, self.channel = None, None
        self.link.close()

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
        self.link.check_alive()
        check_words(args)
        if self.channel is None or self.channel.broken:
            self._open_channel()  # an agent that timed out: the host is still there
        assert self.channel is not None, "_open_channel opened it"
        return self._answer(self.channel.command("RUN " + shlex.join(args), timeout))

    def _answer(self, lines: Iterator[str]) -> Iterator[str]:
        try:
            yield from lines
        except TargetError:
            if self.link.gone():
                raise TargetError(f"{self.name}: {self.link.why('', 255)}") from None
            raise

    def _tail(self) -> str:
        if self.link.workdir is None:  # stopped, or never started
            return ""
        try:
            return proc.read_tail(self.link.workdir / "channel.log")
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


def probe(link: SshLink, sha256: str) -> dict[str, str]:
    """What the remote tells at start (PROBE's lines), by their first word."""
    out = link.call(PROBE, [sha256], "probe")
    return {k: v.strip() for k, _, v in (line.partition(" ") for line in out.splitlines())}


def copy_agent(link: SshLink, sha256: str) -> None:
    """The agent copied into the remote's cache, under its hash (COPY)."""
    with open(agent_path(), "rb") as f:
        link.call(COPY, [sha256], "copy the agent to", stdin=f)


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
