"""Projections kept in the store: :class:`Projector` brings task views up to date incrementally.

The fold rules are in :mod:`fold.fold`, the view shapes in :mod:`fold.views`; both are
re-exported here, the module callers import from.
"""

from __future__ import annotations

import gc
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from operator import itemgetter

import msgspec

from a2a_tape.fold.catch_up import ProjectionMoved
from a2a_tape.fold.fold import TaskFold, event_task_id, fold_events, fold_stored, fold_task_events, route
from a2a_tape.fold.runs import NO_OBSERVER, Seen, enter_run
from a2a_tape.fold.task_state import STATE_DECODER, STATE_VERSION, TaskState, shown_state
from a2a_tape.fold.views import (
    ArtifactView,
    Fault,
    IgnoredEvent,
    RecordedTask,
    TaskView,
    ToolCall,
    encode_view,
    views_digest,
)
from a2a_tape.store import Durability, Projections, ProjectionStore, StoreError
from a2a_tape.store.decode import decode_item, peek_text_chunk
from a2a_tape.store.indexes import TaskIndexRow
from a2a_tape.store.interface import FoldRow
from a2a_tape.store.leases import new_owner, owner_alive, release_owner
from a2a_tape.store.paging import TaskRange, in_range

_MAX_EXCHANGES = 200_000  # exchange observers a catch-up remembers (~30 MB at most)
_FRESH_MAX_TASKS = 100_000  # task ids a rebuild remembers to skip row lookups (~8 MB at most)
_TASK_ID = itemgetter(1)  # of a fold row
_EXCHANGE_ID = itemgetter(3)
PARALLEL_MIN_EVENTS = 200_000
"""A rebuild of a log at least this long folds its tasks in several processes (one per core)."""
PARALLEL_LEAD = 0.03
"""This process's part of a parallel rebuild holds that much more of the events (a share) than
each worker's: a worker starts ~0.1 s later (a fresh interpreter and its imports)."""

__all__ = [
    "ArtifactView",
    "Fault",
    "IgnoredEvent",
    "ProjectionBusy",
    "ProjectionMoved",
    "Projector",
    "RecordedTask",
    "TaskFold",
    "TaskState",
    "TaskView",
    "ToolCall",
    "encode_view",
    "event_task_id",
    "fold_events",
    "fold_stored",
    "fold_task_events",
    "route",
    "views_digest",
]

# -- the persisted, incremental projection ----------------------------------------------------


def _fold_batches(
    store: ProjectionStore, start: int, batch: int, upto: int | None = None, tasks: TaskRange | None = None
) -> Iterator[list[FoldRow]]:
    """The log after ``start`` in batches of fold rows: the store's narrow reader (six columns,
    no :class:`StoredEvent` per row; every backend has it, :class:`ProjectionStore`)."""
    if upto is None and tasks is None:
        return store.read_fold_rows(start, batch=batch)
    return store.read_fold_rows(start, batch=batch, upto=upto, tasks=tasks)


class ProjectionBusy(StoreError):
    """Another live process is rebuilding the projection."""


