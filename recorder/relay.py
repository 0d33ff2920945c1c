"""A relayed response of the proxy, for every client reading it.

The first client reads each item's exact bytes as the agent sent them (``raw`` from the capture
core: ``id``/``retry`` fields, comments, line ends kept); a duplicate answered to another
JSON-RPC id, or an answer from the log, gets the items re-framed.

:class:`Live` holds what the upstream said so far (an SSE stream's items, or a JSON body) and
wakes its readers when more comes. The first client and any duplicate attached to it (the same
idempotency key) follow the same one, each answered with its own JSON-RPC id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio

from a2a_tape.replay import sse

_JSON = "application/json"


class Live:
    """One relayed response: what the upstream said so far, for every client reading it."""

    def __init__(
        self, exchange_id: int | None, req_hash: str | None, rpc_id: bytes | None, *, single_reader: bool = False
    ) -> None:
        self.exchange_id = exchange_id
        # no idempotency key: nobody can attach later, so items its one reader has taken (or
        # that nobody will read, once that reader is gone) are not kept: memory stays flat on
        # a long stream. With a key, the items stay for duplicates attaching mid-stream.
        self.single_reader = single_reader
        self._reader_gone = False
        self.req_hash = req_hash
        self.rpc_id = rpc_id  # the id the items carry (None: rewrite for everyone)
        self.ready = anyio.Event()
        self.finished = anyio.Event()
        self.mode = "body"  # "sse" or "body"
        self.status = 200
        self.content_type = _JSON
        self.body = b""
        # (sse event name, data, is comment, the exact bytes received or None for an item from the log)
        self.items: list[tuple[str | None, bytes, bool, bytes | None]] = []
        self.done = False
        self._changed = anyio.Event()

    def start_sse(self, status: int, content_type: str) -> None:
        self.mode, self.status, self.content_type = "sse", status, content_type
        self.ready.set()

    def set_body(self, status: int, content_type: str, body: bytes) -> None:
        self.mode, self.status, self.content_type, self.body = "body", status, content_type, body
        self.ready.set()

    def publish(self, items: list[tuple[str | None, bytes, bool, bytes | None]]) -> None:
        if not self._reader_gone:
            self.items.extend(items)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def finish(self) -> None:
        self.done = True
        self.ready.set()
        self.finished.set()
        self._changed.set()

    async def follow(self, rpc_id: bytes | None) -> AsyncIterator[bytes]:
        """The SSE bytes for one client, as soon as each item is published (``rpc_id`` None: the
        HTTP+JSON binding, which has no JSON-RPC id to answer to)."""
        rewrite = rpc_id is not None and (self.rpc_id is None or self.rpc_id != rpc_id)
        i = 0
        try:
            while True:
                items = self.items
                if i < len(items):
                    chunk = b"".join(
                        _render(ev, data, comment, raw, rpc_id if rewrite else None)
                        for ev, data, comment, raw in items[i:]
                    )
                    if self.single_reader:
                        self.items, i = [], 0
                    else:
                        i = len(items)
                    yield chunk
                elif self.done:
                    return
                else:
                    await self._changed.wait()
        finally:
            if self.single_reader:
                self._reader_gone, self.items = True, []


def _render(event: str | None, data: bytes, is_comment: bool, raw: bytes | None, rpc_id: bytes | None) -> bytes:
    """One item as SSE bytes: the exact bytes the agent sent (``raw``) when the client reads
    them as they were; re-framed when answered to another ``rpc_id`` (JSON bytes) or when the
    item comes from the log."""
    if raw is not None and rpc_id is None:
        return raw
    if is_comment:
        return b": " + data + b"\r\n\r\n" if data else b""
    return sse.frame(data if rpc_id is None else sse.split_id(data).with_id(rpc_id), event)
