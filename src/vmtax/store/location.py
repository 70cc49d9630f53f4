"""Where a results database is: whether a location names PostgreSQL (a
postgresql:// URL or a libpq keyword string) or an SQLite file, and a
location or message with its password taken out."""

from __future__ import annotations

import os
import re
from pathlib import Path

URL_SCHEMES = ("postgresql://", "postgres://")


# libpq's connection keywords: `host=db port=5432 dbname=vt` is a PostgreSQL location, never a file name
LIBPQ_KEYWORDS = frozenset(
    (
        "host hostaddr port dbname user password passfile require_auth channel_binding connect_timeout "
        "client_encoding options application_name fallback_application_name keepalives keepalives_idle "
        "keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode requiressl "
        "sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni requirepeer "
        "ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation service "
        "target_session_attrs load_balance_hosts sslnegotiation"
    ).split()
)
_PAIR = r"(\w+)\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s']*)"
_CONNINFO = re.compile(rf"\s*{_PAIR}(?:\s+{_PAIR})*\s*")
_CONNINFO_KEY = re.compile(_PAIR)


def is_url(location: str | Path) -> bool:
    """Whether location names a PostgreSQL database: a postgresql:// URL,
    or a libpq keyword string (key=value ... with a libpq keyword)."""
    if not isinstance(location, str):
        return False
    if location.startswith(URL_SCHEMES):
        return True
    return _CONNINFO.fullmatch(location) is not None and any(
        k.lower() in LIBPQ_KEYWORDS for k in _CONNINFO_KEY.findall(location)
    )


_URL_PASSWORD = re.compile(r"(postgres(?:ql)?://[^\s:/@]*):[^\s/]*@", re.IGNORECASE)
_KEY_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&']+)", re.IGNORECASE)


def redact(text: str) -> str:
    """Text as shown or stored (a location, a command line, an error): no
    password from a postgresql:// URL (user:PASSWORD@, ?password=), a libpq
    keyword string (password=...) or $PGPASSWORD survives."""
    out = _KEY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", str(text)))
    env = os.environ.get("PGPASSWORD", "")
    return out.replace(env, "***") if len(env) >= 3 else out
