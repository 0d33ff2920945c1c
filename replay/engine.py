"""The replay core: one request in, one reply out, shared by the HTTP server and the transport.

:class:`ReplayEngine` answers as the recorded agent would: the agent card, sends and streaming
sends (matched to a recorded episode), GetTask, SubscribeToTask / ``tasks/resubscribe``,
CancelTask and ListTasks, in the dialect of each request. It keeps a *playback* per task it
has served: how many of the episode's items the agent has "produced" so far, so that a stream
dropped by a fault leaves the task going on, and GetTask or a resubscribe gives the rest.

Timing ``instant`` holds the rest of a dropped stream until the client comes back (a
resubscribe streams it; a GetTask finds the task finished); ``real`` or a factor lets it go on
along the recorded gaps. What it answers is a :class:`replay.reply.Reply`; in the recording
modes, a request the recordings do not answer goes upstream through :mod:`replay.forward`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from itertools import islice
from typing import Any
from urllib.parse import parse_qs

import anyio
import msgspec

from a2a_tape.store import TERMINAL_STATES, Item, MessageItem
from a2a_tape.store.redact import Redactor
from a2a_tape.store.wire import WireTask

from . import rpc
from .convert import encode_item, encode_snapshot_item, encode_task, fold_task, wire_task, with_state
from .faults import FAULT_HEADER, FAULT_QUERY, NO_FAULTS, FaultError, Faults, parse_faults
from .forward import Forwarder
from .library import Episode, Library, Served, message_text
from .matching import Matcher
from .reply import SSE_HEADERS, Reply, error_reply, json_reply
from .sse import comment, frame
from .views import RecordedTask

RECORD_MODES: tuple[str, ...] = ("none", "once", "new_episodes", "all")
_BATCH = 256  # frames joined into one body chunk when nothing waits between them


def parse_timing(value: str | float) -> float:
    """``instant`` -> 0 (no waits), ``real`` -> 1, a factor F -> 1/F (``10``: ten times faster)."""
    if isinstance(value, (int, float)):
        factor = float(value)
    else:
        v = value.strip().lower()
        if v == "instant":
            return 0.0
        if v == "real":
            return 1.0
        try:
            factor = float(v.rstrip("x"))
        except ValueError:
            raise ValueError(f"timing {value!r}: use instant, real, or a speed-up factor such as 10") from None
    if not factor > 0 or factor == float("inf"):
        raise ValueError(f"timing {value!r}: the factor must be a positive number")
    return 1.0 / factor


def _says_v1(headers: Mapping[str, str]) -> bool:
    """Whether the request names protocol 1.0 (``A2A-Version: 1.0``; no header means 0.3)."""
    for k, v in headers.items():
        if k.lower() == "a2a-version":
            return v.strip().split(".")[0] == "1"
    return False


class Playback:
    """How far the agent has got with one task of a served episode."""

    def __init__(self, task_id: str, episode: Episode, scale: float) -> None:
        self.task_id = task_id
        self.episode = episode
        self.released = 0
        self.started = time.monotonic()
        self.scale = scale
        self.cancelled = False
        self.finished = False  # a stream sent every item (no need to count them)
        self._offsets: list[float] | None = None

    @property
    def items(self) -> list[Served]:
        """The episode's items (read in full only when asked: a stream reads them as it goes)."""
        return self.episode.served

    @property
    def offsets(self) -> list[float]:
        """When each item is due, from the start of the stream, on the replay clock."""
        if self._offsets is None:
            offsets, t = [], 0.0
            for s in self.items:
                t += s.gap * self.scale
                offsets.append(t)
            self._offsets = offsets
        return self._offsets

    def release(self, n: int) -> None:
        if n > self.released:
            self.released = n

    @property
    def done(self) -> bool:
        return self.finished or self.released >= len(self.items)

    def advance(self) -> None:
        """The task went on while nobody watched: release what the clock says is out."""
        if self.cancelled:
            return
        if self.scale == 0:
            self.released = len(self.items)
            return
        elapsed = time.monotonic() - self.started
        n = self.released
        while n < len(self.items) and self.offsets[n] <= elapsed:
            n += 1
        self.released = n


