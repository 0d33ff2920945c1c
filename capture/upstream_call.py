"""The recorded-upstream client: one call to an agent, recorded write-ahead (docs/design.md section 11).

Every path that calls an agent itself goes through it: ``record`` (:mod:`recorder.record`), the
startup recovery, ``recover`` and ``probe`` (:class:`recorder.upstream.Upstream`), and serve's
recording modes (:mod:`replay.serve.forward`). The proxy and ``RecordingTransport``, which relay
a call someone else makes, run the same capture steps (:class:`capture.exchange.Capture`'s writes,
:class:`store.writer.Batcher`) on their own bytes.

The rule: the exchange row is in the log before the request goes out; every item is in the log
before anyone sees it (folded, kept, relayed); the call ends with one outcome word and, when it
failed, one readable line, redacted; nothing waits past its timeouts (connect, first byte, reads,
or a stream's stall deadline).

The I/O is a :class:`Source` (where the bytes come from: :class:`HttpSource`, httpx) and a
:class:`Sink` (where the items go once they are in the log: record folds them, recovery and probe
keep them, serve passes their bytes on). The binding plugs in here: a
:class:`wire.binding_client.Binding` (JSON-RPC, HTTP+JSON: :data:`wire.bindings.CLIENTS`) puts a
call built in the JSON-RPC form (:mod:`recorder.client`) on its wire and says how its answer comes
(step 3) and whether a whole answer is one of its own (step 5); nothing else here knows a binding.

The steps (:class:`UpstreamCall`; :meth:`UpstreamCall.run` takes them in order):

1. begin: the exchange row, redacted, written before the request goes out;
2. send: the request, within the connect and first-byte timeouts;
3. head: the response line (written with the first items), classified by the binding: a stream, a
   whole answer, a redirect (never followed: it is the agent's answer, named), or something else;
4. stream: SSE items, exact bytes, read ahead and committed in batches (:class:`store.writer.Batcher`),
   each batch handed to the sink once it is in the log; a :class:`StallWatch` may stop it;
5. answer: the whole body, bounded, as one item (a body that is none is kept on the row);
6. end: the outcome, the error (redacted), the redaction notes.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import anyio
import httpx

from a2a_tape.capture.exchange import Capture, Outcome, RawItem, TaskContext
from a2a_tape.store.decode import TextChunk
from a2a_tape.store.events import SETTLED_STATES, ErrorItem, Item, StatusUpdate, TaskSnapshot
from a2a_tape.store.headers import media_type_of
from a2a_tape.store.interface import RecordingStore
from a2a_tape.store.observers import Observer
from a2a_tape.store.records import Exchange, StoredEvent
from a2a_tape.store.writer import Batcher, GroupCommitWriter
from a2a_tape.wire import jsonrpc
from a2a_tape.wire.binding_client import Answer, Binding, Head
from a2a_tape.wire.codings import DecodingError
from a2a_tape.wire.http_client import BodyTooLarge, Timeouts, body_chunks, describe, read_body, redirect_message, send
from a2a_tape.wire.sse_reader import SseLineTooLong

JSON_RPC: Binding = jsonrpc.CLIENT
"""The binding of a call that names none."""

"""A task in one of these states has ended, or waits for its user: a stream of it may close."""

CLOSE_GRACE = 5.0
"""Seconds a stream may stay open after its task settled before we close it."""

KEPT = 1 << 20
"""Bytes of a body that is no answer (an HTML page, an error text) kept on the exchange row."""

FAULTS: tuple[type[BaseException], ...] = (httpx.HTTPError, BodyTooLarge, SseLineTooLong, DecodingError)
"""What ends a call as a fault of the upstream (the connection, a limit, a coding): never a crash."""


class Source(Protocol):
    """Where the bytes of one call come from (:class:`HttpSource`)."""

    async def send(self) -> Head:
        """Send the request; the answer's head (or a transport error, within the timeouts)."""

    def chunks(self) -> AsyncIterator[bytes]:
        """The body's decoded bytes as they arrive."""

    async def body(self, what: str) -> bytes:
        """The whole body, decoded, bounded (:class:`wire.http_client.BodyTooLarge` names ``what``)."""

    async def sample(self, limit: int) -> bytes:
        """At most the first ``limit`` bytes of a body that is no answer, to keep on the row."""

    async def aclose(self) -> None:
        """Let the connection go."""


class Sink(Protocol):
    """Where the items of a call go once they are in the log."""

    peek: bool  # plain text chunks may come as store.decode.TextChunk (a sink that folds or relays them)

    def take(self, stored: Sequence[StoredEvent], items: Sequence[Item | TextChunk]) -> None:
        """A batch, in the log: fold it, keep it, pass it on."""

    def early_close(self) -> str | None:
        """The stream ended: None when it ended where it should, else why it closed too early."""


