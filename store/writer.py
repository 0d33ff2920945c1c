"""Group commit for many concurrent async producers (anyio).

One writer task drains a queue of pending events, appends them in one transaction on a
worker thread (one thread hop per batch, not per event), then wakes every producer of the
batch. A producer's ``await writer.append(event)`` returns only once its event is durable
at the store's durability setting.

    async with GroupCommitWriter(store) as writer:
        stored = await writer.append(NewEvent(payload=b"...", task_id="t1"))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import TracebackType

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .errors import AppendConflict, StoreError
from .faults import translate
from .interface import AppendLog
from .records import NewEvent, StoredEvent


class _Slot:
    __slots__ = ("event", "done", "result", "error")

    def __init__(self, event: NewEvent) -> None:
        self.event = event
        self.done = anyio.Event()
        self.result: StoredEvent | None = None
        self.error: BaseException | None = None


class GroupCommitWriter:
    def __init__(self, store: AppendLog, *, max_batch: int = 2048) -> None:
        self.store = store
        self.max_batch = max_batch
        self._send: MemoryObjectSendStream[_Slot] | None = None
        self._recv: MemoryObjectReceiveStream[_Slot] | None = None
        self._tg: TaskGroup | None = None
        self.batches = 0
        self.events = 0

    async def __aenter__(self) -> GroupCommitWriter:
        self._send, self._recv = anyio.create_memory_object_stream[_Slot](math.inf)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._run)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._send is not None and self._tg is not None
        await self._send.aclose()  # the writer drains what is queued, then ends
        await self._tg.__aexit__(exc_type, exc, tb)

    async def append(self, event: NewEvent) -> StoredEvent:
        """Queue one event; return it as stored once it is durable."""
        if self._send is None:
            raise StoreError("the writer is not running (use 'async with GroupCommitWriter(...)')")
        slot = _Slot(event)
        self._queue(slot)
        await slot.done.wait()
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None  # set with done, unless error is
        return slot.result

    async def append_many(self, events: Sequence[NewEvent]) -> list[StoredEvent]:
        """Queue several events of one producer; they are stored in this order."""
        if self._send is None:
            raise StoreError("the writer is not running")
        slots = [_Slot(e) for e in events]
        for s in slots:
            self._queue(s)
        out: list[StoredEvent] = []
        for s in slots:
            if not s.done.is_set():  # set already: no checkpoint per event of a batch
                await s.done.wait()
            if s.error is not None:
                raise s.error
            assert s.result is not None
            out.append(s.result)
        return out

    def _queue(self, slot: _Slot) -> None:
        assert self._send is not None
        try:
            self._send.send_nowait(slot)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise StoreError("the group-commit writer has stopped: the event was not stored") from None

    async def _run(self) -> None:
        assert self._recv is not None
        batch: list[_Slot] = []
        async with self._recv:
            try:
                while True:
                    try:
                        first = await self._recv.receive()
                    except anyio.EndOfStream:
                        return
                    batch = [first]
                    while len(batch) < self.max_batch:
                        try:
                            batch.append(self._recv.receive_nowait())
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                    await anyio.to_thread.run_sync(self._commit, batch)
                    self.batches += 1
                    self.events += len(batch)
                    for s in batch:
                        s.done.set()
                    batch = []
            except BaseException as exc:
                # the writer itself ends (cancelled, or a bug): no producer may wait for it forever
                self._fail_waiting(batch, exc)
                raise

    def _fail_waiting(self, batch: list[_Slot], exc: BaseException) -> None:
        error = StoreError(f"the group-commit writer stopped ({type(exc).__name__}): the event was not stored")
        pending = list(batch)
        if self._recv is not None:
            while True:
                try:
                    pending.append(self._recv.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break
        for s in pending:
            if not s.done.is_set():
                if s.result is None and s.error is None:  # a committed batch keeps its answers
                    s.error = error
                s.done.set()

    def _commit(self, batch: list[_Slot]) -> None:
        try:
            results = self.store.append_batch([s.event for s in batch])
            for s, r in zip(batch, results):
                s.result = r
        except AppendConflict:
            # isolate the producer whose event conflicts; the others still get their answer
            for s in batch:
                try:
                    s.result = self.store.append(s.event)
                except BaseException as exc:  # noqa: BLE001 - handed to that producer
                    s.error = exc
        except BaseException as exc:  # noqa: BLE001 - every producer of the batch learns it
            # the store maps its driver's errors already; a store that does not is mapped here
            mapped = translate(exc, self.store.location, self.store.busy_timeout)
            for s in batch:
                s.error = mapped or exc
