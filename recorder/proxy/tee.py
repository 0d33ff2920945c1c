"""The proxy's relay of an SSE answer, write-ahead: each item appended to the log, then published."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import cast

import httpx

from a2a_tape import store
from a2a_tape.capture.sending import Capture, body_chunks
from a2a_tape.recorder import client as a2a
from a2a_tape.recorder.proxy.relay import Cut, Live
from a2a_tape.store import GroupCommitWriter
from a2a_tape.store.writer import Batcher
from a2a_tape.wire.sse_reader import SseItem


async def tee(
    resp: httpx.Response,
    live: Live,
    cap: Capture,
    writer: GroupCommitWriter,
    notes: Callable[[Capture], Awaitable[None]],
    too_slow: Callable[[Capture, int], Awaitable[None]] | None = None,
) -> None:
    """Parse the upstream SSE with the capture core, append each item, then publish its exact bytes.

    The capture steps every path runs, with the proxy's ends: the bytes come from the upstream's
    response, the items go to :class:`recorder.proxy.relay.Live` (every client reading it).
    Reading the socket and committing are the two sides of a :class:`store.writer.Batcher`: the
    items that arrive while a commit is on its way to disk form the next batch (one fsync per
    batch, not per item), and nothing is published before its batch is durable. Each item is
    published with its exact bytes (``raw``: ``id``/``retry`` fields, comments, a BOM, the agent's
    line ends), so the client reads what the agent sent; a last item cut by the close is kept.
    Either side's failure stops both and is raised here as it is (the reader's once the items it
    had read are in). ``notes`` appends the capture core's redaction notes.

    The reader reads on only while the clients hold at most the stream's buffer unread
    (:meth:`recorder.proxy.relay.Live.make_room`): a slow client slows the agent down (back-pressure
    through the sockets), a client that stays that far behind past its patience is dropped and
    ``too_slow`` notes it, and the rest is read and recorded. A fast client never waits."""
    log = cast("store.RecordingStore", writer.store)

    async def commit(batch: list[SseItem], arrived: list[float]) -> None:
        # redacted payloads, task ids learnt, comments skipped; a plain text chunk is read with the
        # narrow decoder (the decoded items are not looked at here)
        events, _ = cap.events(batch, arrived, peek=True)
        if events:
            await writer.run(cap.commit_writes(log, events))
        await notes(cap)
        published[0] += sum(len(it.raw) for it in batch)
        live.publish([(it.raw, None if it.comment else it.data, it.event) for it in batch])

    batches: Batcher[SseItem] = Batcher(commit, ahead=4096)  # 4096 items behind the disk: stop reading a moment
    published = [0]  # bytes of items handed to the clients
    read_bytes = 0  # bytes of items read (published once in the log)
    limit = live.window.limit

    def in_flight() -> int:
        return read_bytes - published[0]

    async def read() -> None:
        nonlocal read_bytes
        pending = batches.pending
        try:
            async for chunk in body_chunks(resp):
                items = cap.feed(chunk)
                if items:
                    pending += items
                    read_bytes += sum(len(it.raw) for it in items)
                    if batches.added(len(items)):
                        await batches.room()
                    if live.window.held + in_flight() > limit:  # the clients (or the log) are behind
                        dropped = await live.make_room(in_flight)
                        if dropped and too_slow is not None:
                            await too_slow(cap, dropped)
            rest = cap.close()
            tail = cap.parser.tail if cap.parser is not None else b""
            if tail:  # bytes after the last item that make none (stray blank lines): passed on
                rest.append(SseItem(b"", None, True, raw=tail))
            pending += rest
            batches.added(len(rest))
        except (httpx.ReadTimeout, httpx.DecodingError):
            raise
        except httpx.HTTPError as exc:
            raise Cut(f"the upstream agent cut its stream: {a2a.describe_http_error(exc, '')}") from None

    await batches.drive(read)
