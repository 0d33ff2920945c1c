"""``RecordingTransport``: record every A2A exchange of any httpx client, sync or async.

    transport = RecordingTransport("a2a-tape.db")           # wraps httpx's own transport
    async with httpx.AsyncClient(transport=transport) as http:
        ...  # the a2a-sdk client, or your own code: everything A2A is recorded

It wraps another transport (``transport=``; default: httpx's HTTP transport) and sees each
request and response below the client. Streaming bodies are teed chunk by chunk: each chunk's
complete SSE items are appended to the log, then the chunk goes up to the client unchanged, so
the caller never waits for the end of the stream (no cassette-style buffering). Non-streaming
JSON bodies are recorded when the caller has read them. Only A2A traffic is recorded: JSON-RPC
calls with an A2A method and agent-card fetches; anything else passes through untouched.
Headers and configured JSON paths are redacted before the disk (:mod:`store.redact`).
"""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import AsyncIterator, Iterable, Iterator

import httpx
import msgspec

from a2a_tape import store
from a2a_tape.replay.codings import Decoding, DecodingError
from a2a_tape.replay.http import MAX_BODY, BodyTooLarge, LazyTlsTransport
from a2a_tape.store.capture import Outcome, media_type_of
from a2a_tape.store.json_values import Decoder
from a2a_tape.store.methods import METHODS as A2A_METHODS
from a2a_tape.store.methods import STREAMING_METHODS
from a2a_tape.store.redact import Redactor, build_redactor
from a2a_tape.store.sse import DEFAULT_MAX_LINE, SseLineTooLong
from a2a_tape.store.writer import Writes, run_writes, writer_of, writing_now

from .client import CARD_PATH
from .sending import describe
from .session import Session


class _Msg(msgspec.Struct):
    messageId: str | None = None
    taskId: str | None = None
    contextId: str | None = None


class _Params(msgspec.Struct, frozen=True):
    id: str | None = None
    message: _Msg | None = None


class _Rpc(msgspec.Struct):
    method: str | None = None
    params: _Params = _Params()


_rpc_decoder = Decoder(_Rpc)  # a body nested too deep is not A2A: passed on untouched


