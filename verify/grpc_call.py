"""One call of a live run over gRPC (``verify --binding grpc``, and gRPC in ``--across-bindings``).

The recorded request, whatever binding recorded it, is in its JSON-RPC form
(:func:`wire.bindings.recorded_call`), whose v1.0 ``params`` are the method's request in the proto3
JSON mapping: it goes out as that protobuf message (:func:`wire.grpc.from_json`) on a ``grpc.aio``
channel that moves bytes, and is recorded as the gRPC client interceptor records a call
(:class:`capture.grpc_calls.GrpcCapture`): the exchange row before the request goes out, each
answer message in the log before the sink takes it, a non-OK status as the log's error item
(``google.rpc.Status`` with its details: the ``ErrorInfo`` reason the rules compare across
bindings), the trailers on the row. Nothing waits for ever: a unary call has ``call_timeout``, a
stream a :class:`capture.upstream_call.StallWatch` (no message for ``stall_timeout`` seconds, or
open ``grace`` seconds after its task settled).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from a2a_tape.capture.exchange import Outcome
from a2a_tape.capture.grpc_calls import GrpcCapture, forwardable, outcome_of
from a2a_tape.capture.upstream_call import StallWatch
from a2a_tape.store import Item, RecordingStore, StoredEvent
from a2a_tape.store.decode import TextChunk, decode_item
from a2a_tape.store.observers import Observer
from a2a_tape.store.redact import Redactor
from a2a_tape.store.writer import writer_of
from a2a_tape.wire import grpc as grpc_wire

UNAVAILABLE = 14


class Sink(Protocol):
    """Where a call's items go once they are in the log (verify's contract of the live run)."""

    def take(self, stored: Sequence[StoredEvent], items: Sequence[Item | TextChunk]) -> None: ...

    def settled(self) -> bool: ...


@dataclass
class GrpcEnded:
    """How one gRPC call ended."""

    messages: int = 0  # answer messages recorded
    code: int | None = None  # its status (None: we stopped it, or it broke)
    error: str | None = None  # one line, when it did not end OK
    exchange_id: int | None = None

    @property
    def unreachable(self) -> bool:
        """Nothing answered there (UNAVAILABLE before any message)."""
        return self.code == UNAVAILABLE and self.messages == 0


def metadata_of(headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The request metadata of a re-sent call: the headers verify sends (the recorded ones less
    what no client re-sends, and the user's), as gRPC takes them (lower-case names; what gRPC sets
    itself and binary ``-bin`` values left out), and the A2A version."""
    pairs = [(k.lower(), v) for k, v in headers if not k.lower().endswith("-bin")]
    kept = [(k, v) for k, v in forwardable(pairs) if not k.startswith("grpc-") and k != "a2a-version"]
    return [*kept, ("a2a-version", "1.0")]