class Projector:
    """Task views kept in the store, brought up to date with :meth:`catch_up`.

    States live in ``projection_rows`` (one msgpack row per task) and the cursor (last position
    applied) is committed in the same transaction (``projection_commit``): a crash between two
    commits replays the events after the cursor, never twice. Live folds sit in an LRU of
    ``cache_size`` tasks; evicted dirty states wait as bytes until the next commit, which comes
    every ``commit_every`` events, so memory does not grow with the log.
    """

    def __init__(
        self,
        store: Projections,
        name: str = "tasks",
        *,
        cache_size: int = 256,
        commit_every: int = 10_000,
        tasks: TaskRange | None = None,
        upto: int | None = None,
    ) -> None:
        self.store = store
        self.name = name
        self.cache_size = max(1, cache_size)
        self.commit_every = max(1, commit_every)
        # a part of a parallel rebuild: only the tasks of this range, only up to ``upto``; its
        # commits write rows without guarding the cursor (the rebuild sets it once every part is in)
        self.tasks = tasks
        self.upto = upto
        self._cache: OrderedDict[str, TaskFold] = OrderedDict()
        self._cursor: int | None = None
        self.processes = 0  # how many processes folded the last rebuild (0: none yet)

    def cursor(self) -> int:
        return self.store.projection_cursor(self.name)

    def catch_up(self) -> int:
        """Apply the events after the cursor; return how many were read."""
        self._check_version()
        for _ in range(5):
            try:
                return self._catch_up()
            except ProjectionMoved:
                self._cache.clear()
                self._cursor = None
            except (msgspec.DecodeError, msgspec.ValidationError):
                # a row this version cannot read: the log is the truth, fold it again
                _reset_rows(self.store, self.name)
                self._cache.clear()
                self._cursor = None
        raise ProjectionMoved(f"projection '{self.name}' keeps moving (another process is folding it)")

    def follow(self, until: Callable[[], bool], *, poll: float = 1.0) -> int:
        """Keep the projection current as events are committed, until ``until()`` is true.

        Catches up, then sleeps on the store (LISTEN/NOTIFY on PostgreSQL, SQLite's data
        version) and catches up again from the cursor when something new is there: no fixed-rate
        polling loop, and nothing is skipped. ``poll`` only bounds how late ``until`` is checked.
        Returns how many events it applied.
        """
        applied = self.catch_up()
        while not until():
            if self.store.wait_for_events(self.cursor(), timeout=poll):
                applied += self.catch_up()
        return applied

    def _check_version(self) -> None:
        """Rows folded under other rules (an older a2a-tape) are dropped and rebuilt."""
        get_meta = self.store.get_meta
        marker = get_meta(self._rebuild_key)
        if marker:
            if owner_alive(marker):
                raise ProjectionBusy(f"projection '{self.name}' is being rebuilt by another process ({marker})")
            # a parallel rebuild died half way: its rows are not a consistent state
            _reset_rows(self.store, self.name)
            self.store.set_meta(self._rebuild_key, "")
            self._cache.clear()
            self._cursor = None
        key = f"projection:{self.name}:version"
        if get_meta(key) != STATE_VERSION + INDEX_VERSION:
            _reset_rows(self.store, self.name)
            self.store.set_meta(key, STATE_VERSION + INDEX_VERSION)
            self._cache.clear()
            self._cursor = None

    @property
    def _rebuild_key(self) -> str:
        return f"projection:{self.name}:rebuilding"

    def _catch_up(self) -> int:
        # The fold creates no reference cycles; the cyclic GC would only rescan the live
        # states and buffers again and again (a third of a rebuild's time): pause it.
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            return self._fold_from_cursor()
        finally:
            if gc_was_on:
                gc.enable()

    def _fold_from_cursor(self) -> int:
        start = 0 if self.tasks is not None else self.store.projection_cursor(self.name)
        if start != self._cursor:
            self._cache.clear()  # someone else committed: our live folds may be stale
        run = _CatchUp(self, start)
        read = run.run()
        self._cursor = run.committed
        return read

    def rebuild(self, *, workers: int | None = None, parallel_min: int = PARALLEL_MIN_EVENTS) -> None:
        """Drop the projection and fold the whole log again from position 0.

        A long log (SQLite or PostgreSQL) is folded by ``workers`` processes (default: one per core,
        at most 4), each taking one range of task ids holding about as many events as the others
        (tasks are independent; a task's events stay in log order). A marker in the store says a
        rebuild is under way, so a rebuild that dies half way is started again rather than
        trusted; the cursor is set once every part is in. When worker processes cannot be had,
        this process folds it all. :attr:`processes` says how many folded it.
        """
        st = self.store
        self._check_version()
        n = workers if workers is not None else min(os.cpu_count() or 1, 4)
        end = st.last_position()
        self.processes = 1
        if n > 1 and end >= parallel_min and st.backend in ("sqlite", "postgres"):
            self.processes = self._rebuild_parallel(n, end)
        else:
            self._reset()
        self.catch_up()

    def _reset(self) -> None:
        _reset_rows(self.store, self.name)
        self._cache.clear()
        self._cursor = None

    def _rebuild_parallel(self, n: int, end: int) -> int:
        """Fold the parts; returns how many processes did (1: this one alone, after all)."""
        import concurrent.futures
        import multiprocessing

        st = self.store
        ranges = st.task_ranges(n, end, lead=PARALLEL_LEAD)
        if len(ranges) < 2:  # one task, or nearly: nothing to share
            self._reset()
            return 1
        owner = new_owner()
        st.set_meta(self._rebuild_key, owner)
        try:
            ctx = multiprocessing.get_context("spawn")  # never fork a process holding SQLite connections
            with concurrent.futures.ProcessPoolExecutor(len(ranges) - 1, mp_context=ctx) as pool:
                # the first submit starts the workers (a fresh interpreter each, ~0.2 s of imports):
                # they start while this process resets the projection, and their parts wait in
                # the pool's queue, submitted once the reset is done (no worker writes before it)
                # while this process folds its own part at once
                warm = [pool.submit(_warm_up) for _ in ranges[1:]]
                self._reset()
                parts = [pool.submit(_fold_range, str(st.path), st.durability, self.name, r, end) for r in ranges[1:]]
                Projector(
                    st, self.name, cache_size=self.cache_size, commit_every=self.commit_every, tasks=ranges[0], upto=end
                )._catch_up()
                for f in warm + parts:
                    f.result()
            st.projection_commit(self.name, end, {}, expect=None)
            return len(ranges)
        except Exception:  # noqa: BLE001 - no worker processes here (or one died): fold in this one
            self._reset()
            return 1
        except BaseException:
            self._reset()
            raise
        finally:
            release_owner(owner)  # first: a marker left here if the next line fails is then stale
            st.set_meta(self._rebuild_key, "")

    def fold(self, task_id: str) -> TaskFold | None:
        fold = self._cache.get(task_id)
        if fold is not None:
            return fold
        raw = self.store.projection_load(self.name, [task_id]).get(task_id)
        if raw is None:
            return None
        try:
            return TaskFold.load(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.rebuild()  # an unreadable row: the log is the truth
            raw = self.store.projection_load(self.name, [task_id]).get(task_id)
            return None if raw is None else TaskFold.load(raw)

    def view(self, task_id: str, closed: Mapping[int, float] | None = None) -> TaskView | None:
        """The task's view; ``closed``: the exchanges that ended, by id (see :meth:`TaskFold.view`)."""
        fold = self.fold(task_id)
        return None if fold is None else fold.view(closed)

    def views(self, closed: Mapping[int, float] | None = None) -> Iterator[TaskView]:
        """Every task's view (as committed), in task id order."""
        try:
            views = [TaskFold.load(raw).view(closed) for _, raw in self.store.projection_rows(self.name)]
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.rebuild()  # an unreadable row: the log is the truth
            views = [TaskFold.load(raw).view(closed) for _, raw in self.store.projection_rows(self.name)]
        return iter(views)


class _CatchUp:
    """One catch-up of a projection from ``start``, in numbered steps:

    1. read the log after ``start`` in batches of fold rows (the narrow reader);
    2. fold each row into its task's fold: live in the LRU (the Projector's, kept between runs),
       else a state waiting to commit, else the row the batch's one query loaded, else one
       lookup, else a new fold; a fold evicted from the LRU while dirty waits as bytes;
    3. every ``commit_every`` events (and at the end), commit the dirty states, their task index
       rows and the cursor in one transaction; :class:`ProjectionMoved` when another process
       committed meanwhile.

    A fold is dirty (to write at the next commit) when it folded an event after the last
    committed position: every applied event sets ``last_position``, so no per-event set.
    """

    def __init__(self, proj: Projector, start: int) -> None:
        self.store = proj.store
        self.name = proj.name
        self.part = proj.tasks  # a part of a parallel rebuild: its commits do not guard the cursor
        self.upto = proj.upto
        self.cache = proj._cache
        self.cache_size = proj.cache_size
        self.commit_every = proj.commit_every
        self.start = self.committed = self.position = start
        self.pending: dict[str, bytes] = {}  # evicted dirty states, waiting for the next commit
        self.index: dict[str, TaskIndexRow] = {}  # the task index rows of the evicted dirty states
        # From cursor 0 with no rows stored (a rebuild), only tasks this run folded and committed
        # can have rows: skip the lookups of the others. (Another process committing meanwhile
        # moves the cursor, and our next commit raises ProjectionMoved.)
        # (A part of a parallel rebuild is fresh by construction: other parts hold other tasks.)
        self.fresh = self.part is not None or (
            start == 0 and next(iter(self.store.projection_rows(self.name)), None) is None
        )
        self.folded: set[str] = set()  # tasks this run has held (only kept while fresh)
        self.observers: dict[int | None, Seen] = {None: NO_OBSERVER}  # exchange id -> (observer, source)

    def run(self) -> int:
        """Steps 1-3; returns how many events were read."""
        read = since_commit = 0
        for rows in _fold_batches(self.store, self.start, min(2000, self.commit_every), self.upto, self.part):
            self.fold_batch(rows)
            read += len(rows)
            self.position = rows[-1][0]
            since_commit += len(rows)
            if since_commit >= self.commit_every:
                self.commit()
                since_commit = 0
        if since_commit:
            self.commit()
        return read

    def fold_batch(self, rows: list[FoldRow]) -> None:
        """Step 2 for one batch: the hot loop (a live fold costs a lookup and a move)."""
        cache, part = self.cache, self.part
        # one query for the tasks of this batch that are neither live nor waiting to commit
        queried = set(map(_TASK_ID, rows)) - cache.keys() - self.pending.keys()
        queried.discard(None)
        if self.fresh:
            queried &= self.folded
        loaded = self.store.projection_load(self.name, queried) if queried else {}
        observers = self.observers_of(rows)
        peek = peek_text_chunk
        for pos, row_task, seq, exchange_id, at, payload, origin in rows:
            # route(), inlined: this loop runs once per event of a rebuild, and a call costs
            chunk = peek(payload)  # the hot case (a plain text chunk) without the full decode
            if chunk is not None:
                item = None
                tid = row_task if row_task is not None else chunk.taskId
            else:
                item = decode_item(payload)
                tid = row_task if row_task is not None else item.task_id
            if tid is None or (part is not None and row_task is None and not in_range(tid, part)):
                continue
            fold = cache.get(tid)
            if fold is None:
                fold = self.take(tid, loaded, queried)
            else:
                cache.move_to_end(tid)
            # the run of the event (fold.runs): the row folds the task's latest run only
            seen = observers.get(exchange_id, NO_OBSERVER)
            runs = fold.s.runs
            if (not runs or (seen[0] is not None and seen[0] != runs[-1].observer)) and not enter_run(fold, seen, pos):
                continue  # an earlier run's event
            local = origin == "local"
            if chunk is not None and fold.apply_text(pos, exchange_id, at, chunk, local):
                continue  # the hot case, folded (TaskFold.fold would take the same step, one call deeper)
            fold.fold(pos, seq, exchange_id, at, payload, None, item, local=local)

    def observers_of(self, rows: list[FoldRow]) -> dict[int | None, Seen]:
        """Each exchange's observer (one query per batch for the exchanges not seen yet)."""
        observers = self.observers
        new = set(map(_EXCHANGE_ID, rows)) - observers.keys()
        if new:
            if len(observers) > _MAX_EXCHANGES:
                observers.clear()
                observers[None] = NO_OBSERVER
                new = set(map(_EXCHANGE_ID, rows)) - observers.keys()
            found = self.store.exchange_observers(i for i in new if i is not None)
            for i in new:
                observers[i] = found.get(i, NO_OBSERVER) if i is not None else NO_OBSERVER
        return observers

    def take(self, tid: str, loaded: dict[str, bytes], queried: set[str]) -> TaskFold:
        """The fold of a task that is not live, made live (the least recently used one evicted)."""
        raw = self.pending.pop(tid, None)
        if raw is None:
            raw = loaded.pop(tid, None)
        if raw is None and tid not in queried and (not self.fresh or tid in self.folded):
            # live at the start of the batch and evicted clean since (so committed), or named
            # only inside its payload
            raw = self.store.projection_load(self.name, [tid]).get(tid)
        fold = TaskFold(STATE_DECODER.decode(raw)) if raw is not None else TaskFold(tid)
        self.cache[tid] = fold
        if self.fresh:
            self.folded.add(tid)
            if len(self.folded) > _FRESH_MAX_TASKS:  # memory stays bounded: look rows up again
                self.fresh = False
                self.folded.clear()
        if len(self.cache) > self.cache_size:
            old_id, old = self.cache.popitem(last=False)
            if old.s.last_position > self.committed:
                self.pending[old_id] = old.dump()
                self.index[old_id] = _index_row(old.s)
        return fold

    def commit(self) -> None:
        """Step 3: the dirty states, their index rows and the cursor, in one transaction."""
        store, name, upserts, index = self.store, self.name, self.pending, self.index
        for tid, fold in self.cache.items():
            if fold.s.last_position > self.committed:
                upserts[tid] = fold.dump()
                index[tid] = _index_row(fold.s)
        expect = None if self.part is not None else self.committed
        with store.transaction():  # rows, index rows and cursor: one transaction
            if not store.projection_commit(name, self.position, upserts, expect=expect):
                raise ProjectionMoved(name)
            store.task_index_upsert(name, list(index.values()))
        index.clear()
        upserts.clear()
        self.committed = self.position


INDEX_VERSION = "+index1"
"""Part of the projection's version marker: rows folded before the task index existed (schema
v3) have no index rows, so they are folded again."""


def _index_row(s: TaskState) -> TaskIndexRow:
    return (s.task_id, s.last_position, s.last_at, shown_state(s), s.context_id)


def _reset_rows(store: Projections, name: str) -> None:
    """Drop a projection's rows, its task index rows and its cursor, in one transaction."""
    with store.transaction():
        store.projection_reset(name)
        store.task_index_reset(name)


def _warm_up() -> None:
    """Run in a fresh worker process while the parent resets the projection: loading this
    function imports this module and everything it needs, which is the point."""


def _fold_range(location: str, durability: Durability, name: str, tasks: TaskRange, end: int) -> int:
    """One part of a parallel rebuild, in its own process (its own connection to the store)."""
    from a2a_tape.store import open_store

    st = open_store(location, create=False, durability=durability)
    try:
        return Projector(st, name, tasks=tasks, upto=end)._catch_up()
    finally:
        st.close()