class _Exchange:
    """One recorded request/response: its session, capture core (SSE items, redaction, outcome)
    and body decoder."""

    def __init__(self, session: Session, ex_id: int, sse: bool, max_line: int, encoding: str, as_event: bool) -> None:
        self.session = session
        self.as_event = as_event  # a JSON-RPC answer (an event) rather than a card or an error page
        self.ex_id = ex_id
        self.sse = sse
        self.capture = session.capture(ex_id)
        self.capture.max_line = max_line
        self.parser = self.capture if sse else None
        self.body = bytearray()
        self.done = False
        self.decoding = Decoding(encoding)
        self.failed = self.decoding.unsupported  # why this body cannot be recorded (None: it can)

    def chunks_writes(self, chunks: list[bytes]) -> Writes[None]:
        """Record the items these chunks complete, in one transaction. Bytes that cannot be
        decoded stop the recording of this exchange (it ends as an error saying why); the
        client still gets every chunk."""
        if self.failed:
            return
        raw: list[tuple[bytes, str | None]] = []
        try:
            for data in chunks:
                self._take(self.decoding.decode(data), raw)
        except (DecodingError, SseLineTooLong, BodyTooLarge) as exc:
            self.failed = f"not recorded from here on: {exc}"
        if raw:
            yield from self.session.record_stream_writes(self.ex_id, raw)

    def _take(self, data: bytes, raw: list[tuple[bytes, str | None]]) -> None:
        """Decoded bytes: the SSE items they complete onto ``raw``, or onto the JSON body."""
        if self.parser is not None:
            raw += [(it.data, it.event) for it in self.parser.feed(data) if not it.comment]
        else:
            if len(self.body) + len(data) > MAX_BODY:  # the client reads on; we stop keeping it
                self.body = bytearray()
                raise BodyTooLarge("the answer", MAX_BODY)
            self.body += data

    def finish_writes(self, outcome: Outcome, error: str | None = None) -> Writes[None]:
        if self.done:
            return
        self.done = True
        s = self.session
        if not self.failed and self.decoding.steps:
            raw: list[tuple[bytes, str | None]] = []
            try:
                self._take(self.decoding.flush(), raw)  # the codings' rest at the end of the body
            except (DecodingError, SseLineTooLong, BodyTooLarge) as exc:
                self.failed = f"not recorded from here on: {exc}"
            else:
                yield from s.record_stream_writes(self.ex_id, raw)
        if self.failed:
            error = self.failed if error is None else f"{error}; {self.failed}"
            yield from s.finish_writes(self.ex_id, "error", error=error)
            return
        if self.parser is not None:
            # the close: a last item without its blank line is kept, and the exchange says so
            raw = [(it.data, it.event) for it in self.capture.close() if not it.comment]
            yield from s.record_stream_writes(self.ex_id, raw)
            yield from s.finish_writes(self.ex_id, outcome, error=error)
            return
        body = bytes(self.body)
        if not self.as_event:
            yield from s.finish_writes(self.ex_id, outcome, error=error, response_body=body[: 1 << 20])
            return
        if outcome == "ok" and body:
            pairs = yield from s.record_items_writes(self.ex_id, [(body, None)])
            if pairs and pairs[0][1].kind == "undecodable":
                yield from s.finish_writes(
                    self.ex_id, "error", error="the body is not A2A JSON", response_body=body[: 1 << 20]
                )
                return
        yield from s.finish_writes(self.ex_id, outcome, error=error)

    chunks = writing_now(chunks_writes)
    finish = writing_now(finish_writes)

    async def chunks_soon(self, chunks: list[bytes]) -> None:
        """:meth:`chunks` from an event loop, which never waits for the log's lock meanwhile."""
        await writer_of(self.session.store).run(self.chunks_writes(chunks))

    async def finish_soon(self, outcome: Outcome, error: str | None = None) -> None:
        """:meth:`finish` from an event loop (as :meth:`chunks_soon`)."""
        await writer_of(self.session.store).run(self.finish_writes(outcome, error))


_AHEAD = 1024  # chunks read ahead of the log at most: memory stays bounded while a write waits for the lock


