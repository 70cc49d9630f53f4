"""The relay between vmtax's channel (this process's stdin and stdout) and a
Xen guest's console, the pty xenconsoled gives it in dom0 (xen.py starts
one per guest: `python -S xenrelay.py XL DOMAIN`: the standard library
alone, so that it starts at once even in a slow dom0).  It is started
before the domain is created, and guards it from then on: its first line
on stdin is where xenstore names the console's pty (KEY), once the domain
exists; the channel follows.

- The pty is opened raw, without echo (else the guest's output would go
  back to it) and without becoming this process's controlling terminal, so
  a hang-up of its master sends no SIGHUP here; SIGHUP is ignored anyway.
- xenconsoled may replace a guest's pty (it does when it finds the one it
  made broken): on a read error or end of file the relay reads the path
  again from xenstore (KEY) and reopens it, a few times at most.
- When vmtax's end of the channel closes (vmtax stopped, or was killed
  outright, even while `xl create` was still building the domain), the
  relay destroys the domain before it exits, and again should it appear
  within GUARD_S: a killed controller leaves no guest behind.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import termios
import time
import tty

REOPENS = 20
GUARD_S = 60.0  # how long a domain whose build outlived vmtax is waited for, to destroy it


def xenstore_read(key: str) -> str:
    p = subprocess.run(["xenstore-read", key], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return p.stdout.strip() if p.returncode == 0 else ""


def open_pty(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    attrs = termios.tcgetattr(fd)
    attrs[3] &= ~(termios.ECHO | termios.ECHONL)
    termios.tcsetattr(fd, termios.TCSANOW, attrs)
    return fd


def say(text: str) -> None:
    os.write(2, f"xenrelay: {text}\n".encode())


def reopen(key: str, old: int) -> int | None:
    """The guest's pty again (its path read anew), or None where it is gone."""
    try:
        os.close(old)
    except OSError:
        pass
    for _ in range(50):
        path = xenstore_read(key)
        if path.startswith("/dev/"):
            try:
                return open_pty(path)
            except OSError:
                pass
        time.sleep(0.1)
    return None


class Console:
    """The guest's console pty, reopened where xenconsoled replaces it
    (REOPENS times at most, all told)."""

    def __init__(self, key: str, fd: int):
        self.key, self.fd, self.left = key, fd, REOPENS

    def reopen(self) -> bool:
        """The pty again, after an error on it; False where it is gone (said)."""
        self.left -= 1
        got = reopen(self.key, self.fd) if self.left > 0 else None
        if got is None:
            say("the guest's console is gone")
            return False
        self.fd = got
        return True

    def write(self, data: bytes) -> bool:
        """All of data to the guest; False where its console is gone."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except OSError:
                if not self.reopen():
                    return False
        return True

    def read(self) -> bytes | None:
        """What the guest said; b'' where its pty was replaced and is
        reopened; None where its console is gone."""
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            data = b""
        if data:
            return data
        if not self.reopen():
            return None
        say("the guest's console pty was replaced: reopened")
        return b""


def relay(key: str) -> None:
    if not key:
        return  # vmtax went before the domain was made: nothing to relay
    path = xenstore_read(key)
    if not path.startswith("/dev/"):
        say(f"no console pty at {key}")
        sys.exit(3)
    console = Console(key, open_pty(path))
    say("ready")  # xen.py unpauses the guest on this line: nothing it says is lost or echoed
    while True:
        ready, _, _ = select.select([0, console.fd], [], [])
        if 0 in ready:
            data = os.read(0, 65536)
            if not data:
                return  # vmtax's end closed
            if not console.write(data):
                return
        if console.fd in ready:
            said = console.read()
            if said is None:
                return
            if not said:
                continue
            try:
                os.write(1, said)
            except OSError:
                return  # vmtax is gone


def first_line() -> str:
    """The console's xenstore key, from vmtax; '' where vmtax went first."""
    line = b""
    while not line.endswith(b"\n"):
        got = os.read(0, 1)
        if not got:
            return ""
        line += got
    return line.decode(errors="replace").strip()


def destroy(xl: str, domain: str) -> None:
    """Destroy the domain, and again if a build vmtax started shows it
    later: until it has been absent for two checks in a row, GUARD_S at most."""
    deadline, absent = time.monotonic() + GUARD_S, 0
    while absent < 2 and time.monotonic() < deadline:
        subprocess.run([xl, "destroy", domain], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        there = subprocess.run([xl, "domid", domain], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        absent = absent + 1 if there.returncode != 0 else 0
        time.sleep(1.0)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -S xenrelay.py XL DOMAIN  (then the console's xenstore key on stdin)", file=sys.stderr)
        return 2
    xl, domain = argv
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is vmtax's to handle: it stops this relay itself
    try:
        relay(first_line())
    finally:
        destroy(xl, domain)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
