"""``RecordingInterceptor``: record every A2A call of a ``grpc.aio`` client, the gRPC twin of
:class:`recorder.transport.RecordingTransport`.

    recording = RecordingInterceptor("a2a-tape.db")
    config = ClientConfig(grpc_channel_factory=recording.channel)      # the a2a-sdk client
    channel = grpc.aio.insecure_channel(target, interceptors=recording.interceptors(target))  # any client

grpc.aio takes one interceptor object per kind of call, so :meth:`interceptors` gives the
unary-unary and the unary-stream ones (A2A has no other kind), bound to the target they name in
the log. Each call of an A2A method (:mod:`wire.grpc`) is recorded through the capture
core (:mod:`capture.grpc_calls`): its exchange row (the request in the proto3 JSON mapping, the
metadata as headers, redacted) before the request goes out, each answer message before the caller
gets it (write-ahead), its status and trailers at the end, through the capture core's one
sequence (begin, commit, end once); a call of any other method passes untouched. Writes never make
the caller's event loop wait for the log's lock (:func:`store.writer.writer_of`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from typing import Any

from a2a_tape import store
from a2a_tape.capture.exchange import Outcome
from a2a_tape.capture.grpc_calls import CLIENT_DEADLINE, GrpcCapture, outcome_of
from a2a_tape.capture.recording_log import recording_log
from a2a_tape.store.observers import new_observer
from a2a_tape.store.redact import Redactor
from a2a_tape.store.writer import writer_of
from a2a_tape.wire import grpc as grpc_wire


class RecordingInterceptor:
    """Records the A2A calls of the gRPC channels it makes or is put on (see the module docstring).

    ``db``: a path (opened here, durability ``normal`` unless said) or an open store;
    ``redact``/``redactor``: as :class:`RecordingTransport` takes them (metadata keys are header names).
    """

    def __init__(
        self,
        db: str | os.PathLike[str] | store.Store,
        *,
        redactor: Redactor | None = None,
        redact: Iterable[str] = (),
        durability: store.Durability = "normal",
    ) -> None:
        self.grpc = grpc_wire.require()
        self.store, self._owns_store, self.redactor = recording_log(
            db, durability=durability, redactor=redactor, redact=redact, who="RecordingInterceptor"
        )
        self.task_ids: list[str] = []  # every task these calls named, in order
        self.observer = new_observer("in-process")  # this interceptor's recordings are one run of each task
        self.writer = writer_of(self.store)  # every write from the caller's event loop, never waiting for the lock

    def interceptors(self, target: str) -> list[Any]:
        """The interceptors to give a ``grpc.aio`` channel to ``target`` (``HOST:PORT``)."""
        aio = self.grpc.aio

        async def unary(_self: Any, continuation: Any, details: Any, request: Any) -> Any:
            return await self._unary(target, continuation, details, request)

        async def streaming(_self: Any, continuation: Any, details: Any, request: Any) -> Any:
            return await self._streaming(target, continuation, details, request)

        # grpc.aio sorts interceptors by their base class, one kind each
        unary_cls = type("RecordingUnary", (aio.UnaryUnaryClientInterceptor,), {"intercept_unary_unary": unary})
        stream_cls = type(
            "RecordingStreaming", (aio.UnaryStreamClientInterceptor,), {"intercept_unary_stream": streaming}
        )
        return [unary_cls(), stream_cls()]

    def channel(self, target: str, *, credentials: Any = None, options: Any = None) -> Any:
        """A recording ``grpc.aio`` channel to ``target``: the a2a-sdk client's ``grpc_channel_factory``
        (a card's URL with a scheme, ``grpc://HOST:PORT``, is taken as ``HOST:PORT``)."""
        host = target.partition("://")[2] or target
        host = host.split("/", 1)[0]
        make = self.grpc.aio.secure_channel if credentials is not None else self.grpc.aio.insecure_channel
        args = (host, credentials) if credentials is not None else (host,)
        return make(*args, options=options, interceptors=self.interceptors(host))

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    # -- one call --------------------------------------------------------------------------------

    async def _begin(self, target: str, details: Any, request: Any) -> GrpcCapture | None:
        path = details.method.decode() if isinstance(details.method, bytes) else str(details.method)
        if grpc_wire.method(path) is None:
            return None  # not A2A: passed on untouched
        gc = GrpcCapture(self.redactor, path, role="client")
        raw = request if isinstance(request, bytes) else request.SerializeToString()  # what the stub sends
        ex = gc.request(target, raw, details.metadata)
        gc.set_deadline(details.timeout)
        await self.writer.run(gc.cap.begin_writes(self.store, ex, self.observer))
        return gc

    async def _unary(self, target: str, continuation: Any, details: Any, request: Any) -> Any:
        gc = await self._begin(target, details, request)
        call = await continuation(details, request)
        if gc is None:
            return call
        try:
            response = await call
        except self.grpc.aio.AioRpcError as exc:
            await self._end(gc, exc.code().value[0], exc.details(), exc.initial_metadata(), exc.trailing_metadata(), 0)
            raise
        except BaseException as exc:
            await self._broken(gc, exc)
            raise
        gc.head(await call.initial_metadata())
        await self._record(gc, [response])
        code = await call.code()
        await self._end(
            gc, code.value[0], await call.details(), await call.initial_metadata(), await call.trailing_metadata(), 1
        )
        return response

    async def _streaming(self, target: str, continuation: Any, details: Any, request: Any) -> Any:
        gc = await self._begin(target, details, request)
        call = await continuation(details, request)
        if gc is None:
            return call
        return self._follow(gc, call)

    async def _follow(self, gc: GrpcCapture, call: Any) -> AsyncIterator[Any]:
        """The stream's messages, each in the log before the caller gets it."""
        received = 0
        try:
            async for message in call:
                if not received:  # the initial metadata came before the first message: who answered
                    gc.head(await call.initial_metadata())
                await self._record(gc, [message])
                received += 1
                yield message
        except self.grpc.aio.AioRpcError as exc:
            await self._end(
                gc, exc.code().value[0], exc.details(), exc.initial_metadata(), exc.trailing_metadata(), received
            )
            raise
        except BaseException as exc:  # the caller stopped reading (a break, a cancel)
            await self._broken(gc, exc)
            raise
        code = await call.code()
        await self._end(
            gc,
            code.value[0],
            await call.details(),
            await call.initial_metadata(),
            await call.trailing_metadata(),
            received,
        )

    async def _record(self, gc: GrpcCapture, messages: list[Any]) -> None:
        events = gc.message_events(messages)
        if events:
            await self.writer.run(gc.commit_writes(self.store, events))
        if gc.cap.task_id and gc.cap.task_id not in self.task_ids:
            self.task_ids.append(gc.cap.task_id)

    async def _end(
        self, gc: GrpcCapture, code: int, details: str | None, initial: Any, trailers: Any, received: int
    ) -> None:
        if gc.deadline_passed(code):  # the caller's own deadline: no answer of the agent's
            outcome: Outcome = "incomplete"
            error: str | None = CLIENT_DEADLINE
        else:
            if not received:  # no message: the head comes with the status
                gc.head(initial)
            event = gc.status_event(code, details, trailers)
            if event is not None:
                await self.writer.run(gc.commit_writes(self.store, [event]))
            outcome = outcome_of(code, gc.streaming, received)
            error = None if code == 0 else f"gRPC status {grpc_wire.status_name(code)}: {details or ''}"
        await self.writer.run(
            gc.end_writes(
                self.store, outcome, code=code, details=details, initial=initial, trailers=trailers, error=error
            )
        )

    async def _broken(self, gc: GrpcCapture, exc: BaseException) -> None:
        why = "the caller stopped reading before the answer ended" if not isinstance(exc, Exception) else str(exc)
        await self.writer.run(
            gc.end_writes(self.store, "incomplete", code=None, details=None, initial=None, trailers=None, error=why)
        )
