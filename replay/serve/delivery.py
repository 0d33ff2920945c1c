"""How an answer goes out: a recorded answer with this request's id, items as frames in the asked
dialect, a whole body or an SSE stream under the request's faults (``delay``, ``drop-after``,
``stall-after``, ``error-after``, ``duplicate``) and the replay's timing. The engine
(:mod:`replay.serve.engine`) decides what to answer; this module sends it.

Without a fault or a wait, frames go in whole batches (:func:`_batched`); otherwise each frame
waits its recorded gap (scaled) and the request's delay (:func:`_paced`), and the playback of the
task (:class:`replay.serve.playback.Playback`) is told how many items went out.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from itertools import islice
from typing import Any

import anyio
import msgspec

from a2a_tape.replay.serve import rpc
from a2a_tape.replay.serve.convert import encode_item
from a2a_tape.replay.serve.faults import NO_FAULTS, Faults
from a2a_tape.replay.serve.library import Episode, Served
from a2a_tape.replay.serve.playback import Playback
from a2a_tape.replay.serve.reply import SSE_HEADERS, Reply, error_reply
from a2a_tape.store.methods import JSONRPC
from a2a_tape.wire.sse_frames import comment, frame

_BATCH = 256  # frames joined into one body chunk when nothing waits between them


def recorded_answer(ep: Episode, rpc_id: Any, scale: float) -> Reply:
    """A recorded answer as the agent gave it, with this request's JSON-RPC id."""
    ex = ep.exchange
    ctype = ex.content_type or "application/json"
    status = ex.status or 200
    items = ep.served
    if items and ep.binding != JSONRPC and not ctype.startswith("text/event-stream"):
        # its items are served in the JSON-RPC form (an error's status is the binding's to set)
        ctype, status = "application/json", 200
    if items and ctype.startswith("text/event-stream"):
        frames = frames_of(ep.iter_served(), ep.dialect, ep.dialect, rpc_id)
        reply = stream_reply(frames, NO_FAULTS, scale, rpc_id, None, None)
        return msgspec.structs.replace(reply, status=status, content_type=ctype)
    if items:
        return Reply(status=status, content_type=ctype, body=items[-1].payload(rpc.encode_id(rpc_id)))
    return Reply(status=status, content_type=ctype, body=ex.response_body or b"")


def frames_of(items: Iterable[Served], recorded: str, dialect: str, rpc_id: Any) -> Iterator[tuple[bytes, float]]:
    """(SSE frame, recorded gap) per item, rendered as the stream goes (no copy of a long recording)."""
    if recorded == dialect or recorded not in ("0.3", "1.0"):
        enc = rpc.encode_id(rpc_id)
        return ((s.frame(enc), s.gap) for s in items)
    return ((frame(payload_of(s, recorded, dialect, rpc_id), s.sse_event), s.gap) for s in items)


def payload_of(s: Served, recorded: str, dialect: str, rpc_id: Any) -> bytes:
    if recorded == dialect or recorded not in ("0.3", "1.0"):
        return s.payload(rpc.encode_id(rpc_id))
    converted = encode_item(s.recorded, dialect, rpc_id)
    return converted if converted is not None else s.payload(rpc.encode_id(rpc_id))


def whole(reply: Reply, faults: Faults, rpc_id: Any) -> Reply:
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

    async def gen() -> AsyncGenerator[bytes, None]:
        if delay:
            await anyio.sleep(delay)
        if drop:
            return
        if stall:
            await anyio.sleep_forever()
        yield body

    return Reply(status=reply.status, content_type=reply.content_type, stream=gen(), headers=reply.headers)


def stream_batches(batches: Iterable[list[bytes]], pb: Playback | None) -> Reply:
    """The fast way: recorded frames in batches, no timing, no fault."""

    async def gen() -> AsyncGenerator[bytes, None]:
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


