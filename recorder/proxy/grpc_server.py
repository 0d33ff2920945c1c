"""The recording gRPC proxy: ``a2a-tape proxy --grpc-listen``, the HTTP proxy's twin for gRPC clients.

It serves every gRPC path with one generic handler on raw bytes and forwards each call to the
agent's gRPC address unchanged: the exact request and answer messages, request metadata, the
agent's initial metadata, status, details and trailers (``grpc-status-details-bin`` included).
A method it does not know is forwarded the same way (bidirectional, bytes as they are); an A2A
method (:mod:`wire.grpc`) is recorded: its request and each answer message in the proto3
JSON mapping (the v1.0 JSON shape the fold, channels, doctor and exports read), through the
capture core (:mod:`capture.grpc_calls`).

The promises are the HTTP proxy's (:mod:`recorder.proxy.server`), from the same core: its store,
group-commit writer, redactor, idempotency gateway and settling of rows.

- write-ahead: each answer message is in the log before the client gets it (read and commit
  run apart, so the messages that arrive during a commit form the next batch);
- the upstream is read by a task of the proxy: a client that goes away does not cut the recording;
- an exact duplicate of a keyed SendMessage/SendStreamingMessage (``idempotency-key`` metadata, or
  the messageId) is answered from the log; a reused key with another request is forwarded with a
  local note, or refused (INVALID_ARGUMENT) under ``--on-key-conflict reject``;
- faults are answers, as gRPC statuses: the log cannot be written (UNAVAILABLE), the agent cannot
  be reached (UNAVAILABLE), sends nothing within ``--first-byte-timeout`` or goes silent for
  ``--read-timeout`` (DEADLINE_EXCEEDED); a stream the agent cuts is cut for the client too;
- its token (``authorization: Bearer TOKEN`` metadata, stripped before forwarding) and its body
  limit (``--max-body``: RESOURCE_EXHAUSTED, said by gRPC itself) are the only things it answers
  for itself;
- push configs (issue 33) as over HTTP (:mod:`.push_configs`): a webhook a send or a config call
  registers is swapped for the HTTP proxy's push receiver in the message the agent gets (the log
  keeps the client's), and an answer naming the receiver names the client's webhook again, in
  what the client gets and in the log. Only a message that carries a webhook is written again
  (from its JSON mapping); every other one goes on as its exact bytes.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.lowlevel
import msgspec
from anyio.abc import TaskGroup

from a2a_tape import store
from a2a_tape.capture.grpc_calls import CLIENT_DEADLINE, GrpcCapture, forwardable, outcome_of
from a2a_tape.capture.sending import store_fault
from a2a_tape.recorder.proxy.grpc_live import (
    DEADLINE_EXCEEDED,
    INVALID_ARGUMENT,
    OK,
    RESOURCE_EXHAUSTED,
    UNAUTHENTICATED,
    UNAVAILABLE,
    GrpcLive,
    grpc_status,
)
from a2a_tape.recorder.proxy.idempotency import (
    Idempotency,
    OnKeyConflict,
    conflict_message,
    conflict_note,
    recorded_items,
    request_hash,
    same_caller,
    scoped,
)
from a2a_tape.recorder.proxy.outcomes import log_fault_line
from a2a_tape.recorder.proxy.plumbing import carries_token, token_presented
from a2a_tape.recorder.proxy.push_configs import PUSH_PATH, restore, rewrite
from a2a_tape.recorder.proxy.server import Proxy, ProxyConfig
from a2a_tape.wire import grpc as grpc_wire
from a2a_tape.wire.http_client import MAX_BODY

if TYPE_CHECKING:
    from a2a_tape.store.writer import Writes

MAX_MESSAGE = MAX_BODY
"""The largest answer message the proxy takes from the agent (an answer that is not a stream, over HTTP, has the
same bound): a message without end cannot take the proxy's memory."""
_TOO_LARGE = "Received message larger than max"  # grpc's own words when MAX_MESSAGE stops a message
_AUTH = frozenset({"authorization", "proxy-authorization"})


