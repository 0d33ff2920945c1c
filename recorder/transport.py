"""``RecordingTransport``: record every A2A exchange of any httpx client, sync or async.

    transport = RecordingTransport("a2a-tape.db")           # wraps httpx's own transport
    async with httpx.AsyncClient(transport=transport) as http:
        ...  # the a2a-sdk client, or your own code: everything A2A is recorded

It wraps another transport (``transport=``; default: httpx's HTTP transport) and sees each
request and response below the client. Streaming bodies are teed chunk by chunk: each chunk's
complete SSE items are appended to the log, then the chunk goes up to the client unchanged, so
the caller never waits for the end of the stream (no cassette-style buffering). Non-streaming
JSON bodies are recorded when the caller has read them. Only A2A traffic is recorded, whatever
binding the client's SDK picked: JSON-RPC calls with an A2A method, every HTTP+JSON route
(:mod:`wire.http_json`: ``/message:stream``, ``GET /tasks/{id}``, ...), agent-card
fetches; anything else passes through untouched.
Headers and configured JSON paths are redacted before the disk (:mod:`store.redact`).

``before_record_request`` / ``before_record_answer`` (:mod:`capture.hooks`) change or leave out
what is recorded, before that redaction; a hook that raises is a :class:`capture.hooks.HookError`
raised to the caller, the exchange ending ``error`` with what was recorded before it kept.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable, Iterator
from urllib.parse import unquote

import httpx
import msgspec

from a2a_tape import store
from a2a_tape.capture.exchange import Capture, Outcome, RawItem
from a2a_tape.capture.hooks import BeforeRecordAnswer, BeforeRecordRequest, HookError, NotRecorded, RecordHooks
from a2a_tape.capture.recording_log import recording_log
from a2a_tape.capture.sending import describe
from a2a_tape.store.json_values import Decoder
from a2a_tape.store.methods import CARD_PATH, STREAMING_METHODS
from a2a_tape.store.methods import METHODS as A2A_METHODS
from a2a_tape.store.observers import new_observer
from a2a_tape.store.redact import Redactor
from a2a_tape.store.writer import Batcher, Writes, run_writes, writer_of, writing_now
from a2a_tape.wire import http_json, jsonrpc
from a2a_tape.wire.binding_client import Binding, Head
from a2a_tape.wire.codings import Decoding, DecodingError
from a2a_tape.wire.http_client import MAX_BODY, BodyTooLarge, LazyTlsTransport
from a2a_tape.wire.sse_reader import DEFAULT_MAX_LINE, SseLineTooLong


class _Msg(msgspec.Struct):
    messageId: str | None = None
    taskId: str | None = None
    contextId: str | None = None


class _Params(msgspec.Struct, frozen=True):
    id: str | None = None
    message: _Msg | None = None
    taskId: str | None = None  # a push-config call's task (its ``id`` is the config's in v1.0)
    task_id: str | None = None  # the same under proto JSON's other spelling

    @property
    def task(self) -> str | None:
        return self.taskId or self.task_id or self.id


class _Rpc(msgspec.Struct):
    method: str | None = None
    params: _Params = _Params()


_rpc_decoder = Decoder(_Rpc)  # a body nested too deep is not A2A: passed on untouched
_rest_decoder = Decoder(_Params)  # an HTTP+JSON send's body is the params


def _a2a_call(request: httpx.Request, body: bytes) -> tuple[str, str | None, Binding | None, _Params] | None:
    """What an A2A request is: (method, protocol version, binding, the params we read), by its
    binding's own signs (:mod:`wire.bindings`): a card fetch, an HTTP+JSON route (any method),
    a JSON-RPC ``POST`` of an A2A method. None: not A2A."""
    path = http_json.sent_path(request.url.raw_path, request.url.path)  # as sent: routed undecoded, as serve does
    if request.method == "GET" and path.endswith(CARD_PATH):
        return "agent-card", None, None, _Params()
    found = http_json.route(request.method, path)
    if found is not None:
        operation, fields = found
        try:
            params = _rest_decoder.decode(body) if body.strip() else _Params()
        except (msgspec.DecodeError, msgspec.ValidationError):
            params = _Params()  # recorded as sent: the agent judges it
        if "id" in fields:  # the task's id, on every route that names one
            params = _Params(id=unquote(fields["id"]), message=params.message)  # each field decoded after
        version = http_json.version_of(request.headers)
        return http_json.method_of(operation) or operation, version, http_json.CLIENT, params
    if request.method != "POST":
        return None
    try:
        rpc = _rpc_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if rpc.method not in A2A_METHODS:
        return None
    dialect = "1.0" if request.headers.get("a2a-version", "").startswith("1") else A2A_METHODS[rpc.method][1]
    return rpc.method, dialect, jsonrpc.CLIENT, rpc.params


class _Exchange:
    """One recorded request/response: its capture core (SSE items, redaction, the writes of the
    steps, the outcome) and its body decoder. What differs from the other paths is only where its
    bytes come from (the wrapped transport) and go to (the client, unchanged)."""

    def __init__(self, owner: RecordingTransport, cap: Capture, encoding: str, as_event: bool) -> None:
        self.owner = owner
        self.log = owner.store
        self.cap = cap
        self.as_event = as_event  # a JSON-RPC answer (an event) rather than a card or an error page
        self.sse = cap.sse
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
        raw: list[RawItem] = []
        try:
            for data in chunks:
                self._take(self.decoding.decode(data), raw)
        except (DecodingError, SseLineTooLong, BodyTooLarge) as exc:
            self.failed = f"not recorded from here on: {exc}"
        yield from self._items_writes(raw)

    def _items_writes(self, raw: list[RawItem]) -> Writes[None]:
        if raw:
            new, _ = self.cap.events(raw, peek=True)  # the items are not looked at: the narrow decoder
            yield from self.cap.commit_writes(self.log, new)
            self.owner.saw(self.cap.task_id)
            if self.cap.hook_error is not None and not self.failed:  # what it passed is in; nothing after
                self.failed = f"{self.cap.hook_error}: not recorded from here on"

    def hook_error(self) -> HookError | None:
        """The error of a before-record hook that stopped this exchange's recording, once the
        exchange ended saying so (the caller raises it)."""
        return self.cap.hook_error

    def _take(self, data: bytes, raw: list[RawItem]) -> None:
        """Decoded bytes: the SSE items they complete onto ``raw``, or onto the JSON body."""
        if self.sse:
            raw += [(it.data, it.event) for it in self.cap.feed(data) if not it.comment]
        else:
            if len(self.body) + len(data) > MAX_BODY:  # the client reads on; we stop keeping it
                self.body = bytearray()
                raise BodyTooLarge("the answer", MAX_BODY)
            self.body += data

    def finish_writes(self, outcome: Outcome, error: str | None = None) -> Writes[None]:
        if self.done:
            return
        self.done = True
        cap = self.cap
        if not self.failed and self.decoding.steps:
            raw: list[RawItem] = []
            try:
                self._take(self.decoding.flush(), raw)  # the codings' rest at the end of the body
            except (DecodingError, SseLineTooLong, BodyTooLarge) as exc:
                self.failed = f"not recorded from here on: {exc}"
            else:
                yield from self._items_writes(raw)
        if self.failed:
            error = self.failed if error is None else f"{error}; {self.failed}"
            yield from cap.end_writes(self.log, "error", error)
        elif self.sse:  # the close: a last item without its blank line is kept, and the exchange says so
            yield from self._items_writes([(it.data, it.event) for it in cap.close() if not it.comment])
            yield from cap.end_writes(self.log, outcome, error)
        else:
            yield from self._answer_writes(outcome, error)

    def _answer_writes(self, outcome: Outcome, error: str | None) -> Writes[None]:
        """A whole answer: an event when it is a JSON-RPC answer, else kept on the row."""
        cap, body = self.cap, bytes(self.body)
        if self.as_event and outcome == "ok" and body:
            new, _ = cap.answer(body)
            if cap.hook_error is not None:
                yield from cap.end_writes(self.log, "error", f"{cap.hook_error}: the answer is not recorded")
                return
            if new is None and cap.withheld:  # before_record_answer left it out
                yield from cap.end_writes(self.log, outcome, error)
                return
            if new is None:
                error = "the body is not A2A JSON"
                yield from cap.end_writes(self.log, "error", error, response_body=cap.response_body(body))
                return
            yield from cap.commit_writes(self.log, [new])
            self.owner.saw(cap.task_id)
        elif not self.as_event:
            yield from cap.end_writes(self.log, outcome, error, response_body=cap.response_body(body))
            return
        yield from cap.end_writes(self.log, outcome, error)

    chunks = writing_now(chunks_writes)
    finish = writing_now(finish_writes)

    async def chunks_soon(self, chunks: list[bytes]) -> None:
        """:meth:`chunks` from an event loop, which never waits for the log's lock meanwhile."""
        await self.owner.writer.run(self.chunks_writes(chunks))

    async def finish_soon(self, outcome: Outcome, error: str | None = None) -> None:
        """:meth:`finish` from an event loop (as :meth:`chunks_soon`)."""
        await self.owner.writer.run(self.finish_writes(outcome, error))