def not_an_answer(head: Head, what: str) -> str:
    """The one line for an answer that is not what an A2A agent sends."""
    media = media_type_of(head.content_type) or "no content type"
    if head.status >= 400:
        return f"{what} answered HTTP {head.status} ({media}): not a working A2A agent"
    if media in ("text/html", "application/xhtml+xml"):
        return f"{what} returned an HTML page, not A2A JSON: is this an A2A agent?"
    return f"{what} returned {media}, not A2A JSON"


@dataclass(frozen=True)
class Batching:
    """How a stream's items go to the log (:class:`store.writer.Batcher`)."""

    first: int = 8
    size: int = 2048
    wait: float = 0.0
    ahead: int = 16384


def _never() -> bool:
    return False


class StallWatch:
    """Stops a stream that makes no progress for ``timeout`` seconds (keep-alive comments are not
    progress), or that its agent keeps open ``grace`` seconds after the task settled.

    ``progress_at``: the monotonic time of the last progress (default: the last item read);
    ``settled``: whether the task has ended, by what was recorded. :attr:`stopped` says why it
    stopped the stream, if it did.
    """

    def __init__(
        self,
        timeout: float,
        progress_at: Callable[[], float] | None = None,
        *,
        settled: Callable[[], bool] = _never,
        grace: float = math.inf,
    ) -> None:
        self.timeout = timeout
        self.progress_at = progress_at
        self.settled = settled
        self.grace = grace
        self.poll = min(0.5, grace)
        self.stopped: Literal["stalled", "settled"] | None = None

    async def run(self, scope: anyio.CancelScope) -> None:
        assert self.progress_at is not None
        settled_at: float | None = None
        while True:
            now = time.monotonic()
            if self.settled():
                settled_at = now if settled_at is None else settled_at
                left = settled_at + self.grace - now
                why: Literal["stalled", "settled"] = "settled"
            else:
                left = self.progress_at() + self.timeout - now
                why = "stalled"
            if left <= 0:
                self.stopped = why
                scope.cancel()
                return
            await anyio.sleep(min(left, self.poll))  # a task that settles meanwhile is seen within it


@dataclass
class Ended:
    """How a call ended (step 6), for the caller to act on."""

    outcome: Outcome = "ok"
    error: str | None = None  # one line, redacted
    answer: Answer | None = None  # None: no answer came (no connection, no head in time)
    fault: BaseException | None = None  # what stopped the call, when something did
    item: Item | None = None  # a whole answer that is one of the binding
    body: bytes = b""  # a whole answer's body (or the start of one that is no answer)
    stopped: Literal["stalled", "settled"] | None = None  # the stall watch stopped the stream
    items: int = 0  # items recorded
    fields: dict[str, object] = field(default_factory=dict)  # more for the row (its response_body)

    @property
    def errors(self) -> bool:
        """The answer was an A2A error."""
        return self.item is not None and isinstance(self.item.body, ErrorItem)


