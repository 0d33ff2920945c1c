"""Projections kept in the store: :class:`Projector` brings task views up to date incrementally.

The fold rules are in :mod:`replay.fold`, the view shapes in :mod:`replay.views`; both are
re-exported here, the module callers import from.
"""

from __future__ import annotations

import gc
from collections import OrderedDict
from collections.abc import Callable, Iterator

import msgspec

from store import decode_item
from store.decode import peek_text_chunk

from .fold import STATE_DECODER, STATE_VERSION, TaskFold, TaskState, event_task_id, fold_events
from .views import ArtifactView, Fault, IgnoredEvent, TaskView, ToolCall, encode_view, views_digest

_FRESH_MAX_TASKS = 100_000  # task ids a rebuild remembers to skip row lookups (~8 MB at most)

__all__ = [
    "ArtifactView",
    "Fault",
    "IgnoredEvent",
    "ProjectionMoved",
    "Projector",
    "TaskFold",
    "TaskState",
    "TaskView",
    "ToolCall",
    "encode_view",
    "event_task_id",
    "fold_events",
    "views_digest",
]

# -- the persisted, incremental projection ----------------------------------------------------


FoldRow = tuple[int, "str | None", int, "int | None", float, bytes]
"""(position, task_id, seq, exchange_id, received_at, payload): what a fold reads of an event."""


def _fold_batches(store, start: int, batch: int) -> Iterator[list[FoldRow]]:
    """The log after ``start`` in batches of fold rows: the store's narrow reader when it has
    one (SQLite: six columns, no :class:`StoredEvent` per row), else ``read_from``."""
    narrow = getattr(store, "read_fold_rows", None)
    if narrow is not None:
        yield from narrow(start, batch=batch)
        return
    rows: list[FoldRow] = []
    for ev in store.read_from(start):
        rows.append((ev.position, ev.task_id, ev.seq, ev.exchange_id, ev.received_at, ev.payload))
        if len(rows) >= batch:
            yield rows
            rows = []
    if rows:
        yield rows


class ProjectionMoved(Exception):
    """Another process moved the projection's cursor while we folded."""


class Projector:
    """Task views kept in the store, brought up to date with :meth:`catch_up`.

    States live in ``projection_rows`` (one msgpack row per task) and the cursor (last position
    applied) is committed in the same transaction (``projection_commit``): a crash between two
    commits replays the events after the cursor, never twice. Live folds sit in an LRU of
    ``cache_size`` tasks; evicted dirty states wait as bytes until the next commit, which comes
    every ``commit_every`` events, so memory does not grow with the log.
    """

    def __init__(self, store, name: str = "tasks", *, cache_size: int = 256, commit_every: int = 10_000) -> None:
        self.store = store
        self.name = name
        self.cache_size = max(1, cache_size)
        self.commit_every = max(1, commit_every)
        self._cache: OrderedDict[str, TaskFold] = OrderedDict()
        self._cursor: int | None = None

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
                self.store.projection_reset(self.name)
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
        get_meta = getattr(self.store, "get_meta", None)
        if get_meta is None:
            return
        key = f"projection:{self.name}:version"
        if get_meta(key) != STATE_VERSION:
            self.store.projection_reset(self.name)
            self.store.set_meta(key, STATE_VERSION)
            self._cache.clear()
            self._cursor = None

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
        store = self.store
        name = self.name
        start = store.projection_cursor(name)
        if start != self._cursor:
            self._cache.clear()  # someone else committed: our live folds may be stale
        cache = self._cache
        cache_size = self.cache_size
        commit_every = self.commit_every
        pending: dict[str, bytes] = {}  # evicted dirty states, waiting for the next commit
        # A fold is dirty (to write at the next commit) when it folded an event after the last
        # committed position: every applied event sets ``last_position``, so no per-event set.
        committed = start
        position = start
        read = 0
        since_commit = 0
        peek = peek_text_chunk
        load_state = STATE_DECODER.decode
        # From cursor 0 with no rows stored (a rebuild), only tasks this run folded and committed
        # can have rows: skip the lookups of the others. (Another process committing meanwhile
        # moves the cursor, and our next commit raises ProjectionMoved.)
        fresh = start == 0 and next(iter(store.projection_rows(name)), None) is None
        folded: set[str] = set()  # tasks this run has held (only kept while fresh)

        def commit() -> None:
            nonlocal committed, since_commit
            upserts = pending
            for tid, fold in cache.items():
                if fold.s.last_position > committed:
                    upserts[tid] = fold.dump()
            if not store.projection_commit(name, position, upserts, expect=committed):
                raise ProjectionMoved(name)
            committed = position
            self._cursor = position
            pending.clear()
            since_commit = 0

        batch_size = min(2000, commit_every)
        for rows in _fold_batches(store, start, batch_size):
            # one query for the tasks of this batch that are neither live nor waiting to commit
            queried = {r[1] for r in rows if r[1] is not None} - cache.keys() - pending.keys()
            if fresh:
                queried &= folded
            loaded = store.projection_load(name, queried) if queried else {}
            for pos, row_task, seq, exchange_id, at, payload in rows:
                chunk = peek(payload)  # the hot case (a plain text chunk) without the full decode
                if chunk is not None:
                    item = None
                    tid = row_task if row_task is not None else chunk.taskId
                else:
                    item = decode_item(payload)  # once per event, dropped right after the fold
                    tid = row_task if row_task is not None else item.task_id
                if tid is None:
                    continue
                fold = cache.get(tid)
                if fold is None:
                    raw = pending.pop(tid, None)
                    if raw is None:
                        raw = loaded.pop(tid, None)
                    if raw is None and tid not in queried and (not fresh or tid in folded):
                        # live at the start of the batch and evicted clean since (so committed),
                        # or named only inside its payload
                        raw = store.projection_load(name, [tid]).get(tid)
                    fold = TaskFold(load_state(raw)) if raw is not None else TaskFold(tid)
                    cache[tid] = fold
                    if fresh:
                        folded.add(tid)
                        if len(folded) > _FRESH_MAX_TASKS:  # memory stays bounded: look rows up again
                            fresh = False
                            folded.clear()
                    if len(cache) > cache_size:
                        old_id, old = cache.popitem(last=False)
                        if old.s.last_position > committed:
                            pending[old_id] = old.dump()
                else:
                    cache.move_to_end(tid)
                if item is None:
                    if fold.apply_text(pos, exchange_id, at, chunk):
                        continue
                    item = decode_item(payload)
                fold._apply(pos, seq, exchange_id, at, item)
            read += len(rows)
            position = rows[-1][0]
            since_commit += len(rows)
            if since_commit >= commit_every:
                commit()
        if read:
            if since_commit:
                commit()
        else:
            self._cursor = start
        return read

    def rebuild(self) -> None:
        """Drop the projection and fold the whole log again from position 0."""
        self.store.projection_reset(self.name)
        self._cache.clear()
        self._cursor = None
        self.catch_up()

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

    def view(self, task_id: str) -> TaskView | None:
        fold = self.fold(task_id)
        return None if fold is None else fold.view()

    def views(self) -> Iterator[TaskView]:
        """Every task's view (as committed), in task id order."""
        try:
            views = [TaskFold.load(raw).view() for _, raw in self.store.projection_rows(self.name)]
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.rebuild()  # an unreadable row: the log is the truth
            views = [TaskFold.load(raw).view() for _, raw in self.store.projection_rows(self.name)]
        return iter(views)
