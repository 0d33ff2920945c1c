"""``ReplayTransport``: the replay server's answers with no sockets, for httpx and the a2a-sdk client.

Hand it to ``httpx.Client(transport=...)`` / ``httpx.AsyncClient(transport=...)`` (or to the
a2a-sdk client through its ``httpx_client``): every request is answered by the same
:class:`~replay.serve.engine.ReplayEngine` as ``a2a-tape serve``, streams included, chunk by chunk
(httpx's own ASGI transport buffers a whole response, which a stalled stream would never end).

The sync side runs the engine on an event loop in a helper daemon thread, started on first
use and stopped by :meth:`ReplayTransport.close` (a daemon, so a client never closed cannot
hold the interpreter at exit). A read timeout set on the
client (``httpx.Timeout(read=...)``) applies to each stream chunk, so a ``stall-after`` fault
ends in ``httpx.ReadTimeout`` as it would over a socket.

No socket answers the client, but pushes are real: a recording with pushes (``proxy`` records
them) has them POSTed over HTTP to the webhook the client registers (a URL it listens on), from
the engine's event loop (the helper thread's, or the async client's own), once the answer is
returned (a whole body) or as the stream goes (:mod:`replay.serve.pushes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from typing import Any

import anyio
import httpx
import msgspec

from a2a_tape.capture.hooks import BeforeRecordAnswer, BeforeRecordRequest, RequestMatcher
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.faults import Faults
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.modes import RecordMode
from a2a_tape.replay.serve.reply import Reply
from a2a_tape.wire import http_json
from a2a_tape.wire.served import sendable


def _read_timeout(request: httpx.Request) -> float | None:
    timeout = request.extensions.get("timeout") or {}
    return timeout.get("read")


async def _next_chunk(agen: AsyncIterator[bytes], timeout: float | None) -> bytes | None:  # noqa: ASYNC109 - httpx's read timeout of one chunk, for the async and the sync stream (run on the loop thread) alike
    try:
        if timeout is None:
            return await agen.__anext__()
        with anyio.fail_after(timeout):
            return await agen.__anext__()
    except StopAsyncIteration:
        return None


class _AsyncStream(httpx.AsyncByteStream):
    def __init__(self, agen: AsyncGenerator[bytes, None], request: httpx.Request) -> None:
        self._agen = agen
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        timeout = _read_timeout(self._request)
        while True:
            try:
                chunk = await _next_chunk(self._agen, timeout)
            except TimeoutError:
                raise httpx.ReadTimeout(
                    "a2a-tape replay: no data within the read timeout", request=self._request
                ) from None
            if chunk is None:
                return
            yield chunk

    async def aclose(self) -> None:
        await self._agen.aclose()


class _LoopThread:
    """An asyncio event loop in a daemon thread, for the sync side."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="a2a-tape-replay-transport")
        self.thread.start()

    def call(self, fn: Any, *args: Any, timeout: float | None = None) -> Any:
        if self.loop.is_closed():
            raise RuntimeError("the replay transport was closed")
        return asyncio.run_coroutine_threadsafe(fn(*args), self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class _SyncStream(httpx.SyncByteStream):
    def __init__(self, agen: AsyncGenerator[bytes, None], request: httpx.Request, portal: _LoopThread) -> None:
        self._agen = agen
        self._request = request
        self._portal = portal

    def __iter__(self) -> Iterator[bytes]:
        timeout = _read_timeout(self._request)
        while True:
            try:
                chunk = self._portal.call(_next_chunk, self._agen, timeout)
            except TimeoutError:
                raise httpx.ReadTimeout(
                    "a2a-tape replay: no data within the read timeout", request=self._request
                ) from None
            if chunk is None:
                return
            yield chunk

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError):
            self._portal.call(self._agen.aclose, timeout=5)


def _telling(reply: Reply) -> Reply:
    """``reply`` telling its ``said().answered`` (a send's pushes wait for it) once it is out: a
    whole body at once (the client has it as the transport returns), a stream when it ends."""
    answered = reply.said.answered if reply.said is not None else None
    if answered is None:
        return reply
    if reply.stream is None:
        answered()
        return reply
    inner = reply.stream

    async def then() -> AsyncGenerator[bytes, None]:
        try:
            async for chunk in inner:
                yield chunk
        finally:
            await inner.aclose()
            answered()

    return msgspec.structs.replace(reply, stream=then())


