"""Loopback servers refuse the web: one guard for every local server a2a-tape starts.

``a2a-tape proxy`` forwards with the upstream's credentials, ``serve`` answers with every
recording, and the UI shows them: each listens on loopback, for programs on this machine. A web
page the developer visits is on this machine too, through the browser. Two ways in, both closed here
(docs/design.md, "Trust boundaries"):

- **DNS rebinding**: a page at ``http://evil.example:8080`` whose name is made to resolve to
  127.0.0.1 reaches the server, but its requests say ``Host: evil.example:8080``. A request whose
  ``Host`` names neither a loopback name (``localhost``, ``*.localhost``, ``127.0.0.0/8``, ``::1``) nor
  the address the connection came in on gets 403, unless the name is allowed (``--allow-host
  NAME``) or any name is (``--allow-remote``: the server was put on the network on purpose). No
  ``Host`` at all (HTTP/1.0) is not a browser's.
- **Cross-site requests**: a page elsewhere may send a request without reading the answer (a
  ``text/plain`` POST needs no CORS preflight) and the server would act on it. A browser says
  where a request comes from: a request carrying an ``Origin`` that is not this server's own, or
  ``Sec-Fetch-Site`` of another site, gets 403, unless the origin's host is allowed
  (``--allow-host``). Programs (httpx, the a2a-sdk clients, curl) send neither.

What a server names itself as (the URLs of a served or proxied agent card) is never the client's
``Host`` when any host is allowed: it is then the address the connection came in on.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:  # annotations only: the CLI imports this module at startup, starlette loads with a server
    from starlette.types import ASGIApp, Receive, Scope, Send


def is_loopback(host: str) -> bool:
    """A loopback name: ``localhost`` (and ``*.localhost``, which browsers resolve to loopback
    themselves), an address of 127.0.0.0/8, ``::1``; brackets and a trailing dot aside."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _hostname(authority: str) -> str:
    """``host[:port]`` (``[v6]:port`` too) -> host, lower-case, without brackets or a trailing dot."""
    if authority.startswith("["):
        return authority[1 : authority.find("]")].lower() if "]" in authority else authority.lower()
    return authority.rpartition(":")[0].lower().rstrip(".") if ":" in authority else authority.lower().rstrip(".")


@dataclass(frozen=True)
class Guard:
    """Who may talk to a loopback server: ``allow_hosts`` (names, as in ``Host`` or an ``Origin``),
    ``any_host`` (``--allow-remote``: every ``Host``; browsers' cross-site requests stay refused)."""

    allow_hosts: frozenset[str] = field(default_factory=frozenset)
    any_host: bool = False

    @classmethod
    def of(cls, allow_hosts: Iterable[str] = (), any_host: bool = False) -> Guard:
        return cls(frozenset(_hostname(h.strip()) or h.strip().lower() for h in allow_hosts if h.strip()), any_host)

    def host_allowed(self, host: str, scope: Scope) -> bool:
        name = _hostname(host)
        if name in self.allow_hosts or is_loopback(name):
            return True
        server = scope.get("server")
        return server is not None and name == str(server[0]).lower()

    def refusal(self, scope: Scope) -> str | None:
        """Why this request is refused (one line), or None."""
        headers = _headers(scope)
        host = headers.get("host")
        if host is not None and not self.any_host and not self.host_allowed(host, scope):
            return (
                f"Host '{host[:100]}' is not this server's (a web page after DNS rebinding?); "
                f"to serve it, start with --allow-host {_hostname(host)[:100]}"
            )
        origin = headers.get("origin")
        if origin is not None:
            if origin.lower() == f"{scope.get('scheme', 'http')}://{host}".lower() or self._origin_allowed(origin):
                return None
            return (
                f"a web page at {origin[:100]} may not drive this server (cross-site request); "
                "to allow it, start with --allow-host naming its host"
            )
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"a browser request from another site (Sec-Fetch-Site: {site[:20]}) may not drive this server"
        return None

    def _origin_allowed(self, origin: str) -> bool:
        try:
            p = urlsplit(origin)
        except ValueError:
            return False
        return bool(p.scheme and p.netloc) and _hostname(p.netloc) in self.allow_hosts

    def base_url(self, scope: Scope) -> str:
        """``scheme://authority`` this server names itself by in what it serves: the client's
        ``Host`` when it is a name this guard allows by itself, else the address the connection
        came in on (never a name a client made up)."""
        scheme = scope.get("scheme", "http")
        host = _headers(scope).get("host")
        if host is not None and self.host_allowed(host, scope):
            return f"{scheme}://{host}"
        server = scope.get("server") or ("127.0.0.1", None)
        addr, port = str(server[0]), server[1]
        addr = f"[{addr}]" if ":" in addr else addr
        return f"{scheme}://{addr}" + (f":{port}" if port else "")


LOOPBACK_ONLY = Guard()


def _headers(scope: Scope) -> dict[str, str]:
    """The headers the guard reads (the first of each), decoded latin-1."""
    wanted = (b"host", b"origin", b"sec-fetch-site")
    out: dict[str, str] = {}
    for k, v in scope.get("headers", ()):
        if k in wanted and k.decode() not in out:
            out[k.decode()] = v.decode("latin-1")
    return out


class LoopbackGuard:
    """ASGI middleware: requests the :class:`Guard` refuses get 403 and one line, unseen by the app."""

    def __init__(self, app: ASGIApp, guard: Guard = LOOPBACK_ONLY) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            why = self.guard.refusal(scope)
            if why is not None:
                await _forbidden(scope, send, why)
                return
        await self.app(scope, receive, send)


async def _forbidden(scope: Scope, send: Send, why: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = f"a2a-tape: refused: {why}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": body})
