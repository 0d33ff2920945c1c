"""What a store offers, as typing Protocols split by capability; :class:`Store` is all of them.

Both backends (:class:`a2a_tape.store.sqlite.SqliteStore`, :class:`a2a_tape.store.postgres.PostgresStore`)
satisfy every protocol here; ``store/_conformance.py`` makes mypy prove it. A consumer names the
narrowest capability it uses (a reader of tasks takes an :class:`EventLog`, the idempotency table a
:class:`IdempotencyStore`, the search index a :class:`SearchStore`), so any backend, or a test's own
small store, can be passed. Capabilities that are always used together form a chain, as the
eventsourcing library's recorders do (``ApplicationRecorder`` is an ``AggregateRecorder``): an index
is a :class:`ProjectionStore`, which reads the :class:`EventLog`; a consumer names one protocol, not
a combination of its own.

Every method may raise a :class:`a2a_tape.store.errors.StoreError`; the machine's faults arrive as
its :class:`~a2a_tape.store.errors.StoreUnavailable` subclasses (locked, disk full, read-only,
connection lost), never as a driver's own exception.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Literal, Protocol

from a2a_tape.store.indexes import FindingsRow, SearchRow, TaskIndexRow
from a2a_tape.store.paging import TaskRange
from a2a_tape.store.records import Exchange, IdempotencyRecord, NewEvent, StoredEvent, TaskEvents

Durability = Literal["full", "normal"]
"""``full``: every commit is on disk before it returns; ``normal``: it may be lost on power loss."""

FoldRow = tuple[int, str | None, int, int | None, float, bytes, str]
"""``(position, task_id, seq, exchange_id, received_at, payload, origin)``: what a fold reads of an event."""


class StoreHandle(Protocol):
    """Where the log is and how it was opened; closing it; one transaction around several writes."""

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgres``."""
        ...

    @property
    def location(self) -> str:
        """Where the log lives, fit for messages: never a password."""
        ...

    @property
    def path(self) -> str | os.PathLike[str]:
        """What :func:`a2a_tape.store.open_store` opens again (a URL may hold a password: never print it)."""
        ...

    @property
    def durability(self) -> Durability: ...

    @property
    def busy_timeout(self) -> float | None:
        """Seconds a write waits for another writer's lock before ``DatabaseLocked`` (None: the backend's own)."""
        ...

    @property
    def readonly(self) -> bool:
        """Opened read-only (or on read-only media): every write raises ``ReadOnlyStore``."""
        ...

    def close(self) -> None: ...

    def transaction(self) -> AbstractContextManager[object]:
        """One write transaction around several calls: all of them or nothing."""
        ...

    def without_waiting(self) -> AbstractContextManager[None]:
        """Write transactions this thread begins inside do not wait for a lock another writer
        holds (another process, another thread of this one): they raise ``WouldWait`` before
        writing anything. For the small commits an event loop makes itself, which must never
        stall it; the caller retries on a worker thread, where the busy timeout applies."""
        ...

    def integrity_check(self) -> str:
        """``ok``, or what the backend found wrong with its storage."""
        ...


class EventLog(Protocol):
    """The append-only log of events, idempotent by ``(task_id, seq)``."""

    def append_batch(self, events: Sequence[NewEvent]) -> list[StoredEvent]: ...

    def append(self, event: NewEvent) -> StoredEvent: ...

    def read_from(self, position: int = 0, *, limit: int | None = None, batch: int = 5000) -> Iterator[StoredEvent]:
        """Events after ``position``, in log order."""
        ...

    def read_task(self, task_id: str) -> list[StoredEvent]: ...

    def iter_task(
        self, task_id: str, *, after: int = 0, limit: int | None = None, batch: int = 5000
    ) -> Iterator[StoredEvent]:
        """``read_task`` a page at a time: the task's events after position ``after``, in log
        order, ``limit`` at most (a long task is shown a page at a time, never read whole)."""
        ...

    def read_exchange(self, exchange_id: int) -> list[StoredEvent]: ...

    def iter_exchange(self, exchange_id: int, *, batch: int = 5000) -> Iterator[StoredEvent]: ...

    def last_position(self) -> int: ...

    def count_events(self) -> int: ...

    def has_task(self, task_id: str) -> bool: ...

    def task_events(self) -> list[TaskEvents]: ...

    def task_ids_with_prefix(self, prefix: str) -> list[str]: ...

    def tasks_touched(self, after: int, upto: int) -> list[str]:
        """The tasks with an event in positions ``(after, upto]``."""
        ...


class ExchangeLog(Protocol):
    """The HTTP exchanges the events arrived in (request, response head, outcome)."""

    def begin_exchange(self, exchange: Exchange) -> int: ...

    def update_exchange(self, exchange_id: int, **fields: object) -> None: ...

    def get_exchange(self, exchange_id: int) -> Exchange | None: ...

    def exchanges(self, task_id: str | None = None, *, after_id: int = 0) -> list[Exchange]: ...

    def exchanges_without_task(self) -> list[Exchange]:
        """The exchanges no event names a task for (a lone Message reply, a failure before one)."""
        ...

    def exchanges_open_within(self, start: float, end: float) -> list[Exchange]:
        """The exchanges open at some moment of ``[start, end]`` (begun by ``end``, not ended before ``start``)."""
        ...

    def last_exchange_id(self) -> int:
        """The highest exchange id in the log (0: none), by the primary key."""
        ...


