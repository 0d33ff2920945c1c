"""Group commit for many concurrent async producers (anyio).

One writer task drains a queue of pending appends, appends their events in one transaction on
a worker thread (one thread hop per batch, not per event), then wakes every producer of the
batch. A producer's ``await writer.append(event)`` returns only once its event is durable
at the store's durability setting; ``append_many`` queues a producer's events as one entry (one
wake-up for all of them, not one per event) and is all or nothing. A small batch is committed on
the event loop when that needs no wait for the log's lock, else on a worker thread; a caller's own
small transaction (the proxy's key claim) goes the same way through :func:`write_soon`: the loop
never waits for a lock, neither another process's nor a batch's being committed on a thread.

    async with GroupCommitWriter(store) as writer:
        stored = await writer.append(NewEvent(payload=b"...", task_id="t1"))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Generator, Sequence
from types import TracebackType
from typing import Any, ParamSpec, TypeAlias, TypeVar

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .driver_errors import translate
from .errors import AppendConflict, StoreError, WouldWait
from .interface import AppendLog, StoreHandle
from .records import NewEvent, StoredEvent

P = ParamSpec("P")
T = TypeVar("T")

Write: TypeAlias = Callable[[], Any]
"""One write transaction, safe to run twice: nothing changes before its BEGIN (see :func:`write_soon`)."""

Writes: TypeAlias = Generator[Write, Any, T]
"""Code that writes, written once for both kinds of caller: it yields each :data:`Write` and is
sent its result (or has its exception thrown in), and returns ``T``. :func:`run_writes` drives it
in a plain call, :func:`run_writes_soon` from an event loop that must not wait for the lock."""


async def write_soon(store: StoreHandle, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)``, ONE write transaction on ``store``, from an event loop that must
    not wait for the log's lock: run at once on the loop when the lock is free
    (``Store.without_waiting``), else on a worker thread, where it waits as the busy timeout says.
    For a server's own writes (the proxy's claims and exchange rows, serve's recording modes).
    Its errors are the store's, raised here."""
    try:
        with store.without_waiting():
            return fn(*args, **kwargs)
    except WouldWait:  # nothing was written: the same transaction again, where waiting is harmless
        pass
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


def run_writes(steps: Writes[T]) -> T:
    """Each write of ``steps`` at once, where it is (waiting for the lock as the busy timeout says)."""
    try:
        write = next(steps)
        while True:
            try:
                result = write()
            except BaseException as exc:  # noqa: BLE001 - the steps' own code handles it, or it goes on up
                write = steps.throw(exc)
            else:
                write = steps.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]  # a Writes[T] returns T


async def run_writes_soon(store: StoreHandle, steps: Writes[T]) -> T:
    """Each write of ``steps`` through :func:`write_soon`: the event loop never waits for the lock."""
    try:
        write = next(steps)
        while True:
            try:
                result = await write_soon(store, write)
            except BaseException as exc:  # noqa: BLE001 - as in run_writes
                write = steps.throw(exc)
            else:
                write = steps.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]  # a Writes[T] returns T


def writing_now(steps: Callable[P, Writes[T]]) -> Callable[P, T]:
    """The plain-call form of a :data:`Writes` function (``begin = writing_now(begin_writes)``)."""

    @functools.wraps(steps)
    def now(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_writes(steps(*args, **kwargs))

    return now


class _Slot:
    """One producer's call: its events, stored together in one batch (all or nothing)."""

    __slots__ = ("events", "done", "result", "error")

    def __init__(self, events: Sequence[NewEvent]) -> None:
        self.events = events
        self.done = anyio.Event()
        self.result: list[StoredEvent] | None = None
        self.error: BaseException | None = None


class GroupCommitWriter:
    def __init__(self, store: AppendLog, *, max_batch: int = 2048, inline_batch: int = 8) -> None:
        self.store = store
        self.max_batch = max_batch
        # a batch this small (a stream's first item, a note) is committed on the event loop when
        # the lock is free: the commit costs less than the two thread handoffs would on a busy
        # machine, and that wait is the first event's latency. Bigger batches, and a small one
        # that would wait for the lock, go to a worker thread.
        self.inline_batch = inline_batch
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
        return (await self._append([event]))[0]

    async def append_many(self, events: Sequence[NewEvent]) -> list[StoredEvent]:
        """Queue several events of one producer; they are stored in this order, in one
        transaction, all or none (a conflict or a fault raises and stores none of them)."""
        if not events:
            return []
        return await self._append(list(events))

    async def _append(self, events: Sequence[NewEvent]) -> list[StoredEvent]:
        if self._send is None:
            raise StoreError("the writer is not running (use 'async with GroupCommitWriter(...)')")
        slot = _Slot(events)
        self._queue(slot)
        await slot.done.wait()
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None  # set with done, unless error is
        return slot.result

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
                    size = len(first.events)
                    while size < self.max_batch:
                        try:
                            slot = self._recv.receive_nowait()
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                        batch.append(slot)
                        size += len(slot.events)
                    if size > self.inline_batch or not self._commit_now(batch):
                        await anyio.to_thread.run_sync(self._commit, batch)
                    self.batches += 1
                    self.events += size
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

    def _commit_now(self, batch: list[_Slot]) -> bool:
        """A small batch committed on the loop if that needs no wait for a lock (another process's
        transaction): False, with nothing written, when it would."""
        try:
            with self.store.without_waiting():
                self._append_all(batch)
        except WouldWait:
            return False
        except AppendConflict as conflict:
            self._isolate(batch, conflict)  # rare: each producer's events alone (on the loop, waiting)
        except BaseException as exc:  # noqa: BLE001 - every producer of the batch learns it
            self._fail(batch, exc)
        return True

    def _commit(self, batch: list[_Slot]) -> None:
        try:
            self._append_all(batch)
        except AppendConflict as conflict:
            self._isolate(batch, conflict)
        except BaseException as exc:  # noqa: BLE001 - every producer of the batch learns it
            self._fail(batch, exc)

    def _append_all(self, batch: list[_Slot]) -> None:
        """The batch in one transaction, each producer's result set (AppendConflict: none)."""
        if len(batch) == 1:
            batch[0].result = self.store.append_batch(batch[0].events)
            return
        results = self.store.append_batch([e for s in batch for e in s.events])
        i = 0
        for s in batch:
            s.result = results[i : i + len(s.events)]
            i += len(s.events)

    def _isolate(self, batch: list[_Slot], conflict: AppendConflict) -> None:
        """After a conflict: each producer's events alone, so the others still get their answer."""
        if len(batch) == 1:
            batch[0].error = conflict
            return
        for s in batch:
            try:
                s.result = self.store.append_batch(s.events)
            except BaseException as exc:  # noqa: BLE001 - handed to that producer
                s.error = exc

    def _fail(self, batch: list[_Slot], exc: BaseException) -> None:
        # the store maps its driver's errors already; a store that does not is mapped here
        mapped = translate(exc, self.store.location, self.store.busy_timeout)
        for s in batch:
            s.error = mapped or exc
