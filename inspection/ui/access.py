"""Who may read the UI: this machine's browser, holding this run's token; nothing a web page asks.

Every request, page, fragment, stream and static file alike, passes three layers, outermost first
(:func:`protect`):

1. :class:`SecurityHeaders`: every answer, a refusal too, carries a Content-Security-Policy that
   lets the page load its own scripts, styles and streams and nothing else (no inline script, no
   frame, no form to elsewhere), and headers that keep it out of caches and frames.
2. The loopback guard every server of ours has (:mod:`a2a_tape.wire.loopback`): a ``Host`` that
   is not a loopback name, the address the connection came in on or an ``--allow-host`` name (a
   page after DNS rebinding), and a browser's cross-site request (``Origin``, ``Sec-Fetch-Site``),
   get 403, token or not.
3. :class:`TokenCheck`, the UI's own: the run's random token, from ``?token=`` (the URL
   ``a2a-tape ui`` prints) or this port's cookie; without it, 401. A page opened with ``?token=``
   gets the cookie (``HttpOnly``, ``SameSite=Strict``) and is redirected to the same address
   without the token, so the token stays out of the history and of every link. ``ui --open`` hands
   the browser a one-time code instead (``?code=``), good for one cookie: the token itself never
   goes on the browser's command line, where another local user could read it (``ps``).
"""

from __future__ import annotations

import hmac
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


def protect(*, token: str, port: int, guard: Guard, codes: set[str] | None = None) -> list[Middleware]:
    """The UI's middleware, outermost first: the headers, the loopback guard, the token (or one
    of ``codes``, each good once)."""
    return [
        Middleware(SecurityHeaders),
        Middleware(LoopbackGuard, guard=guard),
        Middleware(TokenCheck, token=token, port=port, codes=codes),
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
    """ASGI middleware: the run's token, in the address once (then a cookie) or in the cookie."""

    def __init__(self, app: ASGIApp, *, token: str, port: int, codes: set[str] | None = None) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie_name(port)
        self.codes = codes if codes is not None else set()  # one-time codes: each exchanged once for the cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self.refusal(scope) if scope["type"] == "http" else None
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> Response | None:
        """The answer to a request that may not go on (or that only sets the cookie), or None."""
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((v for k, v in query if k == "token"), None)
        code = next((v for k, v in query if k == "code"), None)
        if (given is not None and self._valid(given)) or (code is not None and self._redeem(code)):
            # keep it in a cookie, and take it out of the address bar
            rest = urlencode([(k, v) for k, v in query if k not in ("token", "code")])
            target = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
            return response
        if self._valid(_cookie(Headers(scope=scope), self.cookie)):
            return None
        return PlainTextResponse("a2a-tape ui: open the address with its ?token= that 'a2a-tape ui' printed\n", 401)

    def _redeem(self, code: str) -> bool:
        """A one-time code, spent here (a second use is refused)."""
        for known in list(self.codes):
            if hmac.compare_digest(code.encode(), known.encode()):
                self.codes.discard(known)
                return True
        return False

    def _valid(self, value: str | None) -> bool:
        return bool(value) and hmac.compare_digest(str(value).encode(), self.token.encode())


def _cookie(headers: Headers, name: str) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None