class IdempotencyStore(Protocol):
    """Idempotency keys with their request hash and expiry (the proxy's replay-safe retries)."""

    def idem_get(self, key: str, *, now: float | None = None) -> IdempotencyRecord | None: ...

    def idem_claim(self, record: IdempotencyRecord) -> tuple[IdempotencyRecord, bool]: ...

    def idem_update(
        self, key: str, *, task_id: str | None = None, state: str | None = None, exchange_id: int | None = None
    ) -> None: ...

    def idem_release(self, key: str) -> None: ...

    def idem_all(self) -> list[IdempotencyRecord]: ...

    def idem_expire(self, now: float | None = None) -> int: ...


class MetaStore(Protocol):
    """A small key-value table (version markers, the running proxy)."""

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


class LeasesAndMeta(MetaStore, Protocol):
    """Named leases with expiry (one recoverer per task), and the key-value table."""

    def lease_acquire(
        self, name: str, owner: str, ttl: float, *, now: float | None = None, take_over: str | None = None
    ) -> bool: ...

    def lease_holder(self, name: str, *, now: float | None = None) -> str | None: ...

    def lease_release(self, name: str, owner: str) -> None: ...


class Following(Protocol):
    """Waiting for events other writers commit (LISTEN/NOTIFY on PostgreSQL, the data version on SQLite)."""

    def last_position(self) -> int: ...

    def wait_for_events(self, after: int, timeout: float) -> bool:
        """True once an event past ``after`` is committed; False after ``timeout`` seconds."""
        ...


class AppendLog(EventLog, StoreHandle, Protocol):
    """An event log that names itself in its errors: what the group-commit writer appends to."""


class Recordings(EventLog, ExchangeLog, Protocol):
    """Events and the exchanges they arrived in: what a tape is written from, what replay serves."""


class RecordingStore(Recordings, StoreHandle, Protocol):
    """Recordings written in one transaction: what a tape is imported into."""


# -- what is kept from the log -------------------------------------------------------------------
# As the eventsourcing library's recorders do, the projection capabilities form a chain: each
# index is a ProjectionStore (rows and a cursor committed together, the log they are read from)
# with its own rows, so a consumer names one protocol, the index it keeps or reads.


class ProjectionStore(EventLog, MetaStore, StoreHandle, Protocol):
    """A projection of the log: its rows and cursor, committed together; its version marker
    (:class:`MetaStore`); the log it is read from, with the narrow readers a rebuild uses; and where
    the log is (a parallel rebuild opens it again in each worker)."""

    def projection_cursor(self, name: str) -> int: ...

    def projection_load(self, name: str, keys: Iterable[str]) -> dict[str, bytes]: ...

    def projection_rows(self, name: str, *, batch: int = 500) -> Iterator[tuple[str, bytes]]: ...

    def projection_commit(
        self, name: str, position: int, upserts: dict[str, bytes], *, expect: int | None = None
    ) -> bool: ...

    def projection_reset(self, name: str) -> None: ...

    def read_fold_rows(
        self, position: int = 0, *, batch: int = 5000, upto: int | None = None, tasks: TaskRange | None = None
    ) -> Iterator[list[FoldRow]]: ...

    def task_ranges(self, parts: int, upto: int | None = None, *, lead: float = 0.0) -> list[TaskRange]: ...

    def exchange_observers(self, ids: Iterable[int]) -> dict[int, tuple[str | None, str | None]]:
        """The observer and source of each of these exchanges (observer None: it joins its task's
        latest run)."""
        ...


class TaskIndexStore(ProjectionStore, Protocol):
    """A task projection's index rows (newest by last event, filtered), kept with its task rows:
    what a listing reads."""

    def task_index_upsert(self, name: str, rows: Sequence[TaskIndexRow]) -> None: ...

    def task_index_reset(self, name: str) -> None: ...

    def task_index_count(
        self,
        name: str,
        *,
        states: Iterable[str] | None = None,
        context: str | None = None,
        since: float | None = None,
    ) -> int: ...

    def task_index_page(
        self,
        name: str,
        *,
        limit: int,
        before: int | None = None,
        states: Iterable[str] | None = None,
        context: str | None = None,
        since: float | None = None,
    ) -> list[tuple[str, int]]: ...


class Projections(TaskIndexStore, Following, Protocol):
    """What a :class:`a2a_tape.fold.projection.Projector` needs: its rows and task index, and
    following the log as it grows."""


class SearchStore(ProjectionStore, Protocol):
    """The search index: one row per searchable field of an event, and its full-text query."""

    def search_can_answer(self, text: str) -> bool: ...

    def search_commit(self, position: int, rows: Sequence[SearchRow], *, expect: int | None = None) -> bool: ...

    def search_match(
        self, text: str | None, *, task_id: str | None = None, batch: int = 1000
    ) -> Iterator[SearchRow]: ...

    def search_reset(self) -> None: ...


class FindingsStore(Recordings, ProjectionStore, Protocol):
    """Doctor's findings: one row per task, its cursor moved with the last part; doctor reads the
    tasks' events and exchanges."""

    def findings_commit(
        self, position: int | None, rows: Sequence[FindingsRow], *, expect: int | None = None
    ) -> bool: ...

    def findings_reset(self) -> None: ...

    def findings_rows(self, *, faulty_only: bool = True, batch: int = 500) -> Iterator[FindingsRow]: ...

    def findings_counts(self, task_id: str) -> tuple[int, int] | None: ...

    def findings_totals(self) -> tuple[int, int, int]: ...

    def findings_unsettled(self) -> list[str]: ...


class Store(RecordingStore, IdempotencyStore, LeasesAndMeta, Projections, SearchStore, FindingsStore, Protocol):
    """Every capability: what :func:`a2a_tape.store.open_store` returns."""

    def remove_tasks(self, task_ids: Sequence[str]) -> tuple[int, int]:
        """Remove tasks, their exchanges and projection rows: (events, exchanges) removed
        (:func:`a2a_tape.store.removal.remove_tasks` is the call that keeps positions unrepeated)."""
        ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...
