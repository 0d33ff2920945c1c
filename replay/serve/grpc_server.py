"""The replay server's gRPC side: ``a2a-tape serve --grpc-listen``, recordings answering gRPC clients.

A thin shell around :class:`replay.serve.engine.ReplayEngine`, as :mod:`replay.serve.server` is
for HTTP: each call of ``lf.a2a.v1.A2AService`` is asked of the engine as the v1.0 JSON-RPC request
it is (the gRPC request's proto3 JSON mapping is the v1.0 params), so matching, timing, playback
and faults are the engine's, whatever binding made the recording; its answer goes back as
protobuf messages (:mod:`wire.grpc`):

- each result (a stream's items, or the one answer) as the method's message type; a recorded
  gRPC answer's JSON is the message's own;
- an error as the gRPC status the recorded agent sent (a gRPC recording), or as an a2a-sdk 1.3.0
  gRPC server answers that JSON-RPC error (status, message, an ErrorInfo in
  ``grpc-status-details-bin``);
- faults: ``drop-after=N`` ends the stream with UNAVAILABLE, the status a gRPC client gets when
  the server's connection goes; ``stall-after=N`` sends nothing more (the client's deadline
  decides); ``error-after=N`` answers INTERNAL; per call with the ``x-a2a-tape-fault`` metadata;
- a method the service does not have: UNIMPLEMENTED, as any gRPC server answers it;
- the replay's marker (:data:`store.observers.REPLAY_MARKER`) in each call's initial metadata, as
  the HTTP side sends it in a header.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.faults import FAULT_HEADER, FaultError, Faults, parse_faults
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.observers import REPLAY_MARKER
from a2a_tape.wire import grpc as grpc_wire
from a2a_tape.wire.sse_reader import SseParser

OK, INVALID_ARGUMENT, UNIMPLEMENTED, UNAVAILABLE, INTERNAL = 0, 3, 12, 14, 13


class Answered(A2ATapeError):
    """A call ends with this status (raised inside a call, turned into the status on its context)."""

    def __init__(self, code: int, details: str, status_bin: bytes | None = None) -> None:
        super().__init__(details)
        self.code, self.details, self.status_bin = code, details, status_bin


class GrpcReplay:
    """Serves ``engine`` to gRPC clients (see the module docstring)."""

    def __init__(self, engine: ReplayEngine) -> None:
        self.grpc = grpc_wire.require()
        self.engine = engine
        self.port: int | None = None

    @contextlib.asynccontextmanager
    async def serving(self, host: str, port: int) -> AsyncIterator[int]:
        """Serve on ``host:port`` (0: any free port) while inside; yields the port."""
        server = self.grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((_Handler(self),))
        self.port = server.add_insecure_port(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        if not self.port:
            raise OSError(f"cannot listen on {host}:{port}")
        await server.start()
        try:
            yield self.port
        finally:
            await server.stop(1)

    async def answers(self, m: grpc_wire.Method, request: bytes, context: Any) -> AsyncIterator[bytes]:
        """The engine's answer to one call, as messages of ``m``; raises :class:`Answered` for a
        status that is not OK."""
        try:
            params = grpc_wire.to_json(m.request_type, request)
        except grpc_wire.NotTheMessage as exc:
            raise Answered(INVALID_ARGUMENT, str(exc)) from None
        headers = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        headers.setdefault("a2a-version", "1.0")  # gRPC is A2A 1.0's only
        faults = self._faults(headers)
        body = grpc_wire.jsonrpc_request(m.name, params)
        reply = await self.engine.handle("POST", "/", "", headers, body, "")
        if REPLAY_MARKER in reply.headers:  # the replay's own answer, marked as HTTP's is (initial metadata)
            await context.send_initial_metadata(((REPLAY_MARKER, reply.headers[REPLAY_MARKER]),))
        kind = "lf.a2a.v1.StreamResponse" if m.streaming else m.response_type
        answered = reply.said.answered if reply.said is not None else None
        if reply.stream is None:
            message = _message(kind, reply.body)
            if answered is not None:  # once the call has ended, its answer out: the task's pushes may go
                # (the unary handler returns the first message and never resumes this generator: a
                # line after the yield would not run)
                done = answered
                context.add_done_callback(lambda _call: done())
            yield message
            return
        sent = 0
        parser = SseParser()
        try:
            async for chunk in reply.stream:
                for item in parser.feed(chunk):
                    if item.comment:
                        continue
                    yield _message(kind, item.data)
                    sent += 1
            for item in parser.close():
                if not item.comment:
                    yield _message(kind, item.data)
                    sent += 1
        finally:
            await reply.stream.aclose()
            if answered is not None:
                answered()
        if faults.drop_after is not None and sent >= faults.drop_after:
            raise Answered(UNAVAILABLE, "Connection lost (a2a-tape fault: drop-after)")
        if sent == 0 and not m.streaming:
            raise Answered(UNAVAILABLE, "Connection lost before the answer")

    def _faults(self, headers: dict[str, str]) -> Faults:
        spec = next((v for k, v in headers.items() if k.lower() == FAULT_HEADER.lower()), None)
        if spec is None:
            return self.engine.faults
        try:
            return parse_faults(spec)
        except FaultError as exc:
            raise Answered(INVALID_ARGUMENT, f"a2a-tape: {exc}") from None


def _message(kind: str, payload: bytes) -> bytes:
    """One answer of the engine (a JSON-RPC response, or a recorded bare item) as a message of
    ``kind``; an error as :class:`Answered`."""
    try:
        doc = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        raise Answered(INTERNAL, "a2a-tape replay: a recorded answer is not JSON") from None
    if not isinstance(doc, dict):
        raise Answered(INTERNAL, "a2a-tape replay: a recorded answer is not a JSON object")
    error = doc.get("error")
    if isinstance(error, dict):
        code, details, status_bin = grpc_wire.status_of_error(error, jsonrpc="jsonrpc" in doc)
        raise Answered(code, details, status_bin)
    result = doc["result"] if "result" in doc else doc
    if result is None:  # a JSON-RPC answer with no result (a config deleted): google.protobuf.Empty's {}
        result = {}
    try:
        return grpc_wire.from_json(kind, msgspec.json.encode(result))
    except grpc_wire.NotTheMessage as exc:
        raise Answered(INTERNAL, f"a2a-tape replay: the recorded answer does not fit {kind}: {exc}") from None


async def _finish(context: Any, exc: Answered) -> None:
    """End the call with ``exc``'s status (details in the trailer, as a2a-sdk sends them)."""
    if exc.status_bin is not None:
        context.set_trailing_metadata(((grpc_wire.STATUS_DETAILS_KEY, exc.status_bin),))
    context.set_code(_status(exc.code))
    context.set_details(exc.details)


