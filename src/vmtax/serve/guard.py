"""What every request to the dashboard passes before a page is built, as
one ASGI middleware: GET and HEAD only (405); a Host header the server
answers to (400: a DNS-rebinding page cannot read it); the token where one
is set (401), compared in constant time, from `Authorization: Bearer`, the
cookie, or once from ?token=, which sets the cookie and redirects to the URL
without it; and on every response a Content-Security-Policy that allows no
inline script and nothing from another origin."""

from __future__ import annotations

import hmac
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
COOKIE = "vmtax_token"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def host_name(header: str) -> str:
    """A Host header's name, less its port: 'example.org:8080' -> 'example.org', '[::1]:80' -> '::1'."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    def __init__(self, app, allowed: set[str], token: str | None):
        self.app, self.allowed, self.token = app, {h.lower().strip("[]") for h in allowed}, token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_secured(message):
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + HEADERS
            await send(message)

        refused = self.refusal(scope)
        if refused is not None:
            return await _plain(send_secured, *refused)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if self.token is not None and "token" in query:
            return await self._set_cookie(scope, query, send_secured)
        await self.app(scope, receive, send_secured)

    def refusal(self, scope) -> tuple[int, str, list] | None:
        """(status, text, headers) of a refused request, else None."""
        if scope["method"] not in ("GET", "HEAD"):
            return 405, "only GET and HEAD: the dashboard is read-only", [(b"allow", b"GET, HEAD")]
        headers = dict(scope.get("headers", []))
        if host_name(headers.get(b"host", b"").decode("latin-1")) not in self.allowed:
            return 400, "bad Host header: this server answers to " + ", ".join(sorted(self.allowed)), []
        if self.token is not None and not self.authorised(headers, scope):
            return 401, "a token is needed: Authorization: Bearer TOKEN, or ?token=TOKEN once", []
        return None

    def authorised(self, headers: dict, scope) -> bool:
        assert self.token is not None
        given = []
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if auth.lower().startswith("bearer "):
            given.append(auth[7:].strip())
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get(b"cookie", b"").decode("latin-1"))
        except Exception:
            pass
        if COOKIE in cookie:
            given.append(cookie[COOKIE].value)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query:
            given.append(query["token"])
        want = self.token.encode()
        return any(hmac.compare_digest(g.encode("utf-8", "replace"), want) for g in given)

    async def _set_cookie(self, scope, query: dict, send) -> None:
        rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
        where = quote(scope["path"]) + ("?" + rest if rest else "")
        cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
        await _plain(send, 303, "see " + where, [(b"location", where.encode()), (b"set-cookie", cookie.encode())])


async def _plain(send, status: int, text: str, headers: list) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
            + headers,
        }
    )
    await send({"type": "http.response.body", "body": body})
