"""The HTTP transport of our clients: no CA bundle loaded before an ``https://`` request.

httpx builds a verifying TLS context (the whole certifi bundle, ~20 ms) for every client or
transport it makes, even one that only ever speaks plain HTTP to ``127.0.0.1``: a cost paid
before the first byte of every ``record``, ``probe``, recovery, ``RecordingTransport`` and request
serve forwards.
:class:`LazyTlsTransport` (sync and async) sends ``http://`` requests through a transport whose
TLS context trusts no CA at all (it could not complete a handshake: it fails closed), and
builds the verifying one on the first ``https://`` request.

:func:`cookieless` is the cookie jar of a client that acts for many parties (the proxy's, the
startup recovery's): it keeps nothing.

:func:`read_body` reads an answer that is not a stream (an agent card, a JSON-RPC answer) up to
:data:`MAX_BODY` bytes, decoded: an agent that sends a body without end (or a compressed one
that unpacks without end) gets :class:`BodyTooLarge`, a readable error, instead of the caller's
memory.

They live here, below the recorder, because serve's recording modes (:mod:`replay.serve.forward`) call
agents too.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any, Protocol

import anyio
import httpx

from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.redact import Redactor, safe_text
from a2a_tape.wire.codings import Decoding, DecodingError
from a2a_tape.wire.served import up_to

MAX_BODY = 64 * 1024 * 1024
"""Bytes of an answer that is not a stream (after its content coding), at most: a card is a few
KiB, a JSON-RPC answer with files inline a few MiB. Streams are bounded per item (``max_line``)."""


class BodyTooLarge(A2ATapeError):
    """An answer that is not a stream went past :data:`MAX_BODY`: it was not read further."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"{what} is larger than the {limit // (1024 * 1024)} MiB limit: not read further")
        self.limit = limit


async def read_body(
    resp: httpx.Response, what: str, chunks: AsyncIterator[bytes] | None = None, limit: int = MAX_BODY
) -> bytes:
    """The whole (decoded) body of ``resp``, or :class:`BodyTooLarge` naming ``what`` ("the
    agent card at URL") once it passes ``limit``. ``chunks``: the decoded bytes when the caller
    has its own decoder (the capture core's :func:`capture.sending.body_chunks`)."""
    if chunks is None and resp.is_stream_consumed:
        try:  # read already (a response made from bytes, an in-process transport's): its content is all there is
            content = resp.content
        except httpx.ResponseNotRead:
            content = None
        if content is not None:
            if len(content) > limit:
                raise BodyTooLarge(what, limit)
            return content
    # a Content-Length counts the coded bytes: only without a coding is it the body's own size
    declared = None if resp.headers.get("content-encoding") else resp.headers.get("content-length")
    body = await up_to(chunks if chunks is not None else body_chunks(resp), declared, limit)  # codings bounded
    if body is None:
        raise BodyTooLarge(what, limit)
    return body


class LazyTlsTransport(httpx.AsyncBaseTransport, httpx.BaseTransport):
    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs  # what httpx.(Async)HTTPTransport takes, ``verify`` included
        self._plain: httpx.AsyncHTTPTransport | None = None
        self._tls: httpx.AsyncHTTPTransport | None = None
        self._sync_plain: httpx.HTTPTransport | None = None
        self._sync_tls: httpx.HTTPTransport | None = None

    def _lazy(self, request: httpx.Request) -> bool:
        return request.url.scheme == "http" and "verify" not in self._kwargs

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._lazy(request):
            if self._plain is None:
                self._plain = httpx.AsyncHTTPTransport(verify=_trusts_nothing(), **self._kwargs)
            return await self._plain.handle_async_request(request)
        if self._tls is None:
            self._tls = httpx.AsyncHTTPTransport(**self._kwargs)
        return await self._tls.handle_async_request(request)

    async def aclose(self) -> None:
        for t in (self._plain, self._tls):
            if t is not None:
                await t.aclose()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self._lazy(request):
            if self._sync_plain is None:
                self._sync_plain = httpx.HTTPTransport(verify=_trusts_nothing(), **self._kwargs)
            return self._sync_plain.handle_request(request)
        if self._sync_tls is None:
            self._sync_tls = httpx.HTTPTransport(**self._kwargs)
        return self._sync_tls.handle_request(request)

    def close(self) -> None:
        for t in (self._sync_plain, self._sync_tls):
            if t is not None:
                t.close()


def _trusts_nothing() -> ssl.SSLContext:
    """Hostname checks on, certificates required, no CA to verify them against."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def cookieless() -> CookieJar:
    """A cookie jar that keeps nothing, for a client that acts for many: the proxy's one pool
    serves all its clients, and recovery resumes tasks of many. A cookie an agent sets for one of
    them (a session, a load balancer's stickiness) goes back in that answer's headers, and is
    never kept to ride along with another's request."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


@dataclass(frozen=True)
class Timeouts:
    """Seconds for one upstream call. ``read``: between two reads of the body (None: no limit,
    for a stream watched by a stall watchdog); ``first_byte``: from the request sent to the
    response head."""

    connect: float = 10.0
    first_byte: float = 30.0
    read: float | None = 30.0
    write: float = 30.0

    def httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.connect)


class FirstByteTimeout(httpx.ReadTimeout, A2ATapeError):
    """The agent accepted the request and sent no response head within the timeout (an httpx
    timeout, so callers that handle those handle it)."""


async def send(
    http: httpx.AsyncClient | httpx.AsyncBaseTransport, request: httpx.Request, timeouts: Timeouts
) -> httpx.Response:
    """Send ``request`` (streamed response, redirects not followed) within ``timeouts``: the
    response head must come within ``first_byte`` seconds of the request sent (the connection
    within ``connect``). The caller closes the response.

    ``http`` is a client, or a transport (a connection pool) used as it is: no cookie jar, no
    auth flow, no redirect handling, the request sent as built (the proxy's relays)."""
    request.extensions["timeout"] = timeouts.httpx().as_dict()
    outer = request.extensions.get("trace")
    with anyio.CancelScope(deadline=anyio.current_time() + timeouts.connect + timeouts.first_byte) as scope:

        async def trace(name: str, info: dict[str, object]) -> None:
            if name.endswith("send_request_body.complete"):  # sent: the head is due within first_byte
                scope.deadline = anyio.current_time() + timeouts.first_byte
            if outer is not None:
                await outer(name, info)

        request.extensions["trace"] = trace
        if isinstance(http, httpx.AsyncClient):
            return await http.send(request, stream=True, follow_redirects=False)
        response = await http.handle_async_request(request)
        response.request = request
        return response
    raise FirstByteTimeout(
        f"no response head within {timeouts.first_byte:g} s (the connection was accepted)", request=request
    )


def redirect_message(status: int, location: str | None, what: str, redactor: Redactor | None = None) -> str:
    """The one line for a redirect we do not follow: where it points."""
    to = f"a redirect to {location}" if location else "a redirect without a Location"
    return safe_text(f"{what} answered HTTP {status} ({to}): not followed; use the URL it names", redactor)


def body_chunks(resp: httpx.Response) -> AsyncIterator[bytes]:
    """The body's decoded bytes as they arrive: the raw chunks when there is no content coding
    (httpx's own iterator, no decoder layers and no generator of ours on the hot path), else
    undone by :class:`wire.codings.Decoding` (gzip, deflate, br, zstd). A coding that cannot
    be undone or bytes that do not decode raise :class:`DecodingError` saying why (when the
    iteration starts, as before)."""
    coding = resp.headers.get("content-encoding", "").strip().lower()
    if coding in ("", "identity"):
        return _raw_chunks(resp)
    return _decoded_chunks(resp, coding)


def _raw_chunks(resp: httpx.Response) -> AsyncIterator[bytes]:
    """The response's byte stream itself (``Response.stream``, what ``aiter_raw`` iterates): one
    generator and one chunker call fewer per chunk than ``aiter_raw``, about 1 us per event of a
    long stream. Transport errors still arrive as httpx exceptions (the transport maps them),
    without ``.request`` attached (nothing here reads it). A response already read or closed goes
    through ``aiter_raw``, which says so."""
    stream = resp.stream
    if resp.is_stream_consumed or resp.is_closed or not isinstance(stream, httpx.AsyncByteStream):
        return resp.aiter_raw()
    resp.is_stream_consumed = True
    return stream.__aiter__()


async def _decoded_chunks(resp: httpx.Response, coding: str) -> AsyncIterator[bytes]:
    dec = Decoding(coding)
    if dec.unsupported:
        raise DecodingError(dec.unsupported)
    async for chunk in resp.aiter_raw():
        data = dec.decode(chunk)
        if data:
            yield data
    rest = dec.flush()
    if rest:
        yield rest


class Scrubs(Protocol):
    """What scrubs an exchange's secrets from an error text (:class:`capture.exchange.Capture`)."""

    def text(self, value: str) -> str: ...


def describe(exc: BaseException, url: str, capture: Scrubs | None = None) -> str:
    """A transport error as one readable line, its secrets (URL, header values) redacted."""
    if isinstance(exc, FirstByteTimeout):
        text = f"{url} accepted the connection but sent no response head in time ({exc})"
    elif isinstance(exc, httpx.ConnectTimeout):
        text = f"cannot connect to {url}: no connection within the connect timeout"
    elif isinstance(exc, httpx.TimeoutException):
        text = f"{url} did not answer in time ({type(exc).__name__})"
    elif isinstance(exc, httpx.ConnectError):
        text = f"cannot connect to {url}: {_short(exc) or 'connection refused'}"
    elif isinstance(exc, httpx.UnsupportedProtocol):
        text = f"not an http(s) URL: {url}"
    elif isinstance(exc, DecodingError):
        text = f"{url}: the body does not decode: {_short(exc)}"
    elif isinstance(exc, A2ATapeError):  # ours, already one readable line (a body or a line past its limit)
        text = f"{url}: {exc}"
    else:
        text = f"{url}: {type(exc).__name__}: {_short(exc)}"
    return capture.text(text) if capture is not None else safe_text(text)


def _short(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else ""
