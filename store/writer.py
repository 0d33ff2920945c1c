"""How the log is written: one commit mechanism for every path, and the batching of a stream.

The rule: nothing waits for the log's lock on an event loop, and what arrives while a commit is
under way goes to the log together, in the next one.

- :data:`Writes`: code that writes, written once for both kinds of caller (a generator yielding
  each write transaction, a :data:`Write`); :func:`run_writes` runs it in a plain call,
  :meth:`GroupCommitWriter.run` from an event loop.
- :class:`GroupCommitWriter`: the one way an event loop writes. Each write (an append, or a
  caller's own transaction: an exchange row, a key's claim) is queued; the producer that finds no
  commit under way leads: it commits everything queued, in queue order, in one transaction, on
  the event loop when the batch is small and the log's lock is free (``Store.without_waiting``),
  else on a worker thread, and hands the lead to the next producer waiting. A producer's
  ``await`` returns once its write is durable at the store's durability setting. There is no
  writer task: it works on any event loop, for as long as anyone writes (a transport has no
  lifetime of its own to run one in).
- :class:`Batcher`: one stream's items, read ahead of the log and committed in batches, each
  batch handed on only once it is in the log (write-ahead). Record, the recorded-upstream client
  (:mod:`capture.upstream_call`), the proxy and ``RecordingTransport`` read their streams through it.

    async with GroupCommitWriter(store) as writer:   # or without ``async with``: it needs no task
        stored = await writer.append(NewEvent(payload=b"...", task_id="t1"))
"""

from __future__ import annotations

import asyncio
import collections
import functools
import math
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from types import TracebackType
from typing import Any, Generic, ParamSpec, TypeAlias, TypeVar

import anyio

from a2a_tape.store.driver_errors import translate
from a2a_tape.store.errors import WouldWait
from a2a_tape.store.interface import AppendLog
from a2a_tape.store.records import NewEvent, StoredEvent

P = ParamSpec("P")
T = TypeVar("T")
Item_ = TypeVar("Item_")  # an item of a batch

Write: TypeAlias = Callable[[], Any]
"""One write transaction, safe to run twice: nothing changes before its BEGIN."""

Writes: TypeAlias = Generator[Write, Any, T]
"""Code that writes, written once for both kinds of caller: it yields each :data:`Write` and is
sent its result (or has its exception thrown in), and returns ``T``. :func:`run_writes` drives it
in a plain call, :meth:`GroupCommitWriter.run` from an event loop that must not wait for the lock."""


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


def writing_now(steps: Callable[P, Writes[T]]) -> Callable[P, T]:
    """The plain-call form of a :data:`Writes` function (``begin = writing_now(begin_writes)``)."""

    @functools.wraps(steps)
    def now(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_writes(steps(*args, **kwargs))

    return now


# -- the one commit mechanism ------------------------------------------------------------------


class Appends:
    """A write that only appends events (``log.append_batch``): a
    :class:`GroupCommitWriter` merges it with its neighbours' into one insert."""

    __slots__ = ("log", "events")

    def __init__(self, log: AppendLog, events: Sequence[NewEvent]) -> None:
        self.log, self.events = log, events

    def __call__(self) -> list[StoredEvent]:
        return self.log.append_batch(self.events)


class _Slot:
    """One producer's write: its events (stored together, all or nothing), or its own transaction."""

    __slots__ = ("events", "write", "size", "inline", "woken", "finished", "result", "error")

    def __init__(self, events: Sequence[NewEvent] = (), write: Write | None = None, *, inline: bool = True) -> None:
        self.events = events
        self.write = write
        self.size = len(events) if write is None else 1
        self.inline = inline  # may be committed on the event loop (GroupCommitWriter.inline_batch)
        self.woken = anyio.Event()  # set when it is finished, or when it is handed the lead
        self.finished = False
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self, store: AppendLog) -> None:
        self.result = self.write() if self.write is not None else store.append_batch(self.events)


