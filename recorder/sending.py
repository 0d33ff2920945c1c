"""The capture core's HTTP side: how every recording path of ``recorder/`` talks upstream.

The core itself (begin -> head -> body bytes -> SSE items -> redaction -> append plan ->
outcome) is :mod:`store.capture`, re-exported here: it needs nothing above the store, so serve's
recording modes (``replay/serve/forward.py``) use the same one. This module adds what needs httpx:

- :class:`Timeouts`: connect, first byte (the response head) and read timeouts for every
  upstream call; :func:`send` enforces them, so an agent that accepts the connection and never
  answers cannot hang a caller past the timeouts it was given (httpx alone waits for the head
  with the read timeout, and streams are read with none);
- redirects are not followed: :func:`redirect_message` says where the agent points instead of
  blaming the host that answered;
- :func:`body_chunks`: the decoded body bytes of a response (the raw chunks when there is no
  content coding: the record hot path), a coding that does not decode raising
  :class:`recorder.codings.DecodingError` with a readable reason;
- :func:`describe`: a transport error as one readable line, redacted;
- :func:`store_fault`: a driver error of the log (disk full, locked, read-only) as the
  :class:`store.StoreError` subclass that names it, so commands exit 2 with one line.

Usage, for a path that reads a stream::

    cap = Capture(redactor)
    ex_id = st.begin_exchange(cap.request(url=..., rpc_method=..., dialect=..., streaming=True, headers=h, body=b))
    cap.exchange_id = ex_id
    resp = await send(http, http.build_request("POST", url, headers=h, content=b), Timeouts(read=None))
    cap.head(resp.status_code, resp.headers.get("content-type"), resp.headers.multi_items())
    async for chunk in body_chunks(resp):
        items = cap.feed(chunk)             # exact bytes; item.raw is what to pass on
        new, decoded = cap.events(items)    # redacted rows, task ids learnt
        st.append_batch(new)                # the caller's append (one transaction, a writer, ...)
    new, decoded = cap.events(cap.close())  # a cut last item is kept, marked incomplete
    st.update_exchange(ex_id, **cap.end("ok"))
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import httpx

from a2a_tape.store.capture import CUT, OUTCOMES, Capture, Outcome, TaskContext, plan_events
from a2a_tape.store.errors import A2ATapeError, DatabaseLocked, DiskFull, ReadOnlyStore, StoreError
from a2a_tape.store.redact import Redactor, safe_text

from .codings import Decoding, DecodingError

__all__ = [
    "CUT",
    "OUTCOMES",
    "Capture",
    "DecodingError",
    "FirstByteTimeout",
    "Outcome",
    "TaskContext",
    "Timeouts",
    "body_chunks",
    "describe",
    "is_redirect",
    "plan_events",
    "redirect_message",
    "send",
    "store_fault",
]


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


def is_redirect(resp: httpx.Response) -> bool:
    return resp.status_code in (301, 302, 303, 307, 308)


def redirect_message(resp: httpx.Response, what: str, redactor: Redactor | None = None) -> str:
    """The one line for a redirect we do not follow: where it points."""
    where = resp.headers.get("location")
    to = f"a redirect to {where}" if where else "a redirect without a Location"
    return safe_text(f"{what} answered HTTP {resp.status_code} ({to}): not followed; use the URL it names", redactor)


def body_chunks(resp: httpx.Response) -> AsyncIterator[bytes]:
    """The body's decoded bytes as they arrive: the raw chunks when there is no content coding
    (httpx's own iterator, no decoder layers and no generator of ours on the hot path), else
    undone by :class:`recorder.codings.Decoding` (gzip, deflate, br, zstd). A coding that cannot
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


def describe(exc: BaseException, url: str, capture: Capture | None = None) -> str:
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


def store_fault(exc: BaseException) -> StoreError | None:
    """The log cannot be written: the :class:`store.StoreError` naming why (None: not a fault
    of the log). Our own store errors pass as they are; driver errors are classified."""
    if isinstance(exc, StoreError):
        return exc
    msg = str(exc).lower()
    if isinstance(exc, sqlite3.Error):
        if "full" in msg:
            return DiskFull(f"the log cannot be written: the disk is full ({exc})")
        if "locked" in msg or "busy" in msg:
            return DatabaseLocked(f"the log is locked by another process ({exc})")
        if "readonly" in msg or "read-only" in msg:
            return ReadOnlyStore(f"the log is on read-only storage ({exc})")
        return StoreError(f"the log cannot be written: {type(exc).__name__}: {exc}")
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"the log cannot be written: the disk is full ({exc.strerror})")
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return ReadOnlyStore(f"the log is on read-only storage ({exc.strerror})")
    return None


def _short(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else ""
