"""Who may read the UI: this machine's browser, holding this run's token; nothing a web page asks.

Every request, page, fragment, stream and static file alike, passes :class:`Access` first:

1. ``Host`` must name this server on loopback (``127.0.0.1:PORT``, ``localhost:PORT``,
   ``[::1]:PORT``): a page of another site that rebinds its DNS name to 127.0.0.1 sends its own
   name (403).
2. A browser's cross-site request is refused: ``Sec-Fetch-Site`` other than ``same-origin`` or
   ``none`` (typed, opened from the command line), or an ``Origin`` other than this server's (403).
3. The run's random token, from ``?token=`` (the URL ``a2a-tape ui`` prints) or this port's
   cookie; without it, 401. A page opened with ``?token=`` gets the cookie (``HttpOnly``,
   ``SameSite=Strict``) and is redirected to the same address without the token, so the token
   stays out of the history and of every link.

Every answer carries a Content-Security-Policy that lets the page load its own scripts, styles
and streams and nothing else (no inline script, no frame, no form to elsewhere), and headers that
keep it out of caches and frames. Checks 1 and 2 are the loopback-server rules (docs/design.md
section 16) in their smallest form, kept here in one place until the shared module lands.
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
_SECURITY_NAMES = frozenset(name for name, _ in SECURITY_HEADERS)
_SAFE_FETCH_SITES = frozenset({"same-origin", "none"})


def cookie_name(port: int) -> str:
    """One cookie per port: two UIs on one machine (cookies ignore ports) keep their own tokens."""
    return f"a2a_tape_ui_{port}"


class Access:
    """ASGI middleware: the loopback host, same-origin requests only, the run's token."""

    def __init__(self, app: ASGIApp, *, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.port = port
        self.hosts = {f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")}
        self.origins = {f"http://{h}" for h in self.hosts}
        self.cookie = cookie_name(port)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                own = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _SECURITY_NAMES]
                message["headers"] = [*own, *SECURITY_HEADERS]
            await send(message)

        refusal = self.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, secured)
            return
        await self.app(scope, receive, secured)

    def refusal(self, scope: Scope) -> Response | None:
        """The answer to a request that may not go on, or None."""
        headers = Headers(scope=scope)
        if headers.get("host", "") not in self.hosts:
            return PlainTextResponse("refused: this server answers only at its own loopback address\n", 403)
        site = headers.get("sec-fetch-site")
        origin = headers.get("origin")
        if (site is not None and site not in _SAFE_FETCH_SITES) or (origin is not None and origin not in self.origins):
            return PlainTextResponse("refused: a request from another site\n", 403)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((v for k, v in query if k == "token"), None)
        if given is not None and self._valid(given):
            # keep it in a cookie, and take it out of the address bar
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            target = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
            return response
        if self._valid(_cookie(headers, self.cookie)):
            return None
        return PlainTextResponse("a2a-tape ui: open the address with its ?token= that 'a2a-tape ui' printed\n", 401)

    def _valid(self, value: str | None) -> bool:
        return bool(value) and hmac.compare_digest(str(value).encode(), self.token.encode())


def _cookie(headers: Headers, name: str) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None