_AHEAD = 1024  # chunks read ahead of the log at most: memory stays bounded while a write waits for the lock


class _AsyncTee(httpx.AsyncByteStream):
    """Hands each chunk up only once its items are in the log.

    Under asyncio a reader task reads ahead while the client works on the last chunks
    (:class:`store.writer.Batcher`, pulled), so the chunks that piled up meanwhile go to the log
    in one transaction instead of one each; the client never waits for more than what has already
    arrived. Elsewhere (trio), each chunk is committed on its own.
    """

    def __init__(self, inner: httpx.AsyncByteStream, ex: _Exchange) -> None:
        self.inner = inner
        self.ex = ex
        self._reader: asyncio.Task[None] | None = None
        self._ahead: Batcher[bytes] = Batcher(_no_commit, ahead=_AHEAD)  # read, not yet handed up

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): no reader task
            async for chunk in self._inline():
                yield chunk
            return
        ahead = self._ahead
        end: list[BaseException | None] = []

        async def read_ahead() -> None:
            try:
                async for chunk in self.inner:
                    ahead.pending.append(chunk)
                    if ahead.added(1):  # the log is behind (another writer holds it): wait a moment
                        await ahead.room()
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer below
                end.append(exc)
            else:
                end.append(None)
            ahead.close()

        self._reader = loop.create_task(read_ahead())
        while (batch := await ahead.next()) is not None:
            chunks = batch[0]
            await self.ex.chunks_soon(chunks)  # one transaction for all of them, then hand them up
            await self._raise_hook_error()
            for chunk in chunks:
                yield chunk
        exc = end[0]
        if exc is None:
            await self.ex.finish_soon("ok")
            await self._raise_hook_error()
            return
        if isinstance(exc, httpx.HTTPError):
            await self.ex.finish_soon(*_broken(exc))
        raise exc

    async def _inline(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.inner:
                await self.ex.chunks_soon([chunk])  # appended to the log first, then handed up
                await self._raise_hook_error()
                yield chunk
        except httpx.HTTPError as exc:
            await self.ex.finish_soon(*_broken(exc))
            raise
        await self.ex.finish_soon("ok")
        await self._raise_hook_error()

    async def _raise_hook_error(self) -> None:
        """A before-record hook raised: the exchange ends saying so, then the caller gets it."""
        error = self.ex.hook_error()
        if error is not None:
            await self.ex.finish_soon("error")
            raise error

    async def aclose(self) -> None:
        left = self._ahead.pending
        if left and not self.ex.done:
            # the agent sent them: they belong in the log, even if the client stopped reading
            chunks = list(left)
            left.clear()
            await self.ex.chunks_soon(chunks)
        await self.ex.finish_soon("incomplete", "the client closed the response before its end")
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            try:
                await self._reader
            except BaseException:  # noqa: BLE001 - its end does not matter any more
                pass
        await self.inner.aclose()


async def _no_commit(batch: list[bytes], arrived: list[float]) -> None:
    """The transport's batches are pulled (:meth:`store.writer.Batcher.next`), never driven."""


class _SyncTee(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, ex: _Exchange) -> None:
        self.inner = inner
        self.ex = ex

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self.inner:
                self.ex.chunks([chunk])
                self._raise_hook_error()
                yield chunk
        except httpx.HTTPError as exc:
            self.ex.finish(*_broken(exc))
            raise
        self.ex.finish("ok")
        self._raise_hook_error()

    def _raise_hook_error(self) -> None:
        """A before-record hook raised: the exchange ends saying so, then the caller gets it."""
        error = self.ex.hook_error()
        if error is not None:
            self.ex.finish("error")
            raise error

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
        before_record_request: BeforeRecordRequest | None = None,
        before_record_answer: BeforeRecordAnswer | None = None,
    ) -> None:
        self.hooks = RecordHooks.of(before_record_request, before_record_answer)  # capture/hooks.py
        self.store, self._owns_store, self.redactor = recording_log(
            db, durability=durability, redactor=redactor, redact=redact, who="RecordingTransport"
        )
        self.max_line = max_line
        self._async = transport if isinstance(transport, httpx.AsyncBaseTransport) else None
        self._sync = transport if isinstance(transport, httpx.BaseTransport) else None
        self.task_ids: list[str] = []  # every task this transport saw, in order
        self.observer = new_observer("in-process")  # this transport's recordings are one run of each task
        self.writer = writer_of(self.store)  # the one commit mechanism, for the async side

    # -- what to record ----------------------------------------------------------------------

    def _begin_writes(self, request: httpx.Request) -> Writes[tuple[Capture, Binding | None] | None]:
        """Begin the exchange row of an A2A request: (its capture core, the binding of a call; None
        for the card). None when the request is not A2A (passed on untouched)."""
        body = request.content if request.method == "POST" else b""
        call = _a2a_call(request, body)
        if call is None:
            return None
        method, dialect, binding, params = call
        msg = params.message
        cap = Capture(
            self.redactor,
            max_line=self.max_line,
            task_id=params.task or (msg.taskId if msg else None),
            context_id=msg.contextId if msg else None,
            hooks=self.hooks,
        )
        try:
            exchange = cap.request(
                url=str(request.url),
                rpc_method=method,
                dialect=dialect,
                streaming=method in STREAMING_METHODS,
                headers=request.headers.multi_items(),
                body=body,
                http_method=request.method,
                message_id=msg.messageId if msg else None,
                role="client",
                binding=binding.name if binding is not None else None,
            )
        except NotRecorded:  # before_record_request said None: passed on untouched
            return None
        yield from cap.begin_writes(self.store, exchange, self.observer)
        return cap, binding

    def saw(self, task_id: str | None) -> None:
        if task_id and task_id not in self.task_ids:
            self.task_ids.append(task_id)

    def _respond(self, cap: Capture, binding: Binding | None, resp: httpx.Response) -> _Exchange:
        ctype = resp.headers.get("content-type")
        cap.head(resp.status_code, ctype, resp.headers.multi_items())
        # a call's whole answer is an event when its binding says it is one (an error answer too)
        as_event = binding is not None and binding.answer(Head(resp.status_code, ctype, [])) == "json"
        return _Exchange(self, cap, resp.headers.get("content-encoding", ""), as_event)

    # -- async -------------------------------------------------------------------------------

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._async is None:
            if self._sync is not None:
                raise TypeError("RecordingTransport wraps a sync transport: use it with httpx.Client")
            self._async = LazyTlsTransport()  # no CA bundle for a plain-HTTP agent
        if request.method == "POST" and not isinstance(request.stream, httpx.ByteStream):
            await request.aread()
        begun = await self.writer.run(self._begin_writes(request))
        if begun is None:
            return await self._async.handle_async_request(request)
        cap, binding = begun
        try:
            resp = await self._async.handle_async_request(request)
        except httpx.HTTPError as exc:
            await self.writer.run(_failed(self.store, cap, request, exc))
            raise
        ex = self._respond(cap, binding, resp)
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
        cap, binding = begun
        try:
            resp = self._sync.handle_request(request)
        except httpx.HTTPError as exc:
            run_writes(_failed(self.store, cap, request, exc))
            raise
        ex = self._respond(cap, binding, resp)
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


def _failed(log: store.Store, cap: Capture, request: httpx.Request, exc: httpx.HTTPError) -> Writes[None]:
    """The exchange of a request that got no answer: timed out or failed, and why (redacted)."""
    outcome: Outcome = "timeout" if isinstance(exc, httpx.TimeoutException) else "error"
    yield from cap.end_writes(log, outcome, describe(exc, url_of(request), cap))
