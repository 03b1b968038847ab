"""Who may talk to the console: access token, Host and Origin checks, security headers.

A pure ASGI middleware, so one check covers every HTTP request and every WebSocket
handshake before any route runs:

- **Token.** When the app has one (always for a non-loopback bind), each request and
  stream carries it in the ``X-Probench-Token`` header, ``Authorization: Bearer``, or the
  ``token`` query parameter (browsers cannot set WebSocket headers); compared in constant
  time. Missing or wrong: 401 (a WebSocket handshake: refused, 403).
- **Host.** Without a token the console answers only requests addressed to a loopback name
  (localhost, ::1, or an address in 127.0.0.0/8: the same test that decides whether a
  bind needs a token): a web page whose domain is re-pointed at 127.0.0.1 (DNS
  rebinding) sends its own name in Host and is refused.
- **Origin.** A request that names an ``Origin`` (every browser WebSocket handshake and
  every cross-origin or state-changing fetch) must come from the console's own origin; a
  ``Sec-Fetch-Site`` other than same-origin/none is refused too. No CORS headers are ever
  sent, so other origins cannot read answers either.
- **Headers.** Every answer forbids framing, sniffing, referrers (the token may be in the
  URL), caching, and any script or connection not from the console itself (CSP).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_HEADER = "x-probench-token"
TOKEN_QUERY = "token"
_SAFE_FETCH_SITES = frozenset({"same-origin", "none"})

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = tuple(
    (k.encode(), v.encode())
    for k, v in (
        ("content-security-policy",
         "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
         "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
        ("cross-origin-resource-policy", "same-origin"),
        ("cross-origin-opener-policy", "same-origin"),
    )
)


def new_token() -> str:
    """A fresh access token (192 random bits, URL-safe)."""
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """Whether a bind address or host name is this machine only (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(host_header: str) -> str:
    """``"127.0.0.1:8080"`` -> ``"127.0.0.1"``, ``"[::1]:8080"`` -> ``"::1"``, lower case."""
    h = host_header.strip().lower()
    if h.startswith("["):
        return h[1:].split("]", 1)[0]
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def token_matches(given: str | None, token: str) -> bool:
    """Constant-time comparison (of UTF-8 bytes: non-ASCII input must not raise)."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode("utf-8"))


class Guard:
    """The ASGI middleware described in the module docstring."""

    def __init__(self, app: ASGIApp, *, token: str | None, loopback_only: bool) -> None:
        self.app = app
        self.token = token
        self.loopback_only = loopback_only

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """``(status, reason)`` when the request must be refused, else None."""
        headers: dict[str, str] = {}
        for k, v in scope.get("headers", ()):
            headers.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
        host = headers.get("host", "")
        if self.loopback_only and not is_loopback(host_name(host)):
            return 403, "host not allowed: this console answers only on loopback (127.x.x.x, localhost, ::1)"
        site = headers.get("sec-fetch-site")
        if site is not None and site not in _SAFE_FETCH_SITES:
            return 403, "cross-origin request refused"
        origin = headers.get("origin")
        if origin is not None:
            scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
            if origin.lower() != f"{scheme}://{host}".lower():
                return 403, "cross-origin request refused"
        if self.token is not None:
            given = headers.get(TOKEN_HEADER)
            auth = headers.get("authorization", "")
            if given is None and auth.lower().startswith("bearer "):
                given = auth[7:].strip()
            if given is None:
                query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
                given = (query.get(TOKEN_QUERY) or [None])[0]
            if not token_matches(given, self.token):
                return 401, "access token missing or wrong (see the token printed at start)"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refused = self.refusal(scope)
        if refused is not None:
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": refused[1]})
            else:
                await _plain(send, *refused)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers if kind == "http" else send)


async def _plain(send: Send, status: int, text: str) -> None:
    body = f"{status}: {text}\n".encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
    ]})
    await send({"type": "http.response.body", "body": body})