class GroupCommitWriter:
    """The one way an event loop writes the log (see the module docstring)."""

    def __init__(self, store: AppendLog, *, max_batch: int = 2048, inline_batch: int = 8) -> None:
        self.store = store
        self.max_batch = max_batch
        # a batch this small (a stream's first item, a note, a claim) is committed on the event loop
        # when the lock is free: the commit costs less than two thread handoffs on a busy machine,
        # and that wait is the first event's latency. Bigger batches go to a worker thread when each
        # commit is an fsync (durability full: milliseconds, off the loop); without one (a WAL
        # commit at durability normal) any batch costs less than the thread hop, and stays on the
        # loop. A batch that would wait for the lock always goes to a worker thread.
        self.syncs = getattr(store, "durability", "full") == "full"
        self.inline_batch: float = inline_batch if self.syncs else math.inf
        self._queue: collections.deque[_Slot] = collections.deque()
        self._leader: _Slot | None = None
        self._on_thread: asyncio.Task[None] | None = None  # the last batch given to a worker thread
        self.batches = 0
        self.events = 0

    async def __aenter__(self) -> GroupCommitWriter:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None  # every producer waited for its own write: nothing is left queued

    async def append(self, event: NewEvent) -> StoredEvent:
        """One event; returned as stored once it is durable."""
        stored: list[StoredEvent] = await self._submit(_Slot([event]))
        return stored[0]

    async def append_many(self, events: Sequence[NewEvent], *, inline: bool = True) -> list[StoredEvent]:
        """Several events of one producer, stored in this order in one transaction, all or none (a
        conflict or a fault raises and stores none of them). ``inline=False``: not committed on the
        event loop when the commit syncs, whatever the batch's size (see :meth:`run`)."""
        if not events:
            return []
        stored: list[StoredEvent] = await self._submit(_Slot(list(events), inline=inline))
        return stored

    async def write(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)``: one write transaction of the caller's, committed with the
        others queued (it must be safe to run twice: nothing changes before its BEGIN). Its
        errors are the store's, raised here."""
        result: T = await self._submit(_Slot(write=functools.partial(fn, *args, **kwargs)))
        return result

    async def run(self, steps: Writes[T], *, inline: bool = True) -> T:
        """Each write of ``steps`` through :meth:`write`: the event loop never waits for the lock.

        ``inline=False``: when each commit is an fsync (durability full), its writes are never
        committed on the event loop, even a small batch with the lock free. For a stream in full flow after its first batch: an fsync on the loop stops
        the reading and the relaying of everything else for its whole length, while on a worker
        thread the loop reads the next batch meanwhile (a relay that commits a few messages at a time
        on the loop reads a few more during each fsync, and stays at a few per batch)."""
        try:
            write = next(steps)
            while True:
                try:
                    if isinstance(write, Appends):  # merged with its neighbours' appends (one insert)
                        result = await self.append_many(write.events, inline=inline)
                    elif inline:
                        result = await self.write(write)
                    else:
                        result = await self._submit(_Slot(write=write, inline=False))
                except BaseException as exc:  # noqa: BLE001 - as in run_writes
                    write = steps.throw(exc)
                else:
                    write = steps.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # a Writes[T] returns T

    # -- leading -------------------------------------------------------------------------------

    async def _submit(self, slot: _Slot) -> Any:
        self._queue.append(slot)
        try:
            if self._leader is None:
                self._leader = slot
                # one turn of the loop before the batch is taken: producers that are ready queue too
                await anyio.lowlevel.checkpoint()
            while not slot.finished:
                if self._leader is slot:
                    await self._commit_next()
                else:
                    await slot.woken.wait()
        finally:
            if not slot.finished and slot in self._queue:  # cancelled before its batch was taken
                self._queue.remove(slot)
            if self._leader is slot:  # the lead goes to the oldest producer still waiting
                self._leader = self._queue[0] if self._queue else None
                if self._leader is not None:
                    self._leader.woken.set()
        if slot.error is not None:
            raise slot.error
        return slot.result

    async def _commit_next(self) -> None:
        if self._on_thread is not None and not self._on_thread.done():
            # the last leader was cancelled by asyncio itself while its batch was on a thread: the
            # log takes one transaction at a time, so the next batch is taken once that one is written
            await asyncio.shield(self._on_thread)
        batch = [self._queue.popleft()]
        size = batch[0].size
        while self._queue and size + self._queue[0].size <= self.max_batch:
            slot = self._queue.popleft()
            batch.append(slot)
            size += slot.size
        with anyio.CancelScope(shield=True):  # a batch taken is a batch written
            off = size > self.inline_batch or (self.syncs and not all(s.inline for s in batch))
            if off or not self._commit_now(batch):
                await self._commit_on_thread(batch)
                return
        self._answer(batch)

    async def _commit_on_thread(self, batch: list[_Slot]) -> None:
        """The batch committed on a worker thread, its producers answered once it is written. anyio's
        shield holds anyio's cancels, not asyncio's own (``Task.cancel``, as grpc.aio cancels a handler
        whose client left): on asyncio the batch is answered by its thread's completion, not by its
        leader, so a leader cancelled meanwhile leaves no producer of the batch waiting."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): the shield holds every cancel there
            await anyio.to_thread.run_sync(self._commit, batch)
            self._answer(batch)
            return

        async def commit_and_answer() -> None:  # a task of its own: the leader's cancel does not reach it
            await anyio.to_thread.run_sync(self._commit, batch)  # _commit raises nothing: errors are the slots'
            self._answer(batch)
            self._on_thread = None  # written: the next leader need not wait (and the batch is not kept)

        written = loop.create_task(commit_and_answer())
        self._on_thread = written
        await asyncio.shield(written)

    def _answer(self, batch: list[_Slot]) -> None:
        """The batch is written (or each producer's error set): its producers go on."""
        self.batches += 1
        self.events += sum(len(s.events) for s in batch)
        for s in batch:
            s.finished = True
            s.woken.set()

    def _commit_now(self, batch: list[_Slot]) -> bool:
        """The batch committed on the loop if that needs no wait for a lock (another thread's or
        process's transaction): False, with nothing written, when it would (or when a producer's
        write failed in a batch of several: each is then retried alone, where waiting is harmless)."""
        try:
            with self.store.without_waiting():
                self._together(batch)
        except WouldWait:
            return False
        except BaseException as exc:  # noqa: BLE001 - the producers learn it
            if len(batch) > 1:
                return False
            self._fail(batch, exc)
        return True

    def _commit(self, batch: list[_Slot]) -> None:
        try:
            self._together(batch)
        except BaseException as exc:  # noqa: BLE001 - every producer of the batch learns it
            if len(batch) == 1:
                self._fail(batch, exc)
            else:
                self._alone(batch)  # a conflict, or one producer's own transaction refused

    def _together(self, batch: list[_Slot]) -> None:
        """The batch in one transaction, each producer's result set; the events of neighbouring
        appends in one ``append_batch`` (one multi-row insert)."""
        if len(batch) == 1:
            batch[0].run(self.store)
            return
        with self.store.transaction():
            i = 0
            while i < len(batch):
                if batch[i].write is not None:
                    batch[i].run(self.store)
                    i += 1
                    continue
                j = i
                while j < len(batch) and batch[j].write is None:
                    j += 1
                run = batch[i:j]
                stored = self.store.append_batch([e for s in run for e in s.events])
                k = 0
                for s in run:
                    s.result = stored[k : k + len(s.events)]
                    k += len(s.events)
                i = j

    def _alone(self, batch: list[_Slot]) -> None:
        """After a conflict (or one producer's own failed transaction): each producer's write in a
        transaction of its own, so the others still get their answer."""
        for s in batch:
            s.result = None
            try:
                s.run(self.store)
            except BaseException as exc:  # noqa: BLE001 - handed to that producer
                s.error = translate(exc, self.store.location, self.store.busy_timeout) or exc

    def _fail(self, batch: list[_Slot], exc: BaseException) -> None:
        # the store maps its driver's errors already; a store that does not is mapped here
        mapped = translate(exc, self.store.location, self.store.busy_timeout)
        for s in batch:
            s.result = None
            s.error = mapped or exc


_shared: weakref.WeakKeyDictionary[object, GroupCommitWriter] = weakref.WeakKeyDictionary()


def writer_of(store: AppendLog) -> GroupCommitWriter:
    """The store's shared writer: every path of this process that writes ``store`` from an event
    loop without a writer of its own goes through this one, so their writes group."""
    writer = _shared.get(store)
    if writer is None:
        writer = _shared[store] = GroupCommitWriter(store)
    return writer


# -- the batching of one stream ----------------------------------------------------------------


class Batcher(Generic[Item_]):
    """One stream's items, read ahead of the log and committed in batches (write-ahead).

    A reader puts items on :attr:`pending` (a plain list: the hot loop appends to it directly)
    and calls :meth:`added`; the committer (:meth:`drive` runs both) takes them in batches and
    calls ``commit`` with each batch and its arrival times; ``commit`` writes the batch to the log
    and only then hands it on (folds it, publishes its bytes). The batches:

    1. the first is taken at once and kept to ``first`` items: the first event waits for one small
       commit, not for a burst the agent wrote in one go;
    2. later ones when ``size`` items are pending, or ``wait`` seconds after the oldest of them
       arrived, whichever comes first (``wait`` 0: whatever piled up during the last commit);
    3. the reader waits once ``ahead`` items are pending (the log is behind: another writer holds
       it), so memory stays bounded;
    4. when the reader ends (its end, its error, or a cancel from outside such as a stall
       watchdog) what it read is still committed, unless the log itself failed; the reader's error
       is raised after that, the log's at once (the reader is stopped).
    """

    def __init__(
        self,
        commit: Callable[[list[Item_], list[float]], Awaitable[None]],
        *,
        first: int = 8,
        size: int = 2048,
        wait: float = 0.0,
        ahead: int = 16384,
    ) -> None:
        self.commit = commit
        self.first, self.size, self.wait, self.ahead = first, size, wait, ahead
        self.pending: list[Item_] = []
        self.arrived: list[float] = []  # monotonic arrival time of each pending item
        self.last_arrival = time.monotonic()  # of the newest item read (a stall watchdog's progress)
        self._want = 1  # pending items that wake the committer
        self._asleep = False
        self._wake = anyio.Event()
        self._room = anyio.Event()
        self._reading = True
        self._first = True

    def added(self, count: int) -> bool:
        """The reader put ``count`` items on :attr:`pending`; True when it must wait (:meth:`room`)."""
        pending = len(self.pending)
        now = self.last_arrival = time.monotonic()
        if count == 1:
            self.arrived.append(now)
        else:
            self.arrived += [now] * count
        if self._asleep and pending >= self._want:
            self._asleep = False
            self._wake.set()
        return pending >= self.ahead

    async def room(self) -> None:
        """Wait until the committer has taken what is pending."""
        self._room = anyio.Event()
        await self._room.wait()

    async def drive(
        self,
        read: Callable[[], Awaitable[None]],
        watch: Callable[[anyio.CancelScope], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        """Run ``read`` (which fills this batcher) and the committer until both are done (4.).
        ``watch``, when given, runs beside them and may stop the reading (a stall watchdog: it is
        handed the scope to cancel)."""
        log_failed: list[Exception] = []
        read_failed: list[Exception] = []
        committed = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def committer() -> None:
                try:
                    await self._commit_all()
                except Exception as exc:  # noqa: BLE001 - the log failed: the reader stops, raised below
                    log_failed.append(exc)
                    tg.cancel_scope.cancel()
                finally:
                    committed.set()

            tg.start_soon(committer)
            if watch is not None:
                tg.start_soon(watch, tg.cancel_scope)
            try:
                await read()
            except Exception as exc:  # noqa: BLE001 - raised once what was read is in (below)
                read_failed.append(exc)
            finally:
                self.close()
            await committed.wait()
            tg.cancel_scope.cancel()
        if log_failed:
            raise log_failed[0]
        if self.pending:  # the reading was stopped (a watchdog): what was read still goes in
            await self._commit_batch()
        if read_failed:
            raise read_failed[0]

    async def _commit_all(self) -> None:
        while True:
            if not self.pending:
                if not self._reading:
                    return
                await self._sleep(1, None)
                continue
            if self._reading and not self._first and len(self.pending) < self.size and self.wait > 0:
                left = self.arrived[0] + self.wait - time.monotonic()
                if left > 0:  # a fast stream: let the batch fill (2.)
                    await self._sleep(self.size, left)
                    continue
            with anyio.CancelScope(shield=True):  # a batch taken is a batch written
                await self._commit_batch()

    async def _sleep(self, want: int, at_most: float | None) -> None:
        """Until ``want`` items are pending (the reader wakes it), for ``at_most`` seconds."""
        self._want, self._asleep = want, True
        with anyio.move_on_after(math.inf if at_most is None else at_most):
            await self._wake.wait()
        self._asleep = False
        self._wake = anyio.Event()

    def close(self) -> None:
        """The reader is done: :meth:`next` returns what is left, then None."""
        self._reading = False
        self._wake.set()

    async def next(self) -> tuple[list[Item_], list[float]] | None:
        """For a consumer that pulls instead of :meth:`drive` (a client reading a transport's
        stream, whose reader is a task of the caller's): the next batch as soon as anything is
        pending, with its arrival times; None once the reader is done and nothing is left."""
        while not self.pending:
            if not self._reading:
                return None
            await self._sleep(1, None)
        return self._take()

    def _take(self) -> tuple[list[Item_], list[float]]:
        n = min(len(self.pending), self.first) if self._first else len(self.pending)
        self._first = False
        batch, times = self.pending[:n], self.arrived[:n]
        del self.pending[:n]
        del self.arrived[:n]
        self._room.set()
        return batch, times

    async def _commit_batch(self) -> None:
        await self.commit(*self._take())