class UpstreamCall:
    """One call to an agent, recorded by the steps of the module docstring.

    ``writer`` commits every write (the row, each batch, the end); ``capture`` is the exchange's
    capture core (its redactor, line limit, task ids); ``ctx`` learns the task ids instead when a
    session spans several calls. ``url`` and ``what`` name the call in error lines.
    """

    def __init__(
        self,
        log: RecordingStore,
        writer: GroupCommitWriter,
        capture: Capture,
        source: Source,
        *,
        url: str,
        what: str,
        binding: Binding = JSON_RPC,
        ctx: TaskContext | None = None,
        on_end: Callable[[int], None] | None = None,
    ) -> None:
        self.log, self.writer, self.capture, self.source = log, writer, capture, source
        self.on_end = on_end  # called with the exchange id once its final row is in the log
        self.url, self.what = url, what
        self.binding = binding
        self.ctx = ctx
        self.head: Head | None = None
        self.items = 0

    # 1. begin ---------------------------------------------------------------------------------

    async def begin(self, exchange: Exchange, observer: Observer | None) -> int:
        """The exchange row (from :meth:`capture.exchange.Capture.request`: redacted), in the log first,
        stamped with ``observer`` (None: the process's own for its role)."""
        return await self.writer.run(self.capture.begin_writes(self.log, exchange, observer))

    # 2., 3. send, head -------------------------------------------------------------------------

    async def send(self) -> Answer:
        """Send the request; the answer's head, kept for the first commit, and how it comes."""
        head = self.head = await self.source.send()
        self.capture.head(head.status, head.content_type, head.headers)
        return self.binding.answer(head)

    # 4. stream -------------------------------------------------------------------------------

    async def stream(
        self, sink: Sink, *, batching: Batching = Batching(), watch: StallWatch | None = None, limit: int | None = None
    ) -> None:
        """Read the SSE items to the end (or ``limit`` items: a drop on purpose), each batch in the
        log before ``sink`` takes it. A transport error is raised once what was read is in."""
        b = batching
        batches: Batcher[RawItem] = Batcher(
            functools.partial(self._commit, sink), first=b.first, size=b.size, wait=b.wait, ahead=b.ahead
        )
        if watch is not None and watch.progress_at is None:
            watch.progress_at = lambda: batches.last_arrival
        await batches.drive(functools.partial(self._read, batches, limit), watch.run if watch is not None else None)

    async def _read(self, batches: Batcher[RawItem], limit: int | None) -> None:
        cap, pending = self.capture, batches.pending
        feed = cap.feeder()
        read = 0
        async for chunk in self.source.chunks():
            before = len(pending)
            feed(chunk, pending)  # each completed item as (data, event); comments are not items
            added = len(pending) - before
            if not added:
                continue
            if limit is not None and read + added >= limit:
                del pending[before + limit - read :]
                batches.added(limit - read)
                return
            read += added
            if batches.added(added):  # the log is far behind (another writer holds it)
                await batches.room()
        rest = [(it.data, it.event) for it in cap.close() if not it.comment]  # a cut last item: kept, marked
        if rest:
            pending += rest
            batches.added(len(rest))

    async def _commit(self, sink: Sink, raw: list[RawItem], arrived: list[float]) -> None:
        new, items = self.capture.events(raw, arrived, peek=sink.peek, ctx=self.ctx)
        stored = await self.writer.run(self.capture.commit_writes(self.log, new))
        self.items += len(stored)
        sink.take(stored, items)

    async def relay(self) -> AsyncIterator[bytes]:
        """Step 4 for a caller that passes the stream on as it comes: each chunk's items in the log,
        then their exact bytes (``id``/``retry`` fields, comments, a cut last item, stray bytes)."""
        cap = self.capture
        async for chunk in self.source.chunks():
            items = cap.feed(chunk)
            if items:
                new, _ = cap.events(items, peek=True, ctx=self.ctx)
                if new:  # write-ahead: in the log before the client sees it
                    self.items += len(await self.writer.run(cap.commit_writes(self.log, new)))
                if cap.hook_error is not None:  # a user's before_record_answer raised: the caller ends the row
                    raise cap.hook_error
                yield b"".join(it.raw for it in items)
        items = cap.close()
        new, _ = cap.events(items, peek=True, ctx=self.ctx)
        if new:
            self.items += len(await self.writer.run(cap.commit_writes(self.log, new)))
        rest = b"".join(it.raw for it in items) + (cap.parser.tail if cap.parser else b"")
        if rest:
            yield rest

    # 5. answer -------------------------------------------------------------------------------

    async def answer(self, sink: Sink | None = None) -> tuple[Item, bytes, bool]:
        """The whole answer: its item, its body, and whether it went to the log as an event (a body
        that decodes as nothing of A2A is kept on the row by :meth:`end` instead)."""
        body = await self.source.body(f"the answer to {self.what}")
        new, item = self.capture.answer(body, self.ctx)
        if new is None:
            return item, body, False
        stored = await self.writer.run(self.capture.commit_writes(self.log, [new]))
        self.items += 1
        if sink is not None:
            sink.take(stored, [item])
        return item, body, True

    # 6. end ----------------------------------------------------------------------------------

    async def end(self, outcome: Outcome, error: str | None = None, **fields: object) -> None:
        """Close the row (whatever happened to the caller meanwhile: shielded)."""
        cap, ctx = self.capture, self.ctx
        if ctx is not None:  # what the session learnt during this call is the exchange's too
            cap.task_id, cap.context_id = ctx.task_id or cap.task_id, ctx.context_id or cap.context_id
        with anyio.CancelScope(shield=True):
            await self.writer.run(self.capture.end_writes(self.log, outcome, error, **fields))
        if self.on_end is not None and cap.exchange_id is not None:
            self.on_end(cap.exchange_id)

    # the steps in order ------------------------------------------------------------------------

    async def run(
        self,
        sink: Sink,
        *,
        batching: Batching = Batching(),
        watch: StallWatch | None = None,
        limit: int | None = None,
    ) -> Ended:
        """Steps 2-6 (the row is begun): the call sent, its answer recorded, how it ended."""
        ended = Ended()
        try:
            ended.answer = answer = await self.send()
            if answer == "stream":
                await self._stream_to_end(sink, ended, batching, watch, limit)
            elif answer == "json":
                await self._answer_to_end(sink, ended)
            else:
                await self._refused(ended, answer)
        except FAULTS as exc:
            ended.fault = exc
            broke = ended.answer == "stream" and isinstance(exc, httpx.TransportError)
            ended.outcome = "timeout" if isinstance(exc, httpx.TimeoutException) else "dropped" if broke else "error"
            ended.error = describe(exc, self.url, self.capture)
        except BaseException:  # cancelled from outside (Ctrl-C, a shutdown): the row says so
            ended.outcome, ended.error = "interrupted", "the run was stopped before the answer ended"
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self.source.aclose()
            ended.items = self.items
            await self.end(ended.outcome, ended.error, **ended.fields)
        return ended

    async def _stream_to_end(
        self, sink: Sink, ended: Ended, batching: Batching, watch: StallWatch | None, limit: int | None
    ) -> None:
        await self.stream(sink, batching=batching, watch=watch, limit=limit)
        ended.stopped = watch.stopped if watch is not None else None
        if ended.stopped == "stalled":
            ended.outcome, ended.error = "stalled", f"no progress for {watch.timeout:g} s"  # type: ignore[union-attr]
        elif ended.stopped == "settled":
            ended.error = "the agent kept the stream open after the task settled: closed by a2a-tape"
        elif limit is not None and self.items >= limit:
            ended.outcome = "dropped"
            ended.error = f"closed by a2a-tape after {self.items} item(s), on purpose (a dropped stream)"
        else:
            why = sink.early_close()
            if why is not None:
                ended.outcome, ended.error = "closed", why

    async def _answer_to_end(self, sink: Sink, ended: Ended) -> None:
        assert self.head is not None
        item, ended.body, logged = await self.answer(sink)
        why = self.binding.judge(self.head, item)
        if not logged:
            ended.fields["response_body"] = self.capture.response_body(ended.body, KEPT)
        if why is not None:
            ended.outcome, ended.error = "error", f"{self.what} {why}"
            return
        ended.item = item
        ended.outcome = "error" if isinstance(item.body, ErrorItem) else "ok"

    async def _refused(self, ended: Ended, answer: Answer) -> None:
        """A redirect (never followed) or an answer that is none of the binding's: an error, named."""
        head = self.head
        assert head is not None
        ended.outcome = "error"
        if answer == "redirect":
            what = f"{self.what} at {self.url}" if self.what != self.url else self.url
            ended.error = redirect_message(head.status, head.header("location"), what, self.capture.redactor)
            return
        ended.body = await self.source.sample(KEPT)
        ended.fields["response_body"] = self.capture.response_body(ended.body, KEPT)
        ended.error = not_an_answer(head, f"{self.what} at {self.url}" if self.what != self.url else self.url)


