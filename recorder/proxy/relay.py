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

from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

import anyio

from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.headers import is_json_type
from a2a_tape.wire import sse_frames as frames

_JSON = "application/json"

Headers = list[tuple[str, str]]
RelayItem = tuple[bytes, bytes | None, str | None]
"""(the item's exact stream bytes, its ``data`` payload or None for a comment, its event name)"""

DEFAULT_STREAM_BUFFER = 16 * 1024 * 1024
"""Bytes of one relayed stream the proxy holds for its clients (``--stream-buffer``): items published
and not yet read by every reader, and, while the stream fits, items kept for a duplicate that attaches."""
DEFAULT_SLOW_CLIENT_TIMEOUT = 60.0
"""Seconds a client may stay more than the buffer behind before its stream is closed (``--slow-client-timeout``)."""
_CHUNK = 1024 * 1024  # at most this much (or one item) handed to a client at once

T = TypeVar("T")


class Cut(A2ATapeError):
    """Raised to a reader when the upstream cut the stream: its client's stream is cut too."""


class TooSlow(Cut):
    """Raised to a reader the proxy dropped: it stayed more than the buffer behind for too long."""


class Reader:
    """One client's place in a :class:`Window`; ``dropped`` once the window gave up on it."""

    __slots__ = ("at", "dropped", "gone")

    def __init__(self, at: int) -> None:
        self.at = at
        self.dropped = False
        self.gone = anyio.Event()  # set when dropped: the client's response stops even mid-write


class Window(Generic[T]):
    """The items of one relayed answer, in memory only while a reader may still take them, bounded.

    Each reader has a place (:class:`Reader`); an item every reader has taken is let go at once,
    unless ``keep``: then the items stay, for a duplicate that attaches later and reads from the
    first, while they fit in ``limit`` bytes (past it they go as for any window, and a reader can no
    longer join: :attr:`trimmed`). The producer (the relay reading the agent) calls
    :meth:`make_room` before it reads on: it waits while the readers hold more than ``limit``
    bytes unread (back-pressure to the agent: the relay stops reading, the agent's socket fills),
    and after ``patience`` seconds of that it drops the readers furthest behind, so the rest of the
    answer is read and recorded whatever a client does. A fast reader never waits for anything."""

    def __init__(self, size: Callable[[T], int], *, keep: bool, limit: int, patience: float) -> None:
        self.size, self.keep, self.limit, self.patience = size, keep, limit, patience
        self.items: list[T] = []
        self._sizes: list[int] = []
        self.base = 0  # the place of items[0]
        self.held = 0  # bytes in items
        self.trimmed = False
        self.readers: set[Reader] = set()
        self._moved = anyio.Event()  # a reader took something, left, or items came (while the producer waits)
        self._waiting = False

    @property
    def end(self) -> int:
        return self.base + len(self.items)

    def join(self) -> Reader | None:
        """A new reader at the first item; None once the first items are gone (:attr:`trimmed`)."""
        if self.trimmed:
            return None
        reader = Reader(self.base)
        self.readers.add(reader)
        return reader

    def put(self, items: list[T]) -> None:
        sizes = [self.size(it) for it in items]
        self.items += items
        self._sizes += sizes
        self.held += sum(sizes)
        self._trim()

    def take(self, reader: Reader, most: int | None = None) -> list[T]:
        """What ``reader`` has not read yet: one item when ``most`` is 1, else up to about 1 MiB."""
        start = reader.at - self.base
        stop = start + 1
        if most != 1:
            total = 0
            stop = start
            while stop < len(self.items) and (stop == start or total + self._sizes[stop] <= _CHUNK):
                total += self._sizes[stop]
                stop += 1
        out = self.items[start:stop]
        reader.at = self.base + stop
        self._trim()
        return out

    def leave(self, reader: Reader) -> None:
        self.readers.discard(reader)
        self._trim()

    def _trim(self) -> None:
        if not (self.keep and self.held <= self.limit):
            low = min((r.at for r in self.readers), default=self.end) - self.base
            if low > 0:
                self.held -= sum(self._sizes[:low])
                del self.items[:low], self._sizes[:low]
                self.base += low
                self.trimmed = True
        if self._waiting:  # only a waiting producer needs telling: no event per item otherwise
            self._waiting = False
            moved, self._moved = self._moved, anyio.Event()
            moved.set()

    async def make_room(self, in_flight: Callable[[], int] = lambda: 0) -> int:
        """Wait until what the readers hold unread, and ``in_flight`` (bytes read and not yet put),
        fit in the limit; past ``patience`` seconds with the readers themselves more than the limit
        behind, drop the readers furthest behind. Returns how many were dropped."""
        dropped = 0
        deadline: float | None = None
        while self.held + in_flight() > self.limit:
            moved = self._moved
            self._waiting = True
            if self.held <= self.limit:  # the log is what is behind: wait for it, drop no one
                deadline = None
                await moved.wait()
                continue
            now = anyio.current_time()
            deadline = now + self.patience if deadline is None else deadline
            if now < deadline:
                with anyio.move_on_after(deadline - now):
                    await moved.wait()
                continue
            while self.held > self.limit and self.readers:
                slowest = min(self.readers, key=lambda r: r.at)
                slowest.dropped = True
                slowest.gone.set()
                self.readers.discard(slowest)
                dropped += 1
                self._trim()
        return dropped