class GrpcProxy:
    """The gRPC side of a running :class:`recorder.proxy.server.Proxy` (its store, writer, config)."""

    def __init__(self, core: Proxy, upstream: str) -> None:
        self.grpc = grpc_wire.require()
        self.core = core
        self.upstream = upstream  # HOST:PORT of the agent's gRPC interface
        self.by_key: dict[tuple[str, str], GrpcLive] = {}
        self.port: int | None = None
        self._tg: TaskGroup | None = None
        self._channel: Any = None

    @property
    def config(self) -> ProxyConfig:
        return self.core.config

    # -- running ---------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def serving(self, host: str, port: int) -> AsyncIterator[int]:
        """Serve on ``host:port`` (0: any free port) while inside; yields the port."""
        grpc = self.grpc
        limit = self.config.max_body
        server = grpc.aio.server(
            options=[("grpc.max_receive_message_length", limit), ("grpc.so_reuseport", 0)],
        )
        server.add_generic_rpc_handlers((_Handler(self),))
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.port = server.add_insecure_port(address)
        if not self.port:
            raise OSError(f"cannot listen on {host}:{port}")
        self._channel = grpc.aio.insecure_channel(
            self.upstream,
            options=[("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.enable_retries", 0)],
        )
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await server.start()
                try:
                    yield self.port
                finally:
                    await server.stop(2)
                    tg.cancel_scope.cancel()
        finally:
            await self._channel.close()

    # -- one call --------------------------------------------------------------------------------

    def _refusal(self, metadata: Any) -> str | None:
        token = self.config.token
        if token and not token_presented([(k, v) for k, v in metadata if isinstance(v, str)], token):
            return "missing or wrong proxy token (send 'authorization: Bearer <token>' metadata)"
        return None

    async def call(self, path: str, request: bytes, context: Any) -> AsyncIterator[bytes]:
        """A unary or server-streaming call: recorded, relayed (or answered from the log)."""
        metadata = tuple(context.invocation_metadata() or ())
        refusal = self._refusal(metadata)
        if refusal is not None:
            await context.abort(grpc_status(UNAUTHENTICATED), refusal)
        gc = GrpcCapture(self.config.redactor, path, role="proxy")
        ex = gc.request(self.upstream, request, metadata)
        request = self._to_receiver(gc, request)  # the log has the client's webhook, the agent our receiver
        try:
            live, owner, fresh = await self._begin(gc, ex, request, metadata, context.time_remaining())
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None:
                raise
            await context.abort(grpc_status(UNAVAILABLE), self.config.redactor.text(log_fault_line(fault)))
        place = live.reader(first=fresh)
        if place is None:  # a late duplicate: the first messages left memory (--stream-buffer)
            live = await self._after(live, gc.method)
            place = live.reader()
            assert place is not None
        # a call the agent did not answer itself gets none of the answer's per-client metadata
        try:
            async for raw in live.follow(context, place, None if owner else self._per_client):
                yield raw
        finally:  # a call cancelled mid-message gives its place up at once: it must not hold the relay back
            live.window.leave(place)

    def _per_client(self, name: str, value: Any) -> bool:
        """Metadata that belongs to one caller: a credential by its shape (``set-cookie``, a session
        token; :mod:`store.redact`); a binary value by its name."""
        return bool(self.config.redactor.is_secret(name, value if isinstance(value, str) else ""))

    def _new_live(self, *, keep: bool = True) -> GrpcLive:
        cfg = self.config
        return GrpcLive(keep=keep, limit=cfg.stream_buffer, patience=cfg.slow_client_timeout)

    async def _after(self, live: GrpcLive, m: grpc_wire.Method | None) -> GrpcLive:
        """A duplicate of a relay whose first messages this proxy no longer holds: answered from the
        log, as a repeat is after a restart, once the relay ends."""
        late = self._new_live()
        await live.ended.wait()
        if m is None or live.exchange_id is None:
            late.finish(UNAVAILABLE, "the call this one repeats is not in the log")
            return late
        await self._from_log(late, m, store.IdempotencyRecord(key="", request_hash="", exchange_id=live.exchange_id))
        return late

    def _outgoing(self, metadata: Any) -> list[tuple[str, Any]]:
        """The call's metadata as it goes to the agent: hop-by-hop entries aside, and the proxy's own
        token never (whatever method the call is, A2A's or not)."""
        token = self.config.token
        return [
            (k, v)
            for k, v in forwardable(metadata)
            if not (token and k in _AUTH and isinstance(v, str) and carries_token(v, token))
        ]

    def _to_receiver(self, gc: GrpcCapture, request: bytes) -> bytes:
        """``request`` as the agent gets it: each webhook it registers (a send's config, a config
        call) replaced by the push receiver's URL; unchanged when it registers none, or with the
        receiver off."""
        push, base = self.core.push, self.core.push_address()
        m = gc.method
        if push is None or base is None or m is None or gc.request_json is None or gc.unmapped:
            return request
        body, used = rewrite(gc.request_json, gc.request_json, m.name, push.hooks, base)
        if not used:
            return request
        try:
            return grpc_wire.from_json(m.request_type, body)
        except grpc_wire.NotTheMessage:  # cannot be: the JSON came from this very message
            return request

    def restorer(self, gc: GrpcCapture) -> Any:
        """What makes an answer message name the client's webhook where the agent names the
        receiver (None: the receiver is off)."""
        push, m = self.core.push, gc.method
        if push is None or m is None:
            return None
        kind = "lf.a2a.v1.StreamResponse" if m.streaming else m.response_type
        marker = PUSH_PATH.encode()

        def restored(raw: bytes) -> bytes:
            if marker not in raw:  # a protobuf string is its UTF-8 bytes: no receiver URL, nothing to do
                return raw
            try:
                data = grpc_wire.to_json(kind, raw)
                back = restore(data, push.hooks)
                return raw if back == data else grpc_wire.from_json(kind, back)
            except grpc_wire.NotTheMessage:
                return raw

        return restored

    async def _begin(
        self, gc: GrpcCapture, ex: store.Exchange, request: bytes, metadata: Any, remaining: Any
    ) -> tuple[GrpcLive, bool, bool]:
        """The exchange row (and the key's claim), then the relay or the answer from the log; whether
        this call is the one the agent answers (its per-client metadata is this call's); and whether
        this call made the relay it reads (False: a duplicate attached to another call's)."""
        m = gc.method
        key = _key(metadata, m, gc.request_json) if self.config.idempotency is Idempotency.on else None
        if key is None or gc.request_json is None or m is None:
            live = self._new_live(keep=False)  # nobody can attach: nothing kept once read
            live.exchange_id = await self.core.begin_row(gc.cap, ex)
            self._start(live, gc, request, metadata, remaining, settle_key=None, slot=None)
            return live, True, True
        ex.idempotency_key = key
        # whose call: the method's path and the credentials the agent sees (our token is not one), as
        # the HTTP proxy scopes its requests (recorder.proxy.idempotency.caller_scope)
        scope = self.core.gateway.scope(gc.path, self._outgoing(metadata), self._per_client)
        req_hash = scoped(scope, request_hash(m.name, gc.request_json))
        slot = (key, req_hash)
        attached = self.by_key.get(slot)
        if attached is not None:  # an exact duplicate (same caller) of a call this proxy is relaying
            await self.core.begin_row(gc.cap, ex)
            await self.core.finish_row(gc.cap, "replayed")
            return attached, False, False  # the same relay: head, messages, end (less the first caller's own)
        live = self._new_live()
        self.by_key[slot] = live
        try:
            ex_id, record, claimed = await self.core.begin_and_claim(gc.cap, ex, key, req_hash)
        except BaseException:
            self.by_key.pop(slot, None)
            raise
        live.exchange_id = ex_id
        other = not same_caller(record.request_hash, req_hash)
        if claimed:
            self._start(live, gc, request, metadata, remaining, settle_key=key, slot=slot)
            return live, True, True
        if record.request_hash == req_hash:  # held by an earlier call (in the log, or another process)
            self.by_key.pop(slot, None)
            await self._from_log(live, m, record)
            await self.core.finish_row(gc.cap, "replayed")
            return live, False, True
        if self.config.on_key_conflict is OnKeyConflict.reject:
            self.by_key.pop(slot, None)
            live.finish(INVALID_ARGUMENT, conflict_message(key, other))
            why = "idempotency key in use by another caller" if other else "idempotency key reused for another request"
            await self.core.finish_row(gc.cap, "refused", why)
            return live, True, True
        await self.core.note(gc.cap, "idempotency-key-reused", conflict_note(key, record.exchange_id, other))
        self._start(live, gc, request, metadata, remaining, settle_key=None, slot=slot)
        return live, True, True

    def _start(
        self,
        live: GrpcLive,
        gc: GrpcCapture,
        request: bytes,
        metadata: Any,
        remaining: Any,
        *,
        settle_key: str | None,
        slot: tuple[str, str] | None,
    ) -> None:
        assert self._tg is not None
        outgoing = self._outgoing(metadata)  # our token stays here; every other piece of metadata goes on
        self._tg.start_soon(self._pump, live, gc, request, outgoing, remaining, settle_key, slot)

    async def _too_slow(self, gc: GrpcCapture, dropped: int) -> None:
        await self.core.client_too_slow(gc.cap, dropped, "its call was ended (RESOURCE_EXHAUSTED)")

    async def _from_log(self, live: GrpcLive, m: grpc_wire.Method, record: store.IdempotencyRecord) -> None:
        """A repeat of a call the log answers: its recorded answers, as messages of this method."""
        st = self.core.store
        events = await anyio.to_thread.run_sync(recorded_items, st, record)
        if not events:
            live.finish(
                UNAVAILABLE,
                "the first request with this key was interrupted before any reply was recorded; "
                "its outcome is unknown, send a new messageId to try again",
            )
            return
        live.set_head(())
        kind = "lf.a2a.v1.StreamResponse" if m.streaming else m.response_type
        for e in events if m.streaming else events[:1]:
            body = _unwrapped(bytes(e.payload))
            if isinstance(body, tuple):
                live.finish(*body)
                return
            try:
                live.publish([grpc_wire.from_json(kind, body)])
            except grpc_wire.NotTheMessage as exc:
                live.finish(UNAVAILABLE, f"the recorded answer does not fit {kind}: {exc}")
                return
        live.finish(OK, "")

    # -- the upstream side -----------------------------------------------------------------------

    async def _pump(
        self,
        live: GrpcLive,
        gc: GrpcCapture,
        request: bytes,
        metadata: list[tuple[str, Any]],
        remaining: float | None,
        settle_key: str | None,
        slot: tuple[str, str] | None,
    ) -> None:
        """Relay one call upstream; runs in the proxy's task group (outlives the client)."""
        grpc = self.grpc
        cfg = self.config
        relay = _Relay(live, gc, self.core.writer, self.restorer(gc), self._too_slow)
        release = False
        gc.set_deadline(remaining)
        try:
            if gc.streaming:
                call = self._channel.unary_stream(gc.path)(request, metadata=metadata, timeout=remaining)
            else:
                call = self._channel.unary_unary(gc.path)(request, metadata=metadata, timeout=remaining)
            await relay.run(call, cfg.first_byte_timeout, cfg.read_timeout)
        except grpc.aio.AioRpcError as exc:
            code = exc.code().value[0]
            if code == RESOURCE_EXHAUSTED and _TOO_LARGE in (exc.details() or ""):
                outcome = "dropped" if relay.received else "error"
                relay.ours(UNAVAILABLE, outcome, f"the upstream agent's answer was cut off: {exc.details()}")
            elif gc.deadline_passed(code):
                relay.ours(DEADLINE_EXCEEDED, "incomplete", CLIENT_DEADLINE)
            elif code == UNAVAILABLE and not relay.received and not exc.initial_metadata():
                release = True  # never reached the agent: a retry may run
                relay.ours(UNAVAILABLE, "error", f"upstream agent unreachable: {exc.details()}")
            else:
                await relay.agentgrpc_status(code, exc.details() or "", exc.initial_metadata(), exc.trailing_metadata())
        except TimeoutError:
            first = not relay.received
            limit = cfg.first_byte_timeout if first else cfg.read_timeout
            why = (
                f"the upstream agent accepted the request but sent no answer within {limit:g} s (--first-byte-timeout)"
                if first
                else f"the upstream agent went silent for {limit:g} s mid-answer (--read-timeout)"
            )
            relay.ours(DEADLINE_EXCEEDED, "timeout", why)
        except anyio.get_cancelled_exc_class():
            relay.ours(UNAVAILABLE, "incomplete", "the proxy stopped before the upstream's answer ended")
            raise
        except Exception as exc:  # noqa: BLE001 - one bad relay must not take the proxy down
            fault = store_fault(exc)
            if fault is None:
                relay.ours(UNAVAILABLE, "error", f"proxy error: {type(exc).__name__}: {exc}")
            else:
                relay.ours(UNAVAILABLE, "error", log_fault_line(fault))
        finally:
            live.finish(
                relay.code if relay.code is not None else UNAVAILABLE, gc.cap.text(relay.details), relay.trailers
            )
            with anyio.CancelScope(shield=True):
                await self._settle(gc, relay, settle_key, slot, live, release)

    async def _settle(
        self,
        gc: GrpcCapture,
        relay: _Relay,
        settle_key: str | None,
        slot: tuple[str, str] | None,
        live: GrpcLive,
        release: bool,
    ) -> None:
        ex_id = gc.cap.exchange_id
        assert ex_id is not None
        end = relay.end_writes(self.core.store, also=self.core.key_fate(settle_key, release, gc.cap))
        try:
            await anyio.to_thread.run_sync(self.core.settle, gc.cap, end)
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None:
                raise
            line = gc.cap.text(log_fault_line(fault))
            print(f"a2a-tape proxy: gRPC exchange {ex_id} not finalised: {line}", file=sys.stderr)
        finally:
            if slot is not None and self.by_key.get(slot) is live:
                self.by_key.pop(slot, None)
            self.core.row_settled(ex_id, gc.cap)

    async def generic(self, path: str, requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        """A method that is not A2A's: forwarded both ways as bytes, the exchange row kept."""
        metadata = tuple(context.invocation_metadata() or ())
        refusal = self._refusal(metadata)
        if refusal is not None:
            await context.abort(grpc_status(UNAUTHENTICATED), refusal)
        gc = GrpcCapture(self.config.redactor, path, role="proxy")
        ex_id = await self.core.begin_row(gc.cap, gc.request(self.upstream, None, metadata))
        relay = _Relay(GrpcLive(), gc, None)
        call = self._channel.stream_stream(path)(
            requests, metadata=self._outgoing(metadata), timeout=context.time_remaining()
        )
        try:
            relay.initial = await call.initial_metadata()
            await context.send_initial_metadata(relay.initial)
            async for raw in call:
                relay.received += 1
                yield raw
            relay.code, relay.details = OK, ""
            relay.trailers = await call.trailing_metadata()
            relay.outcome = "ok"
        except self.grpc.aio.AioRpcError as exc:
            relay.code, relay.details, relay.trailers = (
                exc.code().value[0],
                exc.details() or "",
                exc.trailing_metadata(),
            )
            relay.outcome = "error"
        finally:
            end = relay.end_writes(self.core.store)
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await anyio.to_thread.run_sync(self.core.settle, gc.cap, end)
            self.core.row_settled(ex_id, gc.cap)
        if relay.trailers:
            context.set_trailing_metadata(tuple(relay.trailers))
        if relay.code:
            context.set_code(grpc_status(relay.code))
            context.set_details(relay.details)


class _Relay:
    """The upstream side of one relayed call: read, commit, publish; what it ended with."""

    def __init__(
        self,
        live: GrpcLive,
        gc: GrpcCapture,
        writer: store.GroupCommitWriter | None,
        restored: Callable[[bytes], bytes] | None = None,
        too_slow: Callable[[GrpcCapture, int], Awaitable[None]] | None = None,
    ) -> None:
        self.live, self.gc, self.writer, self.too_slow = live, gc, writer, too_slow
        self.log = cast("store.RecordingStore", writer.store) if writer is not None else None
        self.restored = restored  # an answer naming the push receiver, as the client's webhook
        self.read_bytes = self.published = 0  # bytes of messages read from the agent, handed to the clients
        self.code: int | None = None
        self.details = ""
        self.initial: Any = ()
        self.trailers: Any = ()
        self.received = 0
        self.outcome: Any = "error"
        self.error: str | None = None
        self.last_read = 0.0  # monotonic time of the last message read (the read timeouts count from it)
        self.timed_out = False  # the reader was stopped by a timeout of ours (:meth:`_watch`)

    def end_writes(
        self, log: store.RecordingStore, also: Callable[[], object] | None = None
    ) -> Writes[dict[str, object] | None]:
        """The call's row ended with what the relay ended with (:meth:`GrpcCapture.end_writes`)."""
        return self.gc.end_writes(
            log,
            self.outcome,
            code=self.code,
            details=self.details,
            initial=self.initial,
            trailers=self.trailers,
            error=self.error,
            also=also,
        )

    async def run(self, call: Any, first_byte: float, read: float) -> None:
        with anyio.fail_after(first_byte):
            self.initial = await call.initial_metadata()
        self.gc.head(self.initial)
        self.live.set_head(self.initial)
        if self.gc.streaming:
            await self._stream(call, first_byte, read)
        else:
            with anyio.fail_after(first_byte):
                raw = await call
            self.received = 1
            await self._commit([raw])
        code = await call.code()
        await self.agentgrpc_status(code.value[0], await call.details() or "", None, await call.trailing_metadata())

    async def _stream(self, call: Any, first_byte: float, read: float) -> None:
        """Read and commit apart: the messages that arrive while a batch commits form the next.

        Per message the reader (:meth:`_read_all`) only reads, counts and appends; the timeouts are
        one timer (:meth:`_watch`), not a deadline moved at each read (a timer handle made and
        cancelled per message); the first batch commits at once (the first message's latency), every
        later one off the event loop (``GroupCommitWriter.run(inline=False)``), so the loop reads the
        next batch while the last one's fsync runs."""
        read_ahead = _ReadAhead()
        scope = anyio.CancelScope()  # the reader's: the watch cancels it when a timeout passes
        committed = 0
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read_all, call, scope, read_ahead)
                tg.start_soon(self._watch, scope, first_byte, read)
                pending = read_ahead.raws
                while True:
                    if not pending:
                        if read_ahead.ended:
                            break
                        await read_ahead.wait()
                        continue
                    if committed:  # the messages already readable join this batch (the first goes at once)
                        await _drain(pending)
                    batch = pending[:]
                    pending.clear()
                    try:
                        await self._commit(batch, inline=not committed)
                    except BaseException:
                        tg.cancel_scope.cancel()
                        call.cancel()
                        raise
                    committed += len(batch)
                tg.cancel_scope.cancel()  # the watch
        except BaseExceptionGroup as group:  # the task group wraps what failed: the caller names the cause
            raise first_cause(group) from None
        if read_ahead.ended and read_ahead.ended[0] is not None:
            raise read_ahead.ended[0]

    async def _read_all(self, call: Any, scope: anyio.CancelScope, read_ahead: _ReadAhead) -> None:
        """The upstream's messages onto ``read_ahead`` until its end, an error or a timeout (then
        TimeoutError, as ``fail_after`` raises it: the caller names the timeout)."""
        import grpc

        eof = grpc.aio.EOF
        pending = read_ahead.raws
        window = self.live.window
        clock = time.monotonic
        error: BaseException | None = None
        self.last_read = clock()
        try:
            with scope:
                while True:
                    if window.held + self.read_bytes - self.published > window.limit:
                        self.last_read = math.inf  # the clients (or the log) are behind: no timeout of ours
                        await self._room()
                        self.last_read = clock()
                    raw = await call.read()
                    if raw is eof:
                        return
                    self.last_read = clock()
                    self.received += 1
                    self.read_bytes += len(raw)
                    pending.append(raw)
                    if read_ahead.asleep:
                        read_ahead.poke()
            if scope.cancelled_caught and self.timed_out:
                raise TimeoutError
        except BaseException as exc:
            error = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            read_ahead.ended.append(error)
            read_ahead.poke()

    async def _watch(self, reader: anyio.CancelScope, first_byte: float, read: float) -> None:
        """``--first-byte-timeout`` until the first message, ``--read-timeout`` from each message to
        the next: wakes when the limit from the last read would pass, and sleeps on when a message
        came meanwhile (none while the reader waits for room: :attr:`last_read` is then infinite)."""
        clock = time.monotonic
        while True:
            limit = read if self.received else first_byte
            left = self.last_read + limit - clock()
            if left > 0:  # at most ``read`` at a time: the first message shortens the limit while it sleeps
                await anyio.sleep(min(left, read))
                continue
            self.timed_out = True
            reader.cancel()
            return

    async def _room(self) -> None:
        """Back-pressure: wait for the clients (and the log) to catch up; note the clients dropped."""
        dropped = await self.live.make_room(lambda: self.read_bytes - self.published)
        if dropped and self.too_slow is not None:
            await self.too_slow(self.gc, dropped)

    async def _commit(self, raws: list[bytes], *, inline: bool = True) -> None:
        """Write-ahead: the batch's rows durable, then the exact bytes published (a config the
        agent echoes with the push receiver's URL: the client's webhook, in both). ``inline``: the
        commit may run on the event loop (:meth:`store.GroupCommitWriter.run`)."""
        if self.restored is not None:
            raws = [self.restored(r) for r in raws]
        events = self.gc.message_events(raws)
        if events:
            assert self.writer is not None and self.log is not None
            await self.writer.run(self.gc.commit_writes(self.log, events), inline=inline)
        self.published += sum(map(len, raws))
        self.live.publish(raws)

    async def agentgrpc_status(self, code: int, details: str, initial: Any, trailers: Any) -> None:
        """The agent's own status: an error item in the log (write-ahead) for a non-OK one."""
        self.code, self.details, self.trailers = code, details, tuple(trailers or ())
        if initial is not None and not self.initial:
            self.initial = initial
            self.gc.head(initial)
            if self.live.head is None:
                self.live.set_head(initial)
        self.outcome = outcome_of(code, self.gc.streaming, self.received)
        if code != OK:
            self.error = f"gRPC status {grpc_wire.status_name(code)}: {details}"
            event = self.gc.status_event(code, details, self.trailers)
            if event is not None and self.writer is not None and self.log is not None and self.gc.method is not None:
                await self.writer.run(self.gc.commit_writes(self.log, [event]))

    def ours(self, code: int, outcome: Any, why: str) -> None:
        """A status of the proxy's own (a timeout, the log, an unreachable agent): told to the
        client, on the row, not an item of the agent's."""
        self.code, self.details, self.outcome, self.error = code, why, outcome, why