class Collect:
    """A sink that keeps every item (recovery, probe): :attr:`items` in order, and the task's last
    state among them (:attr:`state`), so a stream that ends, or stays open, after the task settled
    is told from one that closed while it was still active."""

    peek = False

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.state: str | None = None

    def take(self, stored: Sequence[StoredEvent], items: Sequence[Item | TextChunk]) -> None:
        for item in items:
            if isinstance(item, Item):
                self.items.append(item)
                body = item.body
                if isinstance(body, (TaskSnapshot, StatusUpdate)):
                    self.state = body.state

    def settled(self) -> bool:
        return self.state in SETTLED_STATES

    def early_close(self) -> str | None:
        if self.settled() or (self.items and isinstance(self.items[-1].body, ErrorItem)):
            return None
        return f"stream closed while the task was {self.state or 'unknown'}"


class HttpSource:
    """A request sent with httpx (a client, or a transport used as it is: the proxy's pool) within
    ``timeouts`` (:func:`wire.http_client.send`); a stream decoded as it arrives
    (:func:`wire.http_client.body_chunks`: a coding that does not decode is named), a whole answer by
    httpx (a response a test or a transport made whole reads as well)."""

    def __init__(
        self, http: httpx.AsyncClient | httpx.AsyncBaseTransport, request: httpx.Request, timeouts: Timeouts
    ) -> None:
        self.http, self.request, self.timeouts = http, request, timeouts
        self.response: httpx.Response | None = None

    async def send(self) -> Head:
        resp = self.response = await send(self.http, self.request, self.timeouts)
        return Head(resp.status_code, resp.headers.get("content-type"), resp.headers.multi_items())

    def chunks(self) -> AsyncIterator[bytes]:
        assert self.response is not None
        return body_chunks(self.response)

    async def body(self, what: str) -> bytes:
        assert self.response is not None
        return await read_body(self.response, what)

    async def sample(self, limit: int) -> bytes:
        assert self.response is not None
        buf = bytearray()
        async for chunk in self.response.aiter_bytes():
            buf += chunk
            if len(buf) >= limit:
                break
        return bytes(buf[:limit])

    async def aclose(self) -> None:
        if self.response is not None:
            await self.response.aclose()