async def _told(reply: Reply) -> Reply:
    return _telling(reply)


class ReplayTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """An httpx transport (sync and async) answering from recordings. See the module docstring.

    ``ReplayTransport("recordings/x.jsonl")`` opens a database or a tape, and closing the
    transport (closing its client) closes it. ``engine=`` shares an engine (and its task state)
    with a replay server: closing the transport then leaves the engine alone, and the transport
    can serve another client.

    ``match_on``, ``before_record_request``, ``before_record_answer``: a user's matcher and
    before-record hooks (:mod:`capture.hooks`, vcrpy's names); a hook that raised answers the
    request with a JSON-RPC error naming it (or ends its stream with :class:`capture.hooks.HookError`),
    and its line is in :attr:`hook_errors`.
    """

    def __init__(
        self,
        recording: str | os.PathLike[str] | None = None,
        *,
        engine: ReplayEngine | None = None,
        timing: str | float = "instant",
        faults: Faults | str | None = None,
        match: str = "method-text",
        record_mode: str = "none",
        upstream: str | None = None,
        push_timing: str = "instant",
        match_on: RequestMatcher | Sequence[RequestMatcher] | None = None,
        before_record_request: BeforeRecordRequest | None = None,
        before_record_answer: BeforeRecordAnswer | None = None,
    ) -> None:
        self._owns_library: Library | None = None
        if engine is None:
            if recording is None:
                raise ValueError("ReplayTransport needs a recording (a database or a JSONL tape) or an engine")
            lib = Library.open(recording, create=RecordMode.of(record_mode).records(upstream))
            self._owns_library = lib
            engine = ReplayEngine(
                lib,
                timing=timing,
                faults=faults,
                match=match,
                record_mode=record_mode,
                upstream=upstream,
                push_timing=push_timing,
                match_on=match_on,
                before_record_request=before_record_request,
                before_record_answer=before_record_answer,
            )
        self.engine = engine
        self._portal: _LoopThread | None = None
        self._lock = threading.Lock()

    @property
    def hook_errors(self) -> list[str]:
        """One line per user hook that raised (``before_record_*``, ``match_on``)."""
        return self.engine.hook_errors

    async def _handle(self, request: httpx.Request, body: bytes) -> Reply:
        base = f"{request.url.scheme}://{request.url.netloc.decode('ascii')}"
        return await self.engine.handle(
            request.method,
            http_json.sent_path(request.url.raw_path, request.url.path),  # as sent: routed undecoded
            request.url.query.decode("ascii"),
            {k.lower(): v for k, v in request.headers.items()},
            body,
            base,
        )

    @staticmethod
    def _headers(reply: Reply) -> list[tuple[bytes, bytes]]:
        own = sendable({"content-type": reply.content_type}) if reply.content_type else []
        return [*own, *sendable(reply.headers)]  # what cannot be a header is dropped, as serve does

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        reply = _telling(await self._handle(request, body))
        if reply.stream is None:
            return httpx.Response(reply.status, headers=self._headers(reply), content=reply.body, request=request)
        return httpx.Response(
            reply.status, headers=self._headers(reply), stream=_AsyncStream(reply.stream, request), request=request
        )

    def _get_portal(self) -> _LoopThread:
        with self._lock:
            if self._portal is None:
                self._portal = _LoopThread()
            return self._portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        portal = self._get_portal()
        reply = portal.call(self._handle, request, body)
        reply = portal.call(_told, reply)  # on the loop thread, where the pushes wait
        if reply.stream is None:
            return httpx.Response(reply.status, headers=self._headers(reply), content=reply.body, request=request)
        return httpx.Response(
            reply.status,
            headers=self._headers(reply),
            stream=_SyncStream(reply.stream, request, portal),
            request=request,
        )

    def close(self) -> None:
        with self._lock:
            portal, self._portal = self._portal, None
        if portal is not None:
            portal.close()
        if self._owns_library is not None:
            self._owns_library.save()
            self._owns_library.close()
            self._owns_library = None

    async def aclose(self) -> None:
        if self._owns_library is not None:
            self._owns_library.save()
            self._owns_library.close()
            self._owns_library = None