class ReplayEngine:
    """Recordings answering as an A2A agent. See the module docstring."""

    def __init__(
        self,
        library: Library,
        *,
        timing: str | float = "instant",
        faults: Faults | str | None = None,
        match: str = "method-text",
        record_mode: str = "none",
        upstream: str | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        if record_mode not in RECORD_MODES:
            raise ValueError(f"unknown record mode {record_mode!r} (use one of: {', '.join(RECORD_MODES)})")
        if record_mode in ("new_episodes", "all") and not upstream:
            raise ValueError(f"record mode {record_mode} needs an upstream agent URL (--upstream)")
        self.library = library
        self.scale = parse_timing(timing)
        self.faults = parse_faults(faults) if isinstance(faults, str) else (faults or NO_FAULTS)
        self.matcher = Matcher(library.episodes, match)
        self.record_mode = record_mode
        self.upstream = upstream.rstrip("/") if upstream else None
        self.record_all = record_mode == "all"
        # once: a recording that was empty at the start records what does not match (vcrpy's "once")
        self.record_new = record_mode == "new_episodes" or (
            record_mode == "once" and not library.episodes and bool(upstream)
        )
        self.playbacks: dict[str, Playback] = {}
        self.cancelled: set[str] = set()
        self.unmatched: list[str] = []  # one line per request nothing answered (the plugin reports them)
        # what the recording modes store is redacted as every other path does (one Redactor)
        self.forwarder = Forwarder(library, upstream, redactor) if upstream else None

    # ------------------------------------------------------------------ entry point

    async def handle(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes, base_url: str
    ) -> Reply:
        """Answer one HTTP request. Never raises: a failure of ours is a JSON-RPC -32603 naming it."""
        try:
            return await self._handle(method, path, query, headers, body, base_url)
        except Exception as exc:  # noqa: BLE001 - the client gets a readable error, the server lives on
            return error_reply(rpc.INTERNAL_ERROR, f"a2a-tape replay: internal error: {type(exc).__name__}: {exc}")

    async def _handle(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes, base_url: str
    ) -> Reply:
        if method == "GET":
            if path.rstrip("/").endswith(("/.well-known/agent-card.json", "/.well-known/agent.json")):
                return json_reply(rpc.card_for(base_url, self.library.card))
            return json_reply(rpc.error_body(rpc.METHOD_NOT_FOUND, f"no such resource: {path}"), status=404)
        if method != "POST":
            return json_reply(rpc.error_body(rpc.INVALID_REQUEST, f"method {method} not allowed"), status=405)
        try:
            req = rpc.parse_request(body)
        except rpc.BadRequest as exc:
            return error_reply(exc.code, str(exc), exc.rpc_id)
        known = rpc.METHODS.get(req.method or "")
        if known is None:
            return error_reply(rpc.METHOD_NOT_FOUND, f"Method not found: {req.method}", req.id)
        operation, dialect = known
        if dialect == "1.0" and not _says_v1(headers):
            # as an a2a-sdk 1.3.0 agent answers it: a client that forgets the header fails here
            # as it would against the agent, not only later in production
            return error_reply(
                rpc.VERSION_NOT_SUPPORTED,
                "A2A version '0.3' is not supported by this handler. Expected version '1.0'.",
                req.id,
            )
        try:
            faults = self._request_faults(query, headers)
        except FaultError as exc:
            return error_reply(rpc.INVALID_PARAMS, f"a2a-tape: {exc}", req.id)
        if self.record_all:
            return await self._forwarded(req, operation, dialect, path, headers, body)
        if operation in rpc.SEND_OPERATIONS:
            return await self._send(req, operation, dialect, faults, path, headers, body)
        task_id = req.params.id if req.params else None
        if operation == "list":
            return self._list(req)
        if not task_id:
            return error_reply(rpc.INVALID_PARAMS, "Invalid params: a task id is required", req.id)
        if operation == "get":
            return self._get(req, task_id, dialect)
        if operation == "cancel":
            return self._cancel(req, task_id, dialect)
        return self._subscribe(req, task_id, dialect, faults)

    def _request_faults(self, query: str, headers: Mapping[str, str]) -> Faults:
        specs = [v for v in parse_qs(query).get(FAULT_QUERY, [])]
        h = headers.get(FAULT_HEADER.lower()) or headers.get(FAULT_HEADER)
        if h:
            specs.append(h)
        return parse_faults(*specs) if specs else self.faults

    # ------------------------------------------------------------------ sends

    async def _send(
        self,
        req: rpc.RpcRequest,
        operation: str,
        dialect: str,
        faults: Faults,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
    ) -> Reply:
        ep = self.matcher.match(req, operation)
        if ep is None:
            if self.record_new:
                return await self._forwarded(req, operation, dialect, path, headers, body)
            return self._no_match(req, operation)
        task_id = ep.task_id
        pb = None
        if task_id:
            pb = Playback(task_id, ep, self.scale)
            self.playbacks[task_id] = pb
            self.cancelled.discard(task_id)
        recorded_json = (ep.exchange.content_type or "").startswith("application/json")
        if operation == "send" or recorded_json:  # a send, or a stream the agent answered with a JSON body
            items = ep.served
            if pb is not None:
                pb.released = len(items)
            if recorded_json and items:
                return self._whole(json_reply(self._payload(items[-1], ep.dialect, dialect, req.id)), faults, req.id)
            return self._whole(self._send_reply(req, ep, items, dialect), faults, req.id)
        same = ep.dialect == dialect or ep.dialect not in ("0.3", "1.0")
        if same and self.scale == 0 and not faults.any and not ep.loaded:
            return self._stream_batches(ep.iter_frames(rpc.encode_id(req.id)), pb)
        frames = self._frames(ep.iter_served(), ep.dialect, dialect, req.id)
        return self._stream(frames, faults, dialect, req.id, pb.release if pb is not None else None, pb)

    @staticmethod
    def _stream_batches(batches: Iterable[list[bytes]], pb: Playback | None) -> Reply:
        """The fast way: recorded frames in batches, no timing, no fault."""

        async def gen() -> AsyncIterator[bytes]:
            sent = 0
            for batch in batches:
                sent += len(batch)
                if pb is not None:
                    pb.release(sent)
                yield b"".join(batch)
                if pb is not None and pb.cancelled:
                    return
            if pb is not None:
                pb.finished = True

        return Reply(content_type="text/event-stream; charset=utf-8", stream=gen(), headers=dict(SSE_HEADERS))

    def _no_match(self, req: rpc.RpcRequest, operation: str) -> Reply:
        text = message_text(req)
        near = self.matcher.closest(req, operation)
        if near is None:
            hint = f"the recording {self.library.source} has no recorded sends"
        else:
            hint = f"closest recording: {near.describe()}"
        line = (
            f"a2a-tape: no recording matches {req.method} with text {text!r} "
            f"(match {self.matcher.mode}, record mode {self.record_mode}); {hint}"
        )
        self.unmatched.append(line)
        return error_reply(rpc.NO_RECORDING, line, req.id)

    def _frames(self, items: Iterable[Served], recorded: str, dialect: str, rpc_id: Any):
        """(SSE frame, recorded gap) per item, rendered as the stream goes (no copy of a long recording)."""
        if recorded == dialect or recorded not in ("0.3", "1.0"):
            enc = rpc.encode_id(rpc_id)
            return ((s.frame(enc), s.gap) for s in items)
        return ((frame(self._payload(s, recorded, dialect, rpc_id), s.sse_event), s.gap) for s in items)

    def _payload(self, s: Served, recorded: str, dialect: str, rpc_id: Any) -> bytes:
        if recorded == dialect or recorded not in ("0.3", "1.0"):
            return s.payload(rpc.encode_id(rpc_id))
        converted = encode_item(s.recorded, dialect, rpc_id)
        return converted if converted is not None else s.payload(rpc.encode_id(rpc_id))

    def _send_reply(self, req: rpc.RpcRequest, ep: Episode, items: list[Served], dialect: str) -> Reply:
        """A non-streaming send: the recorded body, or the result folded from a recorded stream."""
        if not ep.exchange.streaming and items:
            return json_reply(self._payload(items[-1], ep.dialect, dialect, req.id))
        messages = [s for s in items if isinstance(s.item.body, MessageItem)]
        task_id = ep.task_id
        snap = fold_task(task_id, items) if task_id else None
        if snap is not None:
            return json_reply(encode_item(Item(snap), dialect, req.id) or b"")
        if messages:
            return json_reply(encode_item(messages[-1].recorded, dialect, req.id) or b"")
        errors = [s for s in items if s.item.kind == "error"]
        if errors:
            return json_reply(errors[-1].payload(rpc.encode_id(req.id)))
        if ep.exchange.response_body:
            return json_reply(ep.exchange.response_body)
        return error_reply(rpc.INTERNAL_ERROR, f"a2a-tape: {ep.describe()} recorded no answer", req.id)

    def _whole(self, reply: Reply, faults: Faults, rpc_id: Any) -> Reply:
        """A whole-body answer (one item) under the request's faults: ``delay`` waits before it,
        ``error-after=0`` answers -32603 instead, ``drop-after=0`` ends the response with no body,
        ``stall-after=0`` sends the headers and then nothing (the client's read timeout decides).
        ``duplicate`` and counts above 0 do not apply to one item."""
        if not faults.any:
            return reply
        if faults.error_after == 0:
            reply = error_reply(rpc.INTERNAL_ERROR, "a2a-tape fault: error-after=0", rpc_id)
        drop, stall, delay = faults.drop_after == 0, faults.stall_after == 0, faults.delay_ms / 1000.0
        if not (drop or stall or delay):
            return reply
        body = reply.body

        async def gen() -> AsyncIterator[bytes]:
            if delay:
                await anyio.sleep(delay)
            if drop:
                return
            if stall:
                await anyio.sleep_forever()
            yield body

        return Reply(status=reply.status, content_type=reply.content_type, stream=gen(), headers=reply.headers)

    # ------------------------------------------------------------------ streams

    def _stream(
        self,
        frames: Iterable[tuple[bytes, float]],
        faults: Faults,
        dialect: str,
        rpc_id: Any,
        on_sent: Callable[[int], None] | None,
        pb: Playback | None,
    ) -> Reply:
        scale = self.scale
        delay = faults.delay_ms / 1000.0

        async def fast() -> AsyncIterator[bytes]:
            """No fault, no wait: whole batches of frames per chunk, bookkeeping per batch."""
            it = iter(frames)
            sent = 0
            while True:
                batch = [f for f, _ in islice(it, _BATCH)]
                if not batch:
                    if pb is not None:
                        pb.finished = True
                    return
                sent += len(batch)
                if on_sent is not None:
                    on_sent(sent)
                yield b"".join(batch)
                if pb is not None and pb.cancelled:
                    return

        async def gen() -> AsyncIterator[bytes]:
            buf: list[bytes] = []
            sent = 0
            errored = False

            def flush() -> bytes:
                if on_sent is not None:
                    on_sent(sent)
                chunk = b"".join(buf)
                buf.clear()
                return chunk

            for f, gap in frames:
                if faults.drop_after is not None and sent >= faults.drop_after:
                    break
                if faults.stall_after is not None and sent >= faults.stall_after:
                    break
                if faults.error_after is not None and sent >= faults.error_after:
                    buf.append(self._faulterror_reply(faults, rpc_id))
                    errored = True
                    break
                if pb is not None and pb.cancelled:
                    break
                wait = gap * scale + delay
                if wait > 0:
                    if buf:
                        yield flush()
                    await anyio.sleep(wait)
                    if pb is not None and pb.cancelled:
                        break
                buf.append(f)
                sent += 1
                if faults.duplicate == sent:
                    buf.append(f)
                if len(buf) >= _BATCH:
                    yield flush()
            else:
                if faults.error_after is not None and sent >= faults.error_after and not errored:
                    buf.append(self._faulterror_reply(faults, rpc_id))
            if buf or on_sent is not None:
                chunk = flush()
                if chunk:
                    yield chunk
            if faults.stall_after is not None and sent >= faults.stall_after and not errored:
                while True:  # keep the connection, send nothing but keep-alive comments
                    await anyio.sleep(15)
                    yield comment(f"ping - {time.strftime('%Y-%m-%d %H:%M:%S')}")

        stream = fast() if scale == 0 and not faults.any else gen()
        return Reply(content_type="text/event-stream; charset=utf-8", stream=stream, headers=dict(SSE_HEADERS))

    @staticmethod
    def _faulterror_reply(faults: Faults, rpc_id: Any) -> bytes:
        body = rpc.error_body(rpc.INTERNAL_ERROR, f"a2a-tape fault: error-after={faults.error_after}", rpc_id)
        return frame(body, "error")

    # ------------------------------------------------------------------ tasks

    def _fold(self, task_id: str) -> RecordedTask | None:
        items = [(ev.position, ev) for ev in self.library.store.read_task(task_id) if ev.origin != "local"]
        if not items:
            return None
        pb = self.playbacks.get(task_id)
        if pb is not None and not pb.done:
            first = pb.items[0].position if pb.items else 0
            shown = {s.position for s in pb.items[: pb.released]}
            items = [(p, it) for p, it in items if p < first or p in shown]
        snap = fold_task(task_id, (it for _, it in items))
        if snap is not None and task_id in self.cancelled:
            snap = with_state(snap, "canceled")
        return snap

    def _advance(self, task_id: str) -> None:
        pb = self.playbacks.get(task_id)
        if pb is not None:
            pb.advance()

    def _get(self, req: rpc.RpcRequest, task_id: str, dialect: str) -> Reply:
        self._advance(task_id)
        snap = self._fold(task_id)
        if snap is None:
            return error_reply(rpc.TASK_NOT_FOUND, f"Task not found: {task_id}", req.id)
        hl = req.params.historyLength if req.params else None
        if hl is not None:
            snap = msgspec.structs.replace(snap, history=snap.history[-hl:] if hl > 0 else ())
        return json_reply(encode_task(snap, dialect, req.id))

    def _cancel(self, req: rpc.RpcRequest, task_id: str, dialect: str) -> Reply:
        pb = self.playbacks.get(task_id)
        if pb is not None and self.scale:
            pb.advance()
        snap = self._fold(task_id)
        if snap is None:
            return error_reply(rpc.TASK_NOT_FOUND, f"Task not found: {task_id}", req.id)
        if snap.state in TERMINAL_STATES:
            return error_reply(rpc.TASK_NOT_CANCELABLE, f"Task cannot be canceled: {task_id} is {snap.state}", req.id)
        if pb is not None:
            pb.cancelled = True
        self.cancelled.add(task_id)
        return json_reply(encode_task(with_state(snap, "canceled"), dialect, req.id))

    def _subscribe(self, req: rpc.RpcRequest, task_id: str, dialect: str, faults: Faults) -> Reply:
        pb = self.playbacks.get(task_id)
        if pb is not None and self.scale:
            pb.advance()
        if pb is None or pb.done:
            recorded = next((ep for ep in self.library.subscriptions.get(task_id, ()) if not ep.used), None)
            if recorded is not None and task_id not in self.cancelled:
                # the recording has this resubscribe: answer as the agent did then
                recorded.used += 1
                frames = self._frames(recorded.iter_served(), recorded.dialect, dialect, req.id)
                return self._stream(frames, faults, dialect, req.id, None, None)
        snap = self._fold(task_id)
        if snap is None:
            return error_reply(rpc.TASK_NOT_FOUND, f"Task not found: {task_id}", req.id)
        if snap.state in TERMINAL_STATES:
            body = rpc.error_body(
                rpc.UNSUPPORTED_OPERATION, f"Task {task_id} is in terminal state: {snap.state}", req.id
            )
            if dialect == "1.0":
                return json_reply(body)

            async def one() -> AsyncIterator[bytes]:
                yield frame(body)

            return Reply(content_type="text/event-stream; charset=utf-8", stream=one(), headers=dict(SSE_HEADERS))
        frames: list[tuple[bytes, float]] = [(frame(encode_snapshot_item(snap, dialect, req.id)), 0.0)]
        on_sent: Callable[[int], None] | None = None
        if pb is not None and not pb.done and not pb.cancelled:
            rest = pb.items[pb.released :]
            start = pb.released
            ep_dialect = pb.episode.dialect
            first = True
            for s in rest:
                gap = s.gap
                if first:  # what was due before the client came back is not waited for again
                    gap, first = 0.0, False
                frames.append((frame(self._payload(s, ep_dialect, dialect, req.id), s.sse_event), gap))

            def released(n: int, pb: Playback = pb, start: int = start) -> None:
                pb.release(start + n - 1)  # the first item sent is the snapshot

            on_sent = released

        return self._stream(frames, faults, dialect, req.id, on_sent, pb)

    def _list(self, req: rpc.RpcRequest) -> Reply:
        ctx = req.params.contextId if req.params else None
        tasks: list[WireTask] = []
        for tid in self.library.task_ids():
            snap = self._fold(tid)
            if snap is None or (ctx and snap.context_id != ctx):
                continue
            tasks.append(wire_task(msgspec.structs.replace(snap, artifacts=()), "1.0"))
        size = req.params.pageSize if req.params and req.params.pageSize else None
        return json_reply(rpc.list_tasks_body(req.id, tasks[:size] if size else tasks))

    async def _forwarded(
        self, req: rpc.RpcRequest, operation: str, dialect: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        assert self.forwarder is not None
        return await self.forwarder.forward(req, operation, dialect, path, headers, body)

    @property
    def recorded(self) -> int:
        """Exchanges recorded from upstream so far."""
        return self.forwarder.recorded if self.forwarder is not None else 0