class Live:
    """One relayed response: what the upstream said so far, for every client reading it."""

    def __init__(
        self,
        exchange_id: int | None,
        req_hash: str | None,
        rpc_id: bytes | None,
        *,
        single_reader: bool = False,
        limit: int = DEFAULT_STREAM_BUFFER,
        patience: float = DEFAULT_SLOW_CLIENT_TIMEOUT,
    ) -> None:
        self.exchange_id = exchange_id
        # no idempotency key: nobody can attach later, so items its one reader has taken (or
        # that nobody will read, once that reader is gone) are not kept: memory stays flat on
        # a long stream. With a key, the items stay for duplicates attaching mid-stream while
        # they fit in ``limit`` bytes; either way a reader more than ``limit`` behind holds the
        # relay back (back-pressure) for ``patience`` seconds at most (:class:`Window`).
        self.window: Window[RelayItem] = Window(_size, keep=not single_reader, limit=limit, patience=patience)
        self._first = self.window.join()  # the client whose request made this relay: in from the start
        self.req_hash = req_hash
        self.rpc_id = rpc_id  # the id the items carry (None: rewrite for everyone)
        self.ready = anyio.Event()
        self.finished = anyio.Event()
        self.mode = "body"  # "sse" or "body"
        self.status = 200
        self.headers: Headers = [("content-type", _JSON)]
        self.body = b""
        self.done = False
        self.cut_off = False
        self._changed = anyio.Event()

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "content-type"), "")

    def can_attach(self) -> bool:
        """Whether a duplicate arriving now can read this relay from its first item."""
        return not self.window.trimmed

    def start_sse(self, status: int, headers: Headers) -> None:
        self.mode, self.status, self.headers = "sse", status, headers
        self.ready.set()

    def set_body(self, status: int, headers: Headers, body: bytes) -> None:
        self.mode, self.status, self.headers, self.body = "body", status, headers, body
        self.ready.set()

    def publish(self, items: list[RelayItem]) -> None:
        self.window.put(items)
        self._poke()

    def _poke(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def make_room(self, in_flight: Callable[[], int] = lambda: 0) -> int:
        """Back-pressure for the relay (:meth:`Window.make_room`); the readers it dropped are woken
        to end. Returns how many were dropped."""
        dropped = await self.window.make_room(in_flight)
        if dropped:
            self._poke()
        return dropped

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

    def reader(self, first: bool = True) -> Reader | None:
        """A place for one more client: ``first``, the place made with this relay for the request
        that made it (in from the start, so nothing it must read goes before it starts reading);
        else a new one from the first item (None when those items are gone: :meth:`can_attach`)."""
        if first and self._first is not None:
            place, self._first = self._first, None
            return place
        return self.window.join()

    async def follow(self, rpc_id: bytes | None, reader: Reader | None = None) -> AsyncIterator[bytes]:
        """The SSE bytes for one client, as soon as each item is published (``rpc_id`` None: the
        HTTP+JSON binding, which has no JSON-RPC id to answer to). A reader the window dropped
        ends cut (:class:`TooSlow`)."""
        rewrite = rpc_id if rpc_id is not None and (self.rpc_id is None or self.rpc_id != rpc_id) else None
        place = reader if reader is not None else self.reader(first=False)
        if place is None:
            raise Cut("the first items of this stream are no longer held")
        window = self.window
        try:
            while True:
                if place.dropped:
                    raise TooSlow("the client read too slowly: its stream was closed")
                if place.at < window.end and rewrite is not None:
                    # the id this client asked with, in place of the recorded one: spliced one item at a
                    # time, so a huge id costs one item's copy at once, never one per item kept
                    (item,) = window.take(place, 1)
                    yield _with_id(item, rewrite)
                elif place.at < window.end:
                    yield b"".join(it[0] for it in window.take(place))
                elif self.done:
                    if self.cut_off:
                        raise Cut("the upstream agent cut its stream")
                    return
                else:
                    await self._changed.wait()
        finally:
            window.leave(place)

    def body_for(self, rpc_id: bytes | None) -> bytes:
        """The whole answer for one client: a JSON-RPC body answered to its own id."""
        if rpc_id is None or (self.rpc_id is not None and self.rpc_id == rpc_id):
            return self.body
        if not is_json_type(self.content_type):
            return self.body
        return frames.split_id(self.body).with_id(rpc_id)


def _size(item: RelayItem) -> int:
    return len(item[0]) + 64  # the bytes, and what holding an item costs besides


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
