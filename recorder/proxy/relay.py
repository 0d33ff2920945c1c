"""A relayed response of the proxy, for every client reading it.

:class:`Live` holds what the upstream said so far (the answer's status and headers, then an SSE
stream's items or a whole body) and wakes its readers when more comes. The first client and
any duplicate attached to it (the same idempotency key and request) follow the same one.

Each SSE item is kept as the exact bytes the upstream sent for it (fields, comments, line
endings): the client whose request went upstream gets those bytes unchanged; a duplicate gets
them with the top-level JSON-RPC id set to its own. A relay that fails after the head was sent
ends every reader's stream with one JSON-RPC error item (:meth:`Live.fail`), never with a
clean end that would look like the agent finished.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio

from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.headers import is_json_type
from a2a_tape.wire import sse_frames as frames

_JSON = "application/json"

Headers = list[tuple[str, str]]
RelayItem = tuple[bytes, bytes | None, str | None]
"""(the item's exact stream bytes, its ``data`` payload or None for a comment, its event name)"""


class Cut(A2ATapeError):
    """Raised to a reader when the upstream cut the stream: its client's stream is cut too."""


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
        self.headers: Headers = [("content-type", _JSON)]
        self.body = b""
        self.items: list[RelayItem] = []
        self.done = False
        self.cut_off = False
        self._changed = anyio.Event()

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "content-type"), "")

    def start_sse(self, status: int, headers: Headers) -> None:
        self.mode, self.status, self.headers = "sse", status, headers
        self.ready.set()

    def set_body(self, status: int, headers: Headers, body: bytes) -> None:
        self.mode, self.status, self.headers, self.body = "body", status, headers, body
        self.ready.set()

    def publish(self, items: list[RelayItem]) -> None:
        if not self._reader_gone:
            self.items.extend(items)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def fail(self, status: int, error: bytes, event: str | None = None) -> None:
        """End with ``error`` (a JSON-RPC error payload): the last item of a stream already under
        way, or the whole answer (``status``) when nothing was sent yet."""
        if self.mode == "sse" and self.ready.is_set():
            self.publish([(frames.frame(error, event), error, event)])
        elif not self.ready.is_set():
            self.set_body(status, [("content-type", _JSON)], error)

    def cut(self) -> None:
        """The upstream cut the stream: each reader's stream ends cut (no clean end) after the
        items published so far."""
        self.cut_off = True

    def finish(self) -> None:
        self.done = True
        self.ready.set()
        self.finished.set()
        self._changed.set()

    async def follow(self, rpc_id: bytes | None) -> AsyncIterator[bytes]:
        """The SSE bytes for one client, as soon as each item is published (``rpc_id`` None: the
        HTTP+JSON binding, which has no JSON-RPC id to answer to)."""
        rewrite = rpc_id if rpc_id is not None and (self.rpc_id is None or self.rpc_id != rpc_id) else None
        i = 0
        try:
            while True:
                items = self.items
                if i < len(items) and rewrite is not None:
                    # the id this client asked with, in place of the recorded one: spliced one item at a
                    # time, so a huge id costs one item's copy at once, never one per item kept
                    yield _with_id(items[i], rewrite)
                    i += 1
                    if self.single_reader and i == len(items):
                        self.items, i = [], 0
                elif i < len(items):
                    chunk = b"".join(it[0] for it in items[i:])
                    if self.single_reader:
                        self.items, i = [], 0
                    else:
                        i = len(items)
                    yield chunk
                elif self.done:
                    if self.cut_off:
                        raise Cut("the upstream agent cut its stream")
                    return
                else:
                    await self._changed.wait()
        finally:
            if self.single_reader:
                self._reader_gone, self.items = True, []

    def body_for(self, rpc_id: bytes | None) -> bytes:
        """The whole answer for one client: a JSON-RPC body answered to its own id."""
        if rpc_id is None or (self.rpc_id is not None and self.rpc_id == rpc_id):
            return self.body
        if not is_json_type(self.content_type):
            return self.body
        return frames.split_id(self.body).with_id(rpc_id)


def _with_id(item: RelayItem, rpc_id: bytes) -> bytes:
    """One item's bytes answered to ``rpc_id``: the id spliced into the exact bytes when the
    payload sits in them as one piece, else the item framed anew."""
    raw, data, event = item
    if data is None:
        return raw
    new = frames.split_id(data).with_id(rpc_id)
    if new == data:
        return raw
    if raw.count(data) == 1:
        return raw.replace(data, new, 1)
    return frames.frame(new, event)