class GrpcCaller:
    """The gRPC calls of one live run, on one channel to ``target`` (``HOST:PORT``), recorded into
    ``log`` by ``observer``, every row and event filed under the recorded task (``filed_under``)."""

    def __init__(
        self,
        log: RecordingStore,
        target: str,
        observer: Observer,
        filed_under: str,
        *,
        on_end: Callable[[int], None] | None = None,
    ) -> None:
        self.grpc = grpc_wire.require()
        self.log, self.target, self.observer, self.on_end = log, target, observer, on_end
        self.filed_under = filed_under  # the recorded task: every row and event of the run filed under it
        self.writer = writer_of(log)  # the capture's one sequence of writes (begin, commit, end once)
        self.channel: Any = self.grpc.aio.insecure_channel(target)

    async def aclose(self) -> None:
        await self.channel.close()

    async def call(
        self,
        method: grpc_wire.Method,
        params: bytes,
        metadata: Sequence[tuple[str, str]],
        sink: Sink,
        *,
        call_timeout: float,
        stall_timeout: float,
        grace: float,
    ) -> GrpcEnded:
        """One call of ``method`` with the request whose JSON mapping is ``params``."""
        gc = GrpcCapture(Redactor(), method.path, role="client")
        gc.cap.filed_under = self.filed_under
        raw = grpc_wire.from_json(method.request_type, params)
        gc.set_deadline(None if method.streaming else call_timeout)
        ex = gc.request(self.target, raw, metadata)
        await self.writer.run(gc.cap.begin_writes(self.log, ex, self.observer))
        ended = GrpcEnded(exchange_id=gc.cap.exchange_id)
        initial: Any = None
        trailers: Any = None
        details: str | None = None
        outcome: Outcome = "error"
        try:
            try:
                if method.streaming:
                    call = self.channel.unary_stream(method.path)(raw, metadata=list(metadata))
                    stopped = await self._read(gc, call, sink, ended, stall_timeout, grace)
                    if stopped is not None:
                        call.cancel()
                        outcome = "stalled" if stopped == "stalled" else "closed"
                        ended.error = (
                            f"no progress for {stall_timeout:g} s"
                            if stopped == "stalled"
                            else "the agent kept the stream open after the task settled: closed by a2a-tape"
                        )
                        return ended
                else:
                    call = self.channel.unary_unary(method.path)(raw, metadata=list(metadata), timeout=call_timeout)
                    await self._record(gc, [await call], sink, ended)
                code = await call.code()
                ended.code, details = code.value[0], await call.details()
                initial, trailers = await call.initial_metadata(), await call.trailing_metadata()
            except self.grpc.aio.AioRpcError as exc:
                ended.code, details = exc.code().value[0], exc.details()
                initial, trailers = exc.initial_metadata(), exc.trailing_metadata()
            outcome = await self._status(gc, sink, ended, details, trailers)
        except BaseException:  # cancelled from outside (Ctrl-C): the row says so
            outcome, ended.error = "interrupted", "the run was stopped before the answer ended"
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self._end(gc, outcome, ended, details, initial, trailers)
        return ended

    async def _read(
        self, gc: GrpcCapture, call: Any, sink: Sink, ended: GrpcEnded, stall: float, grace: float
    ) -> str | None:
        """The stream's messages, each in the log before the sink takes it; why the watch
        stopped it, if it did."""
        last = [time.monotonic()]
        watch = StallWatch(stall, lambda: last[0], settled=sink.settled, grace=grace)
        failed: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run, tg.cancel_scope)
            try:
                async for message in call:
                    last[0] = time.monotonic()
                    await self._record(gc, [message], sink, ended)
            except self.grpc.aio.AioRpcError as exc:  # the status: raised after the group, not in it
                failed = exc
            tg.cancel_scope.cancel()
        if failed is not None:
            raise failed
        return watch.stopped

    async def _record(self, gc: GrpcCapture, messages: list[Any], sink: Sink, ended: GrpcEnded) -> None:
        new, items = gc.message_items(messages)
        if new:
            stored = await self.writer.run(gc.commit_writes(self.log, new))
            ended.messages += len(stored)
            sink.take(stored, items)

    async def _status(
        self, gc: GrpcCapture, sink: Sink, ended: GrpcEnded, details: str | None, trailers: Any
    ) -> Outcome:
        """A non-OK status as the log's error item (the agent's answer), unless it is our own
        deadline passing; the call's outcome."""
        code = ended.code
        assert code is not None
        if gc.deadline_passed(code):
            ended.error = "no answer within the call's timeout"
            return "timeout"
        event = gc.status_event(code, details, trailers)
        if event is not None:
            stored = await self.writer.run(gc.commit_writes(self.log, [event]))
            sink.take(stored, [decode_item(event.payload)])
            ended.error = f"gRPC status {grpc_wire.status_name(code)}: {details or ''}"
        return outcome_of(code, gc.streaming, ended.messages)

    async def _end(
        self, gc: GrpcCapture, outcome: Outcome, ended: GrpcEnded, details: str | None, initial: Any, trailers: Any
    ) -> None:
        await self.writer.run(
            gc.end_writes(
                self.log,
                outcome,
                code=ended.code,
                details=details,
                initial=initial,
                trailers=trailers,
                error=ended.error,
            )
        )
        ex_id = gc.cap.exchange_id
        assert ex_id is not None
        if self.on_end is not None:
            self.on_end(ex_id)
