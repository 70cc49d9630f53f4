"""`vmtax serve`: check where it may listen, open the store read-only, print
the URL and serve until Ctrl-C.  Loopback by default; any other address only
with a token (--token-file, or $VMTAX_SERVE_TOKEN), which every request must
then carry.  uvicorn serves the app; its own log stays quiet but for errors."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import sys
from pathlib import Path

from ..errors import UserError

TOKEN_ENV = "VMTAX_SERVE_TOKEN"
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{16,512}")


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str | None) -> str | None:
    """The token from --token-file or the environment; UserError for one too short or with odd characters."""
    if path:
        try:
            text = Path(path).read_text().strip()
        except OSError as e:
            raise UserError(f"--token-file {path}: cannot read it: {e.strerror}") from None
        where = f"--token-file {path}"
    else:
        text, where = os.environ.get(TOKEN_ENV, "").strip(), f"${TOKEN_ENV}"
        if not text:
            return None
    if not _TOKEN.fullmatch(text):
        raise UserError(f"{where}: a token is 16 to 512 characters of A-Z a-z 0-9 . _ ~ + / = -")
    return text


def allowed_hosts(host: str, extra: list[str]) -> set[str]:
    """The Host header names the server answers to: loopback's, the address it
    binds, this machine's name where it binds every address, and --allow-host's."""
    names = {"localhost", "127.0.0.1", "::1", host, *extra}
    if host in ("0.0.0.0", "::"):
        names |= {socket.gethostname(), socket.getfqdn()}
    return {n.lower() for n in names if n}


def check_bind(host: str, token: str | None) -> None:
    if not loopback(host) and token is None:
        raise UserError(
            f"--host {host} is not a loopback address: give a token (--token-file FILE or ${TOKEN_ENV}), "
            "or reach it through `ssh -L` (docs/serve.md)"
        )


def url_of(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def listening(host: str, port: int) -> socket.socket:
    """A socket bound to host:port and listening; UserError where it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    return sock


def serve(args) -> int:
    token = read_token(args.token_file)
    check_bind(args.host, token)
    try:
        import uvicorn

        from .app import build
        from .data import Reader
    except ImportError as e:
        raise UserError(f"vmtax serve needs its extra: pip install 'vmtax[serve]' ({e})") from None
    from ..store import default_db_path

    reader = Reader(args.db or default_db_path())
    try:
        app = build(reader, allowed_hosts(args.host, args.allow_host or []), token)
        sock = listening(args.host, args.port)  # before the URL is printed: a client that reads it may connect at once
        port = sock.getsockname()[1]
        print(f"vmtax serve: {reader.where} read-only; listening on {url_of(args.host, port)}", flush=True)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False)
        try:
            uvicorn.Server(config).run(sockets=[sock])
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM, which uvicorn raises again once it has shut down
            pass
        print("vmtax serve: stopped", file=sys.stderr)
    finally:
        reader.close()
    return 0
