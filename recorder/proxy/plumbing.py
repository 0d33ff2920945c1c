"""The proxy's HTTP plumbing: which requests are public, where the token is, which headers cross.

The proxy answers only for its own concerns (its token, its body limit, its own errors); what
crosses it is the client's request and the agent's answer, as sent. This module holds the
rules for the edges of that:

- public without a token: exactly the agent-card paths at the root (``GET`` or ``HEAD``),
  compared on the raw path, so ``/admin/.well-known/agent-card.json`` or a percent-encoded
  spelling needs the token like anything else;
- the token is looked for in ``Authorization`` and ``Proxy-Authorization`` (``Bearer``, compared
  in constant time), and every header value that carries it is dropped before forwarding,
  whichever header it was in; other credentials go upstream as the client sent them;
- headers cross as the bytes received (:func:`wire`): a value that is not ASCII is passed on, not
  refused; hop-by-hop headers (RFC 9110 section 7.6.1, plus those named in ``Connection``) do not
  cross in either direction; ``Content-Length`` and ``Content-Encoding`` of an answer are not passed on
  because the body the client gets is the decoded one, framed again;
- an absolute ``Location`` on the upstream's origin is rewritten to the proxy's origin, as the
  card's URLs are, so a client that follows it stays behind the proxy;
- a relayed stream (:class:`RelayedStream`) ends as the upstream's did: cut when it was cut.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

import anyio
import httpx
from httpcore import LocalProtocolError
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from a2a_tape.recorder.proxy.relay import Cut, Headers
from a2a_tape.store.headers import HOP_BY_HOP
from a2a_tape.store.methods import CARD_PATHS

RAW_CARD_PATHS = frozenset(path.encode() for path in CARD_PATHS)  # compared on the raw path

_HOP = HOP_BY_HOP
_REQUEST_DROP = _HOP | {"host", "content-length", "accept-encoding"}  # httpx sets these itself
# the answer is decoded and framed again by the proxy's server, which sets its own date and server
_RESPONSE_DROP = _HOP | {"content-length", "content-encoding", "date", "server", "proxy-authenticate"}
_AUTH_HEADERS = ("authorization", "proxy-authorization")


@dataclass(frozen=True)
class Upstream:
    """Where the proxy forwards to: the origin without credentials, and the credentials apart
    (``http://user:pw@host`` becomes Basic auth on the client), so no URL we build, print or
    store carries the password."""

    origin: str  # scheme://host[:port], no userinfo
    auth: httpx.BasicAuth | None

    @classmethod
    def parse(cls, url: str) -> Upstream:
        p = urlsplit(url)
        host = p.netloc.rpartition("@")[2]
        auth = None
        if "@" in p.netloc:
            userinfo = p.netloc.rpartition("@")[0]
            user, _, password = userinfo.partition(":")
            auth = httpx.BasicAuth(unquote(user), unquote(password))
        return cls(origin=f"{p.scheme}://{host}", auth=auth)

    def authorize(self, request: httpx.Request) -> httpx.Request:
        """``request`` with the upstream's credentials (replacing any ``Authorization`` the client
        sent, as a client's ``auth`` does), for a request sent on the connection pool itself."""
        if self.auth is None:
            return request
        return next(self.auth.auth_flow(request))


def without_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` removed."""
    p = urlsplit(url)
    if "@" not in p.netloc:
        return url
    return urlunsplit((p.scheme, p.netloc.rpartition("@")[2], p.path, p.query, p.fragment))


def is_public(method: str, raw_path: bytes) -> bool:
    """The agent card at the root, read with GET or HEAD: the only requests needing no token."""
    return method in ("GET", "HEAD") and raw_path in RAW_CARD_PATHS


def _bearer(value: str) -> str | None:
    scheme, _, credentials = value.strip().partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


def carries_token(value: str, token: str) -> bool:
    got = _bearer(value)
    return got is not None and hmac.compare_digest(got.encode(), token.encode())


def token_presented(headers: Iterable[tuple[str, str]], token: str) -> bool:
    """Whether any ``Authorization`` / ``Proxy-Authorization`` value is ``Bearer <token>``."""
    found = False
    for name, value in headers:
        if name.lower() in _AUTH_HEADERS and carries_token(value, token):
            found = True  # no early exit: the same work whatever the headers hold
    return found


def request_headers(headers: Iterable[tuple[str, str]], token: str | None) -> list[tuple[str, str]]:
    """The client's headers to send upstream: hop-by-hop ones and our own token left out."""
    pairs = list(headers)
    drop = _REQUEST_DROP | _connection_tokens(pairs)
    out = []
    for name, value in pairs:
        low = name.lower()
        if low in drop:
            continue
        if token and low in _AUTH_HEADERS and carries_token(value, token):
            continue
        out.append((name, value))
    return out


def wire(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Headers as bytes, as they were received: our server decoded them latin-1 (one character per
    byte), so a value that is not ASCII (UTF-8 from a client) goes on byte for byte."""
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]


class Departure:
    """Whether a request may have reached the upstream, told by httpcore's trace events: from the
    moment its head begins to be written, unless h11 refused to serialise that head (a
    ``LocalProtocolError`` there means not one byte was written). Before that it provably never
    left: the proxy releases its idempotency key, so a retry goes upstream."""

    def __init__(self) -> None:
        self.left = False

    async def trace(self, name: str, info: dict[str, object]) -> None:
        if name.endswith("send_request_headers.started"):
            self.left = True
        elif name.endswith("send_request_headers.failed") and isinstance(info.get("exception"), LocalProtocolError):
            self.left = False


def response_headers(headers: httpx.Headers, upstream_origin: str, proxy_origin: str) -> list[tuple[str, str]]:
    """The agent's answer headers to pass to the client (repeated names kept, in order; each value
    read latin-1 from its raw bytes, so :func:`encoded` gives the client the agent's bytes)."""
    pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers.raw]
    drop = _RESPONSE_DROP | _connection_tokens(pairs)
    out = []
    for name, value in pairs:
        low = name.lower()
        if low in drop:
            continue
        if low in ("location", "content-location"):
            value = rewrite_origin(value, upstream_origin, proxy_origin)
        out.append((name, value))
    return out


def rewrite_origin(url: str, upstream_origin: str, proxy_origin: str) -> str:
    """An absolute URL on the upstream's origin, moved to the proxy's; anything else as it is."""
    try:
        p = urlsplit(url)
    except ValueError:
        return url
    if not p.scheme or not p.netloc:
        return url
    if f"{p.scheme}://{p.netloc.rpartition('@')[2]}".lower() != upstream_origin.lower():
        return url
    return proxy_origin + url[len(f"{p.scheme}://{p.netloc}") :]


def _connection_tokens(pairs: list[tuple[str, str]]) -> frozenset[str]:
    """Header names listed in ``Connection`` (hop-by-hop by declaration)."""
    names: set[str] = set()
    for name, value in pairs:
        if name.lower() == "connection":
            names.update(t.strip().lower() for t in value.split(",") if t.strip())
    return frozenset(names)


def encoded(headers: Headers) -> list[tuple[bytes, bytes]]:
    """Headers as ASGI wants them: lower-case names, latin-1 bytes."""
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]


class QuietCut(logging.Filter):
    """uvicorn logs a response that ends without its last chunk as an error; the proxy's only
    such responses are the streams it cuts on purpose (the upstream cut them), recorded as
    ``dropped`` on their exchange: not an error of the proxy."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "returned without completing response" not in record.getMessage()


QUIET_CUT = QuietCut()


class RelayedStream(StreamingResponse):
    """A streaming answer that can end without its last chunk: when the upstream cut its stream,
    the client's connection is closed the same way instead of ending as if the agent finished; and
    when ``gone`` is set (the proxy dropped a client that read too slowly), at once, even while a
    write waits for the client to read."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        status_code: int,
        gone: anyio.Event | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(content, status_code)
        self.gone = gone
        self.on_close = on_close  # called once the response is over, however it ended

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.on_close is not None:
                self.on_close()

    async def stream_response(self, send: Send) -> None:
        async with anyio.create_task_group() as tg:
            if self.gone is not None:
                tg.start_soon(_cancel_when, self.gone, tg.cancel_scope)
            await self._relay(send)
            tg.cancel_scope.cancel()

    async def _relay(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except Cut:
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