def stream_reply(
    frames: Iterable[tuple[bytes, float]],
    faults: Faults,
    scale: float,
    rpc_id: Any,
    on_sent: Callable[[int], None] | None,
    pb: Playback | None,
) -> Reply:
    """The frames as an SSE answer: whole batches when nothing waits or fails between them
    (:func:`_batched`), else paced by the timing and the request's faults (:func:`_paced`)."""
    if scale == 0 and not faults.any:
        stream = _batched(frames, on_sent, pb)
    else:
        stream = _paced(frames, faults, scale, rpc_id, _Outbox(on_sent), pb)
    return Reply(content_type="text/event-stream; charset=utf-8", stream=stream, headers=dict(SSE_HEADERS))


async def _paced(
    frames: Iterable[tuple[bytes, float]], faults: Faults, scale: float, rpc_id: Any, out: _Outbox, pb: Playback | None
) -> AsyncGenerator[bytes, None]:
    """Each frame after its recorded gap (scaled) and the request's delay, until a fault ends
    the stream: ``drop-after`` (the connection ends), ``error-after`` (a -32603 error event,
    at once or after the last frame), ``stall-after`` (then only keep-alive comments);
    ``duplicate=N`` sends the Nth frame twice. Frames with no wait between them go out together."""
    errored = False
    for f, gap in frames:
        stop = _stop_before(faults, out.sent, pb)
        if stop == "error":
            out.buf.append(_fault_error(faults, rpc_id))
            errored = True
        if stop is not None:
            break
        wait = gap * scale + faults.delay_ms / 1000.0
        if wait > 0:
            if out.buf:
                yield out.flush()
            await anyio.sleep(wait)
            if pb is not None and pb.cancelled:
                break
        out.add(f, twice=faults.duplicate == out.sent + 1)
        if len(out.buf) >= _BATCH:
            yield out.flush()
    else:
        if faults.error_after is not None and out.sent >= faults.error_after:
            out.buf.append(_fault_error(faults, rpc_id))  # (a stall after it still stalls)
    if out.buf or out.on_sent is not None:
        chunk = out.flush()
        if chunk:
            yield chunk
    if faults.stall_after is not None and out.sent >= faults.stall_after and not errored:
        while True:  # keep the connection, send nothing but keep-alive comments
            await anyio.sleep(15)
            yield comment(f"ping - {time.strftime('%Y-%m-%d %H:%M:%S')}")


def _fault_error(faults: Faults, rpc_id: Any) -> bytes:
    body = rpc.error_body(rpc.INTERNAL_ERROR, f"a2a-tape fault: error-after={faults.error_after}", rpc_id)
    return frame(body, "error")


async def _batched(
    frames: Iterable[tuple[bytes, float]], on_sent: Callable[[int], None] | None, pb: Playback | None
) -> AsyncGenerator[bytes, None]:
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


class _Outbox:
    """Frames waiting to go out as one chunk, and how many have been sent (told to ``on_sent``
    at each chunk: the playback releases that many items)."""

    def __init__(self, on_sent: Callable[[int], None] | None) -> None:
        self.on_sent = on_sent
        self.buf: list[bytes] = []
        self.sent = 0

    def add(self, frame: bytes, *, twice: bool = False) -> None:
        self.buf.append(frame)
        self.sent += 1
        if twice:
            self.buf.append(frame)

    def flush(self) -> bytes:
        if self.on_sent is not None:
            self.on_sent(self.sent)
        chunk = b"".join(self.buf)
        self.buf.clear()
        return chunk


def _stop_before(faults: Faults, sent: int, pb: Playback | None) -> str | None:
    """Why a paced stream sends no more frames after ``sent`` of them: ``drop``, ``stall``,
    ``error`` (the request's faults, in that order) or ``cancelled``; None: it goes on."""
    if faults.drop_after is not None and sent >= faults.drop_after:
        return "drop"
    if faults.stall_after is not None and sent >= faults.stall_after:
        return "stall"
    if faults.error_after is not None and sent >= faults.error_after:
        return "error"
    if pb is not None and pb.cancelled:
        return "cancelled"
    return None