class _AsyncTee(httpx.AsyncByteStream):
    """Hands each chunk up only once its items are in the log.

    Under asyncio a reader task reads ahead while the client works on the last chunks, so the
    chunks that piled up meanwhile go to the log in one transaction (group commit) instead of
    one each; the client never waits for more than what has already arrived. Elsewhere (trio),
    each chunk is committed on its own.
    """

    def __init__(self, inner: httpx.AsyncByteStream, ex: _Exchange) -> None:
        self.inner = inner
        self.ex = ex
        self._reader: asyncio.Task[None] | None = None
        self._ahead: collections.deque[bytes] = collections.deque()  # read, not yet handed up

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): no reader task
            async for chunk in self._inline():
                yield chunk
            return
        chunks = self._ahead
        ready, room = asyncio.Event(), asyncio.Event()
        room.set()
        end: list[BaseException | None] = []

        async def read_ahead() -> None:
            try:
                async for chunk in self.inner:
                    chunks.append(chunk)
                    ready.set()
                    if len(chunks) >= _AHEAD:  # the log is behind (another writer holds it): wait a moment
                        room.clear()
                        await room.wait()
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer below
                end.append(exc)
            else:
                end.append(None)
            ready.set()

        self._reader = loop.create_task(read_ahead())
        while True:
            if not chunks:
                if end:
                    break
                ready.clear()
                await ready.wait()
                continue
            batch = list(chunks)
            chunks.clear()
            room.set()
            await self.ex.chunks_soon(batch)  # one transaction for all of them, then hand them up
            for chunk in batch:
                yield chunk
        exc = end[0]
        if exc is None:
            await self.ex.finish_soon("ok")
            return
        if isinstance(exc, httpx.HTTPError):
            await self.ex.finish_soon(*_broken(exc))
        raise exc

    async def _inline(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.inner:
                await self.ex.chunks_soon([chunk])  # appended to the log first, then handed up
                yield chunk
        except httpx.HTTPError as exc:
            await self.ex.finish_soon(*_broken(exc))
            raise
        await self.ex.finish_soon("ok")

    async def aclose(self) -> None:
        if self._ahead and not self.ex.done:
            # the agent sent them: they belong in the log, even if the client stopped reading
            chunks = list(self._ahead)
            self._ahead.clear()
            await self.ex.chunks_soon(chunks)
        await self.ex.finish_soon("incomplete", "the client closed the response before its end")
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            try:
                await self._reader
            except BaseException:  # noqa: BLE001 - its end does not matter any more
                pass
        await self.inner.aclose()


class _SyncTee(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, ex: _Exchange) -> None:
        self.inner = inner
        self.ex = ex

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self.inner:
                self.ex.chunks([chunk])
                yield chunk
        except httpx.HTTPError as exc:
            self.ex.finish(*_broken(exc))
            raise
        self.ex.finish("ok")

    def close(self) -> None:
        self.ex.finish("incomplete", "the client closed the response before its end")
        self.inner.close()


def url_of(request: httpx.Request) -> str:
    return str(request.url)


def _broken(exc: httpx.HTTPError) -> tuple[Outcome, str]:
    """How a response that broke mid-way ended, and why (one line)."""
    outcome: Outcome = "timeout" if isinstance(exc, httpx.TimeoutException) else "dropped"
    return outcome, f"{type(exc).__name__}: {exc}"


class RecordingTransport(httpx.AsyncBaseTransport, httpx.BaseTransport):
    """An httpx transport (sync and async) that records the A2A exchanges passing through it."""

    def __init__(
        self,
        db: str | os.PathLike[str] | store.Store,
        *,
        transport: httpx.AsyncBaseTransport | httpx.BaseTransport | None = None,
        redactor: Redactor | None = None,
        redact: Iterable[str] = (),
        max_line: int = DEFAULT_MAX_LINE,
        durability: store.Durability = "normal",
    ) -> None:
        redact = list(redact)
        if redactor is not None and redact:
            raise TypeError("RecordingTransport takes redactor= or redact=, not both")
        self._owns_store = isinstance(db, (str, os.PathLike))
        # a path: opened here, durability "normal" by default (WAL, no fsync per commit: every event
        # survives a crash of this process; "full" also survives a power loss, at an fsync per chunk)
        self.store: store.Store = (
            db if not isinstance(db, (str, os.PathLike)) else store.open_store(db, durability=durability)
        )
        # redact: header names and JSON paths, as --redact takes them, beside [tool.a2a-tape]'s
        self.redactor = redactor or build_redactor(redact)
        self.max_line = max_line
        self._async = transport if isinstance(transport, httpx.AsyncBaseTransport) else None
        self._sync = transport if isinstance(transport, httpx.BaseTransport) else None
        self.task_ids: list[str] = []  # every task this transport saw, in order

    # -- what to record ----------------------------------------------------------------------

    def _begin_writes(self, request: httpx.Request) -> Writes[tuple[Session, int, bool] | None]:
        """Open the exchange row of an A2A request: (session, exchange id, is a JSON-RPC call)."""
        url = str(request.url)
        body = request.content if request.method == "POST" else b""
        if request.method == "GET" and request.url.path.endswith(CARD_PATH):
            method, dialect, streaming, params = "agent-card", None, False, _Params()
        elif request.method == "POST":
            try:
                rpc = _rpc_decoder.decode(body)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return None
            if rpc.method not in A2A_METHODS:
                return None
            method, params = rpc.method, rpc.params
            dialect = "1.0" if request.headers.get("a2a-version", "").startswith("1") else A2A_METHODS[method][1]
            streaming = method in STREAMING_METHODS
        else:
            return None
        session = Session(self.store, self.redactor, on_change=self._saw, folding=False)
        msg = params.message
        session.task_id = params.id or (msg.taskId if msg else None)
        session.context_id = msg.contextId if msg else None
        ex_id = yield from session.begin_writes(
            url=url,
            rpc_method=method,
            dialect=dialect,
            streaming=streaming,
            headers=request.headers.multi_items(),
            body=body,
            http_method=request.method,
            message_id=msg.messageId if msg else None,
            role="client",
        )
        return session, ex_id, method != "agent-card"

    def _saw(self, session: Session) -> None:
        if session.task_id and session.task_id not in self.task_ids:
            self.task_ids.append(session.task_id)

    def _respond(self, session: Session, ex_id: int, is_rpc: bool, resp: httpx.Response) -> _Exchange:
        session.response(ex_id, resp.status_code, resp.headers.get("content-type"), resp.headers.multi_items())
        ct = media_type_of(resp.headers.get("content-type"))
        return _Exchange(
            session,
            ex_id,
            ct == "text/event-stream",
            self.max_line,
            resp.headers.get("content-encoding", ""),
            is_rpc and ct == "application/json",
        )

    # -- async -------------------------------------------------------------------------------

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._async is None:
            if self._sync is not None:
                raise TypeError("RecordingTransport wraps a sync transport: use it with httpx.Client")
            self._async = LazyTlsTransport()  # no CA bundle for a plain-HTTP agent
        if request.method == "POST" and not isinstance(request.stream, httpx.ByteStream):
            await request.aread()
        begun = await writer_of(self.store).run(self._begin_writes(request))
        if begun is None:
            return await self._async.handle_async_request(request)
        session, ex_id, is_rpc = begun
        try:
            resp = await self._async.handle_async_request(request)
        except httpx.HTTPError as exc:
            await writer_of(self.store).run(_failed(session, ex_id, request, exc))
            raise
        ex = self._respond(session, ex_id, is_rpc, resp)
        return httpx.Response(
            resp.status_code,
            headers=resp.headers,
            stream=_AsyncTee(resp.stream, ex),  # type: ignore[arg-type]  # an async transport's stream is async; httpx types it as either
            extensions=resp.extensions,
        )

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()
        if self._owns_store:
            self.store.close()

    # -- sync --------------------------------------------------------------------------------

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self._sync is None:
            if self._async is not None:
                raise TypeError("RecordingTransport wraps an async transport: use it with httpx.AsyncClient")
            self._sync = LazyTlsTransport()
        if request.method == "POST" and not isinstance(request.stream, httpx.ByteStream):
            request.read()
        begun = run_writes(self._begin_writes(request))
        if begun is None:
            return self._sync.handle_request(request)
        session, ex_id, is_rpc = begun
        try:
            resp = self._sync.handle_request(request)
        except httpx.HTTPError as exc:
            run_writes(_failed(session, ex_id, request, exc))
            raise
        ex = self._respond(session, ex_id, is_rpc, resp)
        return httpx.Response(
            resp.status_code,
            headers=resp.headers,
            stream=_SyncTee(resp.stream, ex),  # type: ignore[arg-type]  # a sync transport's stream is sync; httpx types it as either
            extensions=resp.extensions,
        )

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
        if self._owns_store:
            self.store.close()


def _failed(session: Session, ex_id: int, request: httpx.Request, exc: httpx.HTTPError) -> Writes[None]:
    """The exchange of a request that got no answer: timed out or failed, and why (redacted)."""
    yield from session.finish_writes(
        ex_id,
        "timeout" if isinstance(exc, httpx.TimeoutException) else "error",
        error=describe(exc, url_of(request), session.capture(ex_id)),
    )