class _ReadAhead:
    """The messages read and not yet committed, between a relay's reader and its committer."""

    __slots__ = ("raws", "asleep", "ended", "_wake")

    def __init__(self) -> None:
        self.raws: list[bytes] = []
        self.asleep = False  # the committer waits for messages: the reader wakes it
        self.ended: list[BaseException | None] = []  # the reader's end: [None], or [its error]
        self._wake = anyio.Event()

    async def wait(self) -> None:
        self.asleep = True
        await self._wake.wait()
        self._wake = anyio.Event()

    def poke(self) -> None:
        self.asleep = False
        self._wake.set()


def first_cause(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first error a task group's failure holds (nested groups opened), a cancellation only when
    nothing else failed: what a row and a client are told, never "unhandled errors in a TaskGroup"."""
    leaves: list[BaseException] = []
    todo: list[BaseException] = [group]
    while todo:
        exc = todo.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            todo[:0] = exc.exceptions
        else:
            leaves.append(exc)
    cancelled = anyio.get_cancelled_exc_class()
    return next((e for e in leaves if not isinstance(e, cancelled)), leaves[0] if leaves else group)


async def _drain(pending: list[bytes], rounds: int = 64) -> None:
    """Let the reader take what gRPC has buffered already: a few turns of the loop while
    ``pending`` still grows. Each read is one message (an SSE chunk brings many), and a commit of a
    small batch runs on the loop (store.GroupCommitWriter's inline batch), so without this every
    message of a fast stream was a commit of its own."""
    for _ in range(rounds):
        before = len(pending)
        await anyio.lowlevel.checkpoint()
        if len(pending) == before:
            return


def _key(metadata: Any, m: grpc_wire.Method | None, request_json: bytes | None) -> str | None:
    """``hdr:<idempotency-key>`` or ``msg:<messageId>`` for a sending call; None otherwise."""
    if m is None or m.operation not in ("send", "stream") or request_json is None:
        return None
    for k, v in metadata:
        if k == "idempotency-key" and isinstance(v, str) and v.strip():
            return "hdr:" + v.strip()
    try:
        doc = msgspec.json.decode(request_json)
    except msgspec.DecodeError:
        return None
    msg = doc.get("message") if isinstance(doc, dict) else None
    mid = msg.get("messageId") if isinstance(msg, dict) else None
    return f"msg:{mid}" if isinstance(mid, str) and mid else None


def _unwrapped(payload: bytes) -> bytes | tuple[int, str]:
    """A recorded answer as the bare message JSON (a JSON-RPC envelope's ``result``), or the
    status of a recorded error."""
    try:
        doc = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return payload
    if not isinstance(doc, dict):
        return payload
    error = doc.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        if doc.get("jsonrpc") is not None or not isinstance(error.get("status"), str):
            code = 2  # a JSON-RPC error code is not a gRPC one
        return grpc_wire.status_code(code if isinstance(code, int) else 2), str(error.get("message") or "")
    if "result" in doc:
        return msgspec.json.encode(doc["result"])
    return payload


class _Handler:
    """Every path: A2A's unary and server-streaming methods by their cardinality, the rest generic."""

    def __init__(self, proxy: GrpcProxy) -> None:
        self.proxy = proxy

    def service(self, details: Any) -> Any:
        grpc = self.proxy.grpc
        path: str = details.method
        m = grpc_wire.method(path)
        proxy = self.proxy
        if m is None:

            async def generic(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
                async for raw in proxy.generic(path, requests, context):
                    yield raw

            return grpc.stream_stream_rpc_method_handler(generic)
        if m.streaming:  # the call itself: grpc.aio takes a partial of an async generator function as one
            return grpc.unary_stream_rpc_method_handler(functools.partial(proxy.call, path))

        async def unary(request: bytes, context: Any) -> bytes | None:
            out = None
            async for raw in proxy.call(path, request, context):
                out = raw
            return out

        return grpc.unary_unary_rpc_method_handler(unary)


def grpc_target(url: str) -> str:
    """A card's gRPC interface URL as a channel target: ``HOST:PORT`` (a scheme, a path dropped)."""
    rest = url.partition("://")[2] or url
    return rest.split("/", 1)[0]


def attach(app: Any, core: Proxy, upstream: str, host: str, port: int) -> GrpcProxy:
    """Run a gRPC proxy beside the HTTP proxy ``core`` (same store, writer, config): started and
    stopped with ``app``'s lifespan; the card ``core`` serves names it for the gRPC interface."""
    proxy = GrpcProxy(core, upstream)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[None]:
        async with inner(app_), proxy.serving(host, port) as bound:
            shown = f"[{host}]" if ":" in host else host
            core.grpc_address = f"{shown}:{bound}"
            print(f"a2a-tape proxy: gRPC on {core.grpc_address} -> {upstream}", file=sys.stderr, flush=True)
            yield

    app.router.lifespan_context = lifespan
    return proxy
