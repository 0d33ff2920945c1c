"""Who may read the UI: this machine's browser, holding this run's token; nothing a web page asks.

The UI lives under a path prefix of its own, made at random for the run (``/PREFIX/``, :func:`new_prefix`):
its cookie is set for that path only. A browser sends a host's cookies to every port of it (cookies
ignore ports), so a cookie for ``/`` would reach any other program listening on 127.0.0.1 that the
browser is made to open; one for ``/PREFIX`` reaches a page of that path only, which no other server
is asked for unless it knows the prefix (it is in the address ``a2a-tape ui`` prints, never on a
command line). Anything outside the prefix is 404, token or not.

Every request, page, fragment, stream and static file alike, passes three layers, outermost first
(:func:`protect`):

1. :class:`SecurityHeaders`: every answer, a refusal too, carries a Content-Security-Policy that
   lets the page load its own scripts, styles and streams and nothing else (no inline script, no
   frame, no form to elsewhere), and headers that keep it out of caches and frames.
2. The loopback guard every server of ours has (:mod:`a2a_tape.wire.loopback`): a ``Host`` that
   is not a loopback name, the address the connection came in on or an ``--allow-host`` name (a
   page after DNS rebinding), and a browser's cross-site request (``Origin``, ``Sec-Fetch-Site``),
   get 403, token or not.
3. :class:`TokenCheck`, the UI's own: the prefix (outside it, 404), then the run's random token,
   from ``?token=`` (the URL ``a2a-tape ui`` prints) or this port's cookie; without it, 401. A page
   opened with ``?token=`` gets the cookie (``HttpOnly``, ``SameSite=Strict``, ``Path=/PREFIX``) and
   is redirected to the same address without the token, so the token stays out of the history and
   of every link. ``ui --open`` hands the browser a one-time code instead (``/?code=``, at the root:
   neither the token nor the prefix goes on the browser's command line, where another local user
   could read it with ``ps``), good for one cookie and a redirect into the prefix.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_tape.wire.loopback import Guard, LoopbackGuard

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


def cookie_name(port: int) -> str:
    """One cookie per port: two UIs on one machine (cookies ignore ports) keep their own tokens."""
    return f"a2a_tape_ui_{port}"


def new_prefix() -> str:
    """A run's path prefix: ``/`` and 128 random bits, URL-safe (no other server guesses it)."""
    return "/" + secrets.token_urlsafe(16)


def protect(*, token: str, port: int, guard: Guard, prefix: str, codes: set[str] | None = None) -> list[Middleware]:
    """The UI's middleware, outermost first: the headers, the loopback guard, the prefix and the
    token (or one of ``codes``, each good once)."""
    return [
        Middleware(SecurityHeaders),
        Middleware(LoopbackGuard, guard=guard),
        Middleware(TokenCheck, token=token, port=port, prefix=prefix, codes=codes),
    ]


class SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every HTTP answer, in place of the app's own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                own = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _SECURITY_NAMES]
                message["headers"] = [*own, *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)


class TokenCheck:
    """ASGI middleware: the run's prefix, then its token, in the address once (then a cookie) or in
    the cookie. A request it lets in goes on with the prefix as its ``root_path`` (the app's routes
    are the paths under it)."""

    def __init__(self, app: ASGIApp, *, token: str, port: int, prefix: str, codes: set[str] | None = None) -> None:
        assert prefix.startswith("/") and not prefix.endswith("/") and len(prefix) > 1, prefix
        self.app = app
        self.token = token
        self.prefix = prefix
        self.cookie = cookie_name(port)
        self.codes = codes if codes is not None else set()  # one-time codes: each exchanged once for the cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan (the app has no websocket route)
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app({**scope, "root_path": scope.get("root_path", "") + self.prefix}, receive, send)

    def refusal(self, scope: Scope) -> Response | None:
        """The answer to a request that may not go on (or that only sets the cookie), or None."""
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        path = scope["path"]
        inside = path.startswith(self.prefix + "/")
        if not inside and path != self.prefix:
            code = next((v for k, v in query if k == "code"), None) if path == "/" else None
            if code is not None and self._redeem(code):  # ui --open: into the prefix, with the cookie
                return self._admit(self.prefix + "/", query)
            return _not_found()
        given = next((v for k, v in query if k == "token"), None)
        if given is not None and self._valid(given):
            return self._admit(path if inside else self.prefix + "/", query)
        if not self._valid(_cookie(Headers(scope=scope), self.cookie)):
            return PlainTextResponse("a2a-tape ui: open the address with its ?token= that 'a2a-tape ui' printed\n", 401)
        if not inside:  # /PREFIX: its index
            return self._admit(self.prefix + "/", query, cookie=False)
        return None

    def _admit(self, path: str, query: list[tuple[str, str]], *, cookie: bool = True) -> Response:
        """To ``path`` with the rest of the query: the token kept in a cookie of the prefix's path,
        and out of the address bar."""
        rest = urlencode([(k, v) for k, v in query if k not in ("token", "code")])
        response = RedirectResponse(path + (f"?{rest}" if rest else ""), status_code=303)
        if cookie:
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path=self.prefix)
        return response

    def _redeem(self, code: str) -> bool:
        """A one-time code, spent here (a second use is refused)."""
        for known in list(self.codes):
            if hmac.compare_digest(code.encode(), known.encode()):
                self.codes.discard(known)
                return True
        return False

    def _valid(self, value: str | None) -> bool:
        return bool(value) and hmac.compare_digest(str(value).encode(), self.token.encode())


def _not_found() -> Response:
    """Outside the prefix: what any server says of a path it does not have (nothing about the UI)."""
    return PlainTextResponse("Not Found\n", 404)


def _cookie(headers: Headers, name: str) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None
