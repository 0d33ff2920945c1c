"""The proxy's relay of an SSE answer, write-ahead: each item appended to the log, then published."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx

from a2a_tape.store import GroupCommitWriter
from a2a_tape.store.sse import SseItem

from .. import client as a2a
from ..sending import Capture, DecodingError, body_chunks
from .relay import Cut, Live


async def tee(
    resp: httpx.Response,
    live: Live,
    cap: Capture,
    writer: GroupCommitWriter,
    notes: Callable[[Capture], Awaitable[None]],
) -> None:
    """Parse the upstream SSE with the capture core, append each item, then publish its exact bytes.

    Reading the socket and committing are two tasks sharing a plain list: the reader never
    yields to the loop for an item it already has, so the items that arrive while a commit
    is on its way to disk form the next batch (one thread hop and one fsync per batch, not
    per item). Nothing is published before its batch is durable. Each item is published
    with its exact bytes (``raw``: ``id``/``retry`` fields, comments, a BOM, the agent's line
    ends), so the client reads what the agent sent; a last item cut by the close is kept.
    Either side's failure stops both and is raised here as it is (the reader's once the
    items it had read are in). ``notes`` appends the capture core's redaction notes."""
    pending: list[SseItem] = []
    state: dict[str, Any] = {"wake": anyio.Event(), "drained": anyio.Event(), "eof": False, "error": None}

    async def read() -> None:
        try:
            async for chunk in body_chunks(resp):
                items = cap.feed(chunk)
                if items:
                    pending.extend(items)
                    state["wake"].set()
                    if len(pending) >= 4096:  # the disk is behind: stop reading a moment
                        state["drained"] = anyio.Event()
                        await state["drained"].wait()
            pending.extend(cap.close())
            tail = cap.parser.tail if cap.parser is not None else b""
            if tail:  # bytes after the last item that make none (stray blank lines): passed on
                pending.append(SseItem(b"", None, True, raw=tail))
        except (httpx.ReadTimeout, DecodingError, httpx.DecodingError) as exc:
            state["error"] = exc
        except httpx.HTTPError as exc:
            state["error"] = Cut(f"the upstream agent cut its stream: {a2a.describe_http_error(exc, '')}")
        except Exception as exc:  # noqa: BLE001 - raised by _tee once the items read are in
            state["error"] = exc
        finally:
            state["eof"] = True
            state["wake"].set()

    async def commit() -> None:
        while True:
            if not pending:
                if state["eof"]:
                    return
                await state["wake"].wait()
                state["wake"] = anyio.Event()
                continue
            batch = pending[:]
            pending.clear()
            state["drained"].set()
            # redacted payloads, task ids learnt, comments skipped; a plain text chunk is read
            # with the narrow decoder (the decoded items are not looked at here)
            events, _ = cap.events(batch, peek=True)
            try:
                if events:
                    await writer.append_many(events)
                await notes(cap)
            except Exception as exc:  # noqa: BLE001 - nothing of this batch is published
                state["error"] = exc
                tg.cancel_scope.cancel()
                return
            live.publish([(it.raw, None if it.comment else it.data, it.event) for it in batch])

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        await commit()
    if state["error"] is not None:
        raise state["error"]