def _status(code: int) -> Any:
    import grpc

    return next((s for s in grpc.StatusCode if s.value[0] == code), grpc.StatusCode.UNKNOWN)


class _Handler:
    def __init__(self, replay: GrpcReplay) -> None:
        self.replay = replay

    def service(self, details: Any) -> Any:
        grpc = self.replay.grpc
        m = grpc_wire.method(details.method)
        if m is None:
            return None  # UNIMPLEMENTED, said by grpc itself
        replay = self.replay
        if m.streaming:

            async def streaming(request: bytes, context: Any) -> AsyncIterator[bytes]:
                try:
                    async for raw in replay.answers(m, request, context):
                        yield raw
                except Answered as exc:
                    await _finish(context, exc)

            return grpc.unary_stream_rpc_method_handler(streaming)

        async def unary(request: bytes, context: Any) -> bytes | None:
            try:
                async for raw in replay.answers(m, request, context):
                    return raw
            except Answered as exc:
                await _finish(context, exc)
            return None

        return grpc.unary_unary_rpc_method_handler(unary)


def attach(app: Any, engine: ReplayEngine, host: str, port: int, *, on_ready: Any = None) -> GrpcReplay:
    """Serve ``engine`` to gRPC clients on ``host:port`` beside the HTTP app ``app`` (started and
    stopped with its lifespan); the card then names the gRPC server for its gRPC interface.
    ``on_ready(address)`` is called with ``HOST:PORT`` once it listens."""
    replay = GrpcReplay(engine)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[None]:
        async with inner(app_), replay.serving(host, port) as bound:
            engine.grpc_address = f"[{host}]:{bound}" if ":" in host else f"{host}:{bound}"
            if on_ready is not None:
                on_ready(engine.grpc_address)
            yield

    app.router.lifespan_context = lifespan
    return replay
