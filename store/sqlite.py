"""The event log on SQLite (WAL): the embedded default backend.

Hot paths (append, read from a position) use the raw ``sqlite3`` connection with prepared
statements and batches; sqlite-utils serves the schema and inspection. One connection per
store object, guarded by a lock so a worker thread (the group-commit writer) and the event
loop can share it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from .append_plan import EXCHANGE_FIELDS as _EXCHANGE_FIELDS
from .append_plan import ROW_WIDTH, BatchPlan, Key, Run
from .append_plan import exchange_from_row as _row_exchange
from .append_plan import to_column as _to_column
from .driver_errors import guard_public, on_readonly_media, translate
from .errors import NotADatabase, ReadOnlyStore, StoreError, StoreNotFound, StoreUnavailable, WouldWait
from .indexes import (
    DOCTOR_CURSOR,
    FIELDS_PER_EVENT,
    SEARCH_CURSOR,
    FindingsRow,
    SearchRow,
    TaskIndexRow,
    fts_phrase,
    task_filter,
)
from .interface import Durability, FoldRow
from .paging import TaskRange, fold_rows_filter, pages, sample_positions, split_ranges
from .records import Exchange, IdempotencyRecord, NewEvent, StoredEvent, TaskEvents
from .schema import SCHEMA_VERSION, migrate
from .write_lock import NoWait, begin_immediate

DEFAULT_BUSY_TIMEOUT = 30.0
"""Seconds a write waits for another process's write transaction before :class:`DatabaseLocked`."""

_EVENT_COLS = "position, task_id, seq, exchange_id, sse_event, payload, received_at, mono, origin"
_INSERT_BLOCK = 64
"""Rows per INSERT statement: one statement step per row (``executemany``) costs a quarter of
an append; 64 rows of 9 values stay far below SQLite's limit of bound variables."""
_INSERT_SQL = {
    n: f"INSERT INTO events ({_EVENT_COLS}) VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * n)
    for n in (1 << k for k in range(_INSERT_BLOCK.bit_length()))
}


def _insert_events(cur: sqlite3.Cursor, values: list[object]) -> None:
    """Insert the rows of ``values`` (flat, :data:`ROW_WIDTH` per row, :data:`EventRow` order):
    blocks of :data:`_INSERT_BLOCK`, the rest in powers of two (a handful of statements, all cached)."""
    i, n = 0, len(values) // ROW_WIDTH
    while i < n:
        size = min(_INSERT_BLOCK, 1 << ((n - i).bit_length() - 1))
        cur.execute(_INSERT_SQL[size], values[i * ROW_WIDTH : (i + size) * ROW_WIDTH])
        i += size


def _run_sql(n: int) -> str:
    """A many-row INSERT for a :class:`Run`: the shared columns bound once (``?1``-``?6``: task,
    exchange, first position, first seq, SSE event name, origin), three values per row."""
    rows = (f"(?3 + {k}, ?1, ?4 + {k}, ?2, ?5, ?{7 + 3 * k}, ?{8 + 3 * k}, ?{9 + 3 * k}, ?6)" for k in range(n))
    return f"INSERT INTO events ({_EVENT_COLS}) VALUES " + ", ".join(rows)


_RUN_SQL = {n: _run_sql(n) for n in (1 << k for k in range(_INSERT_BLOCK.bit_length()))}


def _insert_run(cur: sqlite3.Cursor, run: Run) -> None:
    """Insert a :class:`Run` (a stream's batch): a third of the bound values of :func:`_insert_events`."""
    n = len(run.payloads)
    per: list[object] = [None] * (3 * n)
    per[0::3] = run.payloads
    per[1::3] = run.received_at
    per[2::3] = run.mono
    i = 0
    while i < n:
        size = min(_INSERT_BLOCK, 1 << ((n - i).bit_length() - 1))
        shared = [run.task_id, run.exchange_id, run.position + i, run.seq + i, run.sse_event, run.origin]
        cur.execute(_RUN_SQL[size], shared + per[3 * i : 3 * (i + size)])
        i += size


def _row_event(row: tuple[Any, ...]) -> StoredEvent:
    return StoredEvent(*row)


@guard_public
class SqliteStore:
    """The event log in one SQLite file. See :mod:`a2a_tape.store.interface` for the API contract.

    ``busy_timeout``: seconds a write waits for another process's write transaction, then
    :class:`DatabaseLocked`. ``readonly``: open with ``mode=ro`` (nothing is created or migrated,
    every write raises :class:`ReadOnlyStore`); on read-only media, where SQLite cannot create the
    ``-shm`` file a WAL reader needs, the file is opened ``immutable=1`` instead.
    """

    backend = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        durability: Durability = "full",
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        readonly: bool = False,
    ) -> None:
        self.path = Path(path)
        self.durability: Durability = durability
        self.busy_timeout: float | None = busy_timeout
        self.readonly = readonly
        self.immutable = False
        if (readonly or not create) and not self.path.exists():
            raise StoreNotFound(f"no database at {self.path}")
        if create and not readonly and not self.path.parent.exists():
            raise StoreError(f"cannot create {self.path}: directory {self.path.parent} does not exist")
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory, not a database file")
        self._lock = threading.RLock()
        self._nowait = NoWait()  # see without_waiting
        self._depth = 0
        self._commits = 0  # our own commits: PRAGMA data_version only counts other connections'
        if readonly:
            self._conn = self._open_readonly()
            return
        try:
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._fault(exc, "open") from None
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
            self._conn.execute("PRAGMA foreign_keys=OFF")
            migrate(self._conn)
        except sqlite3.Error as exc:
            self._conn.close()
            raise self._fault(exc, "use") from None

    def _fault(self, exc: sqlite3.Error, doing: str) -> StoreError:
        return translate(exc, self.location, self.busy_timeout) or StoreError(f"cannot {doing} {self.path}: {exc}")

    def _connect_uri(self, query: str) -> sqlite3.Connection:
        uri = f"file:{urllib.parse.quote(str(self.path.absolute()))}?{query}"
        return sqlite3.connect(
            uri, uri=True, timeout=self.busy_timeout or 0, isolation_level=None, check_same_thread=False
        )

    def _open_readonly(self) -> sqlite3.Connection:
        """``mode=ro`` (it reads a ``-wal`` through an existing ``-shm``, even on read-only media);
        when that cannot start on read-only media (no ``-shm`` can be made there), ``immutable=1``,
        but only if no commit waits in a ``-wal`` file (immutable reads the main file alone)."""
        attempts = ["mode=ro"]
        wal = self.path.with_name(self.path.name + "-wal")
        pending_wal = wal.exists() and wal.stat().st_size > 0
        read_only_media = on_readonly_media(self.path)
        if read_only_media and not pending_wal:
            # no -shm can be made here, and no commit waits in a -wal file: the file alone is the log
            attempts.append("mode=ro&immutable=1")
        last: sqlite3.Error | None = None
        for query in attempts:
            conn: sqlite3.Connection | None = None
            try:
                conn = self._connect_uri(query)
                found = conn.execute("PRAGMA user_version").fetchone()[0]
            except sqlite3.Error as exc:
                if conn is not None:
                    conn.close()
                last = exc
                if isinstance(self._fault(exc, "read"), NotADatabase):
                    break
                continue
            self.immutable = "immutable" in query
            if found > SCHEMA_VERSION:
                conn.close()
                migrate_error = f"the database has schema version {found}, this a2a-tape knows up to {SCHEMA_VERSION}"
                raise StoreError(f"{self.location}: {migrate_error}: upgrade a2a-tape")
            if found < SCHEMA_VERSION:
                conn.close()
                raise ReadOnlyStore(
                    f"{self.location} has schema version {found} and needs an upgrade to {SCHEMA_VERSION}, "
                    "which a read-only open cannot do: open it once with a writing command"
                )
            return conn
        assert last is not None
        fault = self._fault(last, "read")
        if read_only_media and pending_wal and not isinstance(fault, NotADatabase):
            raise StoreUnavailable(
                f"cannot read {self.location} here: commits wait in its -wal file, and reading them needs a -shm "
                "file this read-only place cannot hold (copy the log to writable storage)"
            ) from None
        raise fault from None

    @property
    def location(self) -> str:
        return str(self.path)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self) -> _WriteTxn:
        return _WriteTxn(self)

    def transaction(self) -> _WriteTxn:
        """One write transaction around several calls (an atomic import): all or nothing."""
        return _WriteTxn(self)

    def without_waiting(self) -> AbstractContextManager[None]:
        """Write transactions this thread begins inside raise :class:`WouldWait` instead of
        waiting: for this store's lock (another thread's transaction) or the database's (another
        connection's, for the busy timeout). Nothing is written when it is raised."""
        return self._nowait.block()

    # -- events ------------------------------------------------------------------------------

    def append_batch(self, events: Sequence[NewEvent]) -> list[StoredEvent]:
        """Append events in one transaction; return them as stored, in order.

        An event with an explicit ``seq`` that is already stored with the same bytes is a
        no-op (its stored row is returned); with other bytes it raises :class:`AppendConflict`
        and nothing of the batch is written.
        """
        if not events:
            return []
        with self._write() as cur:
            start = cur.execute("SELECT COALESCE(MAX(position), 0) FROM events").fetchone()[0]
            plan = BatchPlan(
                events, lambda keys: self._max_seqs(cur, keys), lambda key, seq: self._find(cur, key, seq), start
            )
            if plan.runs:
                for run in plan.runs:
                    _insert_run(cur, run)
            elif plan.count:
                _insert_events(cur, plan.values)
            return plan.stored()

    def append(self, event: NewEvent) -> StoredEvent:
        return self.append_batch([event])[0]

    @staticmethod
    def _max_seqs(cur: sqlite3.Cursor, keys: list[Key]) -> dict[Key, int]:
        out: dict[tuple[str | None, int | None], int] = {}
        tasks = [k[0] for k in keys if k[0] is not None]
        for i in range(0, len(tasks), 500):
            chunk = tasks[i : i + 500]
            # one index probe per task (a GROUP BY would read every row of those tasks)
            rows = cur.execute(
                "SELECT value, (SELECT MAX(seq) FROM events WHERE task_id = value) FROM json_each(?)",
                (msgspec.json.encode(chunk).decode(),),
            ).fetchall()
            out.update(((t, None), m) for t, m in rows if m is not None)
        for _, exchange_id in (k for k in keys if k[0] is None):
            row = cur.execute(
                "SELECT MAX(seq) FROM events WHERE task_id IS NULL AND exchange_id IS ?", (exchange_id,)
            ).fetchone()
            if row[0] is not None:
                out[(None, exchange_id)] = row[0]
        return out

    @staticmethod
    def _find(cur: sqlite3.Cursor, key: tuple[str | None, int | None], seq: int) -> StoredEvent | None:
        task_id, exchange_id = key
        if task_id is not None:
            row = cur.execute(
                f"SELECT {_EVENT_COLS} FROM events WHERE task_id = ? AND seq = ?", (task_id, seq)
            ).fetchone()
        else:
            row = cur.execute(
                f"SELECT {_EVENT_COLS} FROM events WHERE task_id IS NULL AND exchange_id IS ? AND seq = ?",
                (exchange_id, seq),
            ).fetchone()
        return _row_event(row) if row else None

    def read_from(self, position: int = 0, *, limit: int | None = None, batch: int = 5000) -> Iterator[StoredEvent]:
        """Events with a position greater than ``position``, in log order, read in batches."""
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE position > ? ORDER BY position LIMIT ?"
        for rows in pages(lambda after, n: self._fetch(sql, (after, n)), position, batch, limit):
            for row in rows:
                yield StoredEvent(*row)

    def _fetch(self, sql: str, params: tuple[object, ...]) -> list[Any]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def read_fold_rows(
        self, position: int = 0, *, batch: int = 5000, upto: int | None = None, tasks: TaskRange | None = None
    ) -> Iterator[list[FoldRow]]:
        """The log after ``position`` as batches of ``(position, task_id, seq, exchange_id,
        received_at, payload)`` tuples, in log order.

        The narrow reader of a projection rebuild: six columns and plain tuples (building a
        nine-field :class:`StoredEvent` per row costs more than reading it). ``upto``: stop at
        that position. ``tasks=(low, high)``: only the rows of tasks in that range
        (:func:`store.paging.in_range`), plus the rows with no task id (every range gets those;
        the caller knows which task, if any, their payload names).
        """
        cond, extra = fold_rows_filter(upto, tasks, "?")
        sql = f"SELECT position, task_id, seq, exchange_id, received_at, payload FROM events WHERE position > ?{cond}"
        sql += " ORDER BY position LIMIT ?"
        return pages(lambda after, n: self._fetch(sql, (after, *extra, n)), position, batch)

    def task_ranges(self, parts: int, upto: int | None = None, *, lead: float = 0.0) -> list[TaskRange]:
        """The tasks of the log (up to ``upto``) in at most ``parts`` ranges of about as many
        events each (the first one ``lead`` more: :func:`store.paging.split_ranges`), from the
        task ids of a few thousand events spread over the log."""
        with self._lock:
            # two subqueries: MIN and MAX in one SELECT would scan the whole table
            first, last = self._conn.execute(
                "SELECT (SELECT MIN(position) FROM events), (SELECT MAX(position) FROM events)"
            ).fetchone()
            if first is None:
                return [(None, None)]
            positions = sample_positions(first, last if upto is None else min(last, upto))
            sample: list[str] = []
            for i in range(0, len(positions), 500):
                chunk = positions[i : i + 500]
                sample += [
                    r[0]
                    for r in self._conn.execute(
                        f"SELECT task_id FROM events WHERE task_id IS NOT NULL AND position IN ({', '.join('?' * len(chunk))})",
                        chunk,
                    )
                ]
        return split_ranges(sample, parts, lead)

    def read_task(self, task_id: str) -> list[StoredEvent]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_EVENT_COLS} FROM events WHERE task_id = ? ORDER BY position", (task_id,)
            ).fetchall()
        return [StoredEvent(*r) for r in rows]

    def read_exchange(self, exchange_id: int) -> list[StoredEvent]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_EVENT_COLS} FROM events WHERE exchange_id = ? ORDER BY position", (exchange_id,)
            ).fetchall()
        return [StoredEvent(*r) for r in rows]

    def iter_exchange(self, exchange_id: int, *, batch: int = 5000) -> Iterator[StoredEvent]:
        """``read_exchange`` in batches: a long exchange is served while the rest is still read."""
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE exchange_id = ? AND position > ? ORDER BY position LIMIT ?"
        for rows in pages(lambda after, n: self._fetch(sql, (exchange_id, after, n)), 0, batch):
            for row in rows:
                yield StoredEvent(*row)

    def last_position(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COALESCE(MAX(position), 0) FROM events").fetchone()[0])

    def count_events(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def has_task(self, task_id: str) -> bool:
        with self._lock:
            return (
                self._conn.execute("SELECT 1 FROM events WHERE task_id = ? LIMIT 1", (task_id,)).fetchone() is not None
            )

    def task_events(self) -> list[TaskEvents]:
        """Per task: event count, first / last arrival and positions (log order of first event)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT task_id, COUNT(*), MIN(received_at), MAX(received_at), MIN(position), MAX(position) "
                "FROM events WHERE task_id IS NOT NULL GROUP BY task_id ORDER BY MIN(position)"
            ).fetchall()
        return [TaskEvents(*r) for r in rows]

    def task_ids_with_prefix(self, prefix: str) -> list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT task_id FROM events WHERE task_id >= ? AND task_id < ? ORDER BY task_id LIMIT 10",
                (prefix, prefix + "\uffff"),
            ).fetchall()
        return [r[0] for r in rows]

    # -- exchanges ---------------------------------------------------------------------------

    def begin_exchange(self, exchange: Exchange) -> int:
        values = [_to_column(f, getattr(exchange, f)) for f in _EXCHANGE_FIELDS]
        with self._write() as cur:
            cur.execute(
                f"INSERT INTO exchanges ({', '.join(_EXCHANGE_FIELDS)}) VALUES ({', '.join('?' * len(values))})",
                values,
            )
            new_id = cur.lastrowid
        assert new_id is not None  # an INSERT sets it
        exchange.id = new_id
        return new_id

    def update_exchange(self, exchange_id: int, **fields: object) -> None:
        unknown = set(fields) - set(_EXCHANGE_FIELDS)
        if unknown:
            raise StoreError(f"unknown exchange fields: {sorted(unknown)}")
        if not fields:
            return
        with self._write() as cur:
            cur.execute(
                f"UPDATE exchanges SET {', '.join(f'{k} = ?' for k in fields)} WHERE id = ?",
                [*(_to_column(k, v) for k, v in fields.items()), exchange_id],
            )

    def get_exchange(self, exchange_id: int) -> Exchange | None:
        with self._lock:
            row = self._conn.execute(
                f"SELECT id, {', '.join(_EXCHANGE_FIELDS)} FROM exchanges WHERE id = ?", (exchange_id,)
            ).fetchone()
        return _row_exchange(row) if row else None

    def exchanges(self, task_id: str | None = None, *, after_id: int = 0) -> list[Exchange]:
        sql = f"SELECT id, {', '.join(_EXCHANGE_FIELDS)} FROM exchanges WHERE id > ?"
        args: list[object] = [after_id]
        if task_id is not None:
            sql += " AND (task_id = ? OR id IN (SELECT DISTINCT exchange_id FROM events WHERE task_id = ?))"
            args += [task_id, task_id]
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY id", args).fetchall()
        return [_row_exchange(r) for r in rows]

    # -- idempotency -------------------------------------------------------------------------

    def idem_get(self, key: str, *, now: float | None = None) -> IdempotencyRecord | None:
        now = time.time() if now is None else now
        with self._lock:
            row = self._conn.execute(
                "SELECT key, request_hash, exchange_id, task_id, state, created_at, expires_at "
                "FROM idempotency WHERE key = ? AND (expires_at IS NULL OR expires_at > ?)",
                (key, now),
            ).fetchone()
        return IdempotencyRecord(*row) if row else None

    def idem_claim(self, record: IdempotencyRecord) -> tuple[IdempotencyRecord, bool]:
        """Register ``record`` unless a live record holds its key; return (record held, claimed?)."""
        now = record.created_at or time.time()
        with self._write() as cur:
            row = cur.execute(
                "SELECT key, request_hash, exchange_id, task_id, state, created_at, expires_at "
                "FROM idempotency WHERE key = ?",
                (record.key,),
            ).fetchone()
            if row is not None:
                held = IdempotencyRecord(*row)
                if held.expires_at is None or held.expires_at > now:
                    return held, False
            cur.execute(
                "INSERT OR REPLACE INTO idempotency (key, request_hash, exchange_id, task_id, state, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    record.key,
                    record.request_hash,
                    record.exchange_id,
                    record.task_id,
                    record.state,
                    now,
                    record.expires_at,
                ),
            )
        return record, True

    def idem_update(
        self, key: str, *, task_id: str | None = None, state: str | None = None, exchange_id: int | None = None
    ) -> None:
        sets, args = [], []
        for col, val in (("task_id", task_id), ("state", state), ("exchange_id", exchange_id)):
            if val is not None:
                sets.append(f"{col} = ?")
                args.append(val)
        if not sets:
            return
        with self._write() as cur:
            cur.execute(f"UPDATE idempotency SET {', '.join(sets)} WHERE key = ?", [*args, key])

    def idem_release(self, key: str) -> None:
        """Forget a key (its request never reached the agent, so a retry may run it)."""
        with self._write() as cur:
            cur.execute("DELETE FROM idempotency WHERE key = ?", (key,))

    def idem_all(self) -> list[IdempotencyRecord]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, request_hash, exchange_id, task_id, state, created_at, expires_at FROM idempotency ORDER BY created_at"
            ).fetchall()
        return [IdempotencyRecord(*r) for r in rows]

    def idem_expire(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        with self._write() as cur:
            return cur.execute(
                "DELETE FROM idempotency WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
            ).rowcount

    # -- projections -------------------------------------------------------------------------

    def projection_cursor(self, name: str) -> int:
        with self._lock:
            row = self._conn.execute("SELECT position FROM projection_cursors WHERE name = ?", (name,)).fetchone()
        return row[0] if row else 0

    def projection_load(self, name: str, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        out: dict[str, bytes] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                rows = self._conn.execute(
                    f"SELECT key, value FROM projection_rows WHERE projection = ? AND key IN ({', '.join('?' * len(chunk))})",
                    [name, *chunk],
                ).fetchall()
                out.update(rows)
        return out

    def projection_rows(self, name: str, *, batch: int = 500) -> Iterator[tuple[str, bytes]]:
        """Every row of a projection in key order, read ``batch`` rows at a time (keyset paging,
        the lock held per batch only): memory stays flat however many tasks there are."""
        after: str | None = None
        while True:
            with self._lock:
                if after is None:
                    rows = self._conn.execute(
                        "SELECT key, value FROM projection_rows WHERE projection = ? ORDER BY key LIMIT ?",
                        (name, batch),
                    ).fetchall()
                else:
                    rows = self._conn.execute(
                        "SELECT key, value FROM projection_rows WHERE projection = ? AND key > ? ORDER BY key LIMIT ?",
                        (name, after, batch),
                    ).fetchall()
            yield from rows
            if len(rows) < batch:
                return
            after = rows[-1][0]

    def projection_commit(
        self, name: str, position: int, upserts: dict[str, bytes], *, expect: int | None = None
    ) -> bool:
        """Write a projection's rows and its cursor in one transaction (exactly once).

        With ``expect``, commit only if the cursor is still there (another process did not
        move it meanwhile); returns whether it committed.
        """
        with self._write() as cur:
            if expect is not None:
                row = cur.execute("SELECT position FROM projection_cursors WHERE name = ?", (name,)).fetchone()
                if (row[0] if row else 0) != expect:
                    return False
            cur.executemany(
                "INSERT INTO projection_rows (projection, key, value) VALUES (?, ?, ?)"
                " ON CONFLICT (projection, key) DO UPDATE SET value = excluded.value",
                [(name, k, v) for k, v in upserts.items()],
            )
            cur.execute("INSERT OR REPLACE INTO projection_cursors (name, position) VALUES (?, ?)", (name, position))
        return True

    def projection_reset(self, name: str) -> None:
        with self._write() as cur:
            others = cur.execute("SELECT 1 FROM projection_rows WHERE projection != ? LIMIT 1", (name,)).fetchone()
            if others is None:  # the only projection: a DELETE without WHERE frees whole pages at once
                cur.execute("DELETE FROM projection_rows")
            else:
                cur.execute("DELETE FROM projection_rows WHERE projection = ?", (name,))
            cur.execute("DELETE FROM projection_cursors WHERE name = ?", (name,))

    # -- leases ------------------------------------------------------------------------------

    def lease_acquire(
        self, name: str, owner: str, ttl: float, *, now: float | None = None, take_over: str | None = None
    ) -> bool:
        """Hold ``name`` for ``ttl`` seconds unless another live owner holds it (renewal by the
        holder is fine). ``take_over``: also take it from that holder (one known to be dead)."""
        now = time.time() if now is None else now
        with self._write() as cur:
            row = cur.execute("SELECT owner, expires_at FROM leases WHERE name = ?", (name,)).fetchone()
            if row is not None and row[0] not in (owner, take_over) and row[1] > now:
                return False
            cur.execute(
                "INSERT OR REPLACE INTO leases (name, owner, expires_at) VALUES (?, ?, ?)", (name, owner, now + ttl)
            )
        return True

    def lease_holder(self, name: str, *, now: float | None = None) -> str | None:
        """Who holds ``name`` now (None when free or expired)."""
        now = time.time() if now is None else now
        with self._lock:
            row = self._conn.execute(
                "SELECT owner FROM leases WHERE name = ? AND expires_at > ?", (name, now)
            ).fetchone()
        return row[0] if row else None

    def lease_release(self, name: str, owner: str) -> None:
        with self._write() as cur:
            cur.execute("DELETE FROM leases WHERE name = ? AND owner = ?", (name, owner))

    def wait_for_events(self, after: int, timeout: float) -> bool:
        """Block until an event past ``after`` is in the log, or ``timeout``.

        SQLite has no notifications across processes: this checks ``PRAGMA data_version``
        with a growing back-off (1 ms up to 100 ms), reading events only when it changed.
        """
        deadline = time.monotonic() + timeout
        pause = 0.001
        seen = None
        while True:
            with self._lock:
                version = (self._conn.execute("PRAGMA data_version").fetchone()[0], self._commits)
            if version != seen:
                seen = version
                if self.last_position() > after:
                    return True
                pause = 0.001
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.1)

    # -- meta --------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as cur:
            cur.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def integrity_check(self) -> str:
        with self._lock:
            return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])

    # -- index projections (issue 14): task list, search, doctor's findings ----------------------
    # Kept apart from the methods above on purpose (see store/indexes.py for the row shapes).

    def task_index_upsert(self, name: str, rows: Sequence[TaskIndexRow]) -> None:
        """Write task index rows (join the caller's transaction: the projection's commit)."""
        if not rows:
            return
        with self._write() as cur:
            cur.executemany(
                "INSERT INTO task_index (projection, key, last_position, last_at, state, context_id) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (projection, key) DO UPDATE SET "
                "last_position = excluded.last_position, last_at = excluded.last_at, state = excluded.state, "
                "context_id = excluded.context_id",
                [(name, *r) for r in rows],
            )

    def exchanges_without_task(self) -> list[Exchange]:
        """The exchanges that name no task (an index probe: not a read of every exchange)."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT id, {', '.join(_EXCHANGE_FIELDS)} FROM exchanges WHERE task_id IS NULL ORDER BY id"
            ).fetchall()
        return [_row_exchange(r) for r in rows]

    def task_index_reset(self, name: str) -> None:
        with self._write() as cur:
            cur.execute("DELETE FROM task_index WHERE projection = ?", (name,))

    def task_index_page(
        self,
        name: str,
        *,
        limit: int,
        before: int | None = None,
        states: Iterable[str] | None = None,
        context: str | None = None,
        since: float | None = None,
    ) -> list[tuple[str, int]]:
        """Up to ``limit`` ``(key, last_position)``, newest last event first, older than ``before``."""
        cond, params = task_filter("?", states, context, since)
        if before is not None:
            cond += " AND last_position < ?"
            params.append(before)
        with self._lock:
            return self._conn.execute(
                f"SELECT key, last_position FROM task_index WHERE projection = ?{cond} "
                "ORDER BY last_position DESC LIMIT ?",
                [name, *params, limit],
            ).fetchall()

    def task_index_count(
        self,
        name: str,
        *,
        states: Iterable[str] | None = None,
        context: str | None = None,
        since: float | None = None,
    ) -> int:
        cond, params = task_filter("?", states, context, since)
        with self._lock:
            row = self._conn.execute(f"SELECT COUNT(*) FROM task_index WHERE projection = ?{cond}", [name, *params])
            return int(row.fetchone()[0])

    def search_commit(self, position: int, rows: Sequence[SearchRow], *, expect: int | None = None) -> bool:
        """Add search rows and move the search cursor, in one transaction (``expect``: as in
        :meth:`projection_commit`)."""
        with self._write() as cur:
            if expect is not None:
                row = cur.execute("SELECT position FROM projection_cursors WHERE name = ?", (SEARCH_CURSOR,)).fetchone()
                if (row[0] if row else 0) != expect:
                    return False
            cur.executemany(
                "INSERT OR REPLACE INTO search_index (rowid, body, position, field, task_id, seq, kind, place) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(p * FIELDS_PER_EVENT + f, body, p, f, t, seq, k, w) for p, f, t, seq, k, w, body in rows],
            )
            cur.execute(
                "INSERT OR REPLACE INTO projection_cursors (name, position) VALUES (?, ?)", (SEARCH_CURSOR, position)
            )
        return True

    def search_reset(self) -> None:
        with self._write() as cur:
            cur.execute("DELETE FROM search_index")
            cur.execute("DELETE FROM projection_cursors WHERE name = ?", (SEARCH_CURSOR,))

    def search_match(self, text: str | None, *, task_id: str | None = None, batch: int = 1000) -> Iterator[SearchRow]:
        """The search rows whose body contains ``text`` (case-insensitively, 3+ characters: a
        superset the caller narrows), in log order; ``text=None``: every row (a dump)."""
        cond, params = "", []
        if text is not None:
            cond += " AND search_index MATCH ?"
            params.append(fts_phrase(text))
        if task_id is not None:
            cond += " AND task_id = ?"
            params.append(task_id)
        sql = (
            "SELECT rowid, position, field, task_id, seq, kind, place, body FROM search_index "
            f"WHERE rowid > ?{cond} ORDER BY rowid LIMIT ?"
        )
        after = 0
        while True:
            with self._lock:
                rows = self._conn.execute(sql, [after, *params, batch]).fetchall()
            for r in rows:
                yield r[1:]
            if len(rows) < batch:
                return
            after = rows[-1][0]

    def search_can_answer(self, text: str) -> bool:
        """Whether :meth:`search_match` finds every row containing ``text`` (trigrams: 3+ characters)."""
        return len(text) >= 3

    def tasks_touched(self, after: int, upto: int) -> list[str]:
        """The task ids of the events in ``(after, upto]``."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT task_id FROM events WHERE position > ? AND position <= ? AND task_id IS NOT NULL",
                (after, upto),
            ).fetchall()
        return [r[0] for r in rows]

    def findings_commit(self, position: int | None, rows: Sequence[FindingsRow], *, expect: int | None = None) -> bool:
        """Upsert findings rows; with ``position``, move doctor's cursor in the same transaction."""
        with self._write() as cur:
            if expect is not None:
                row = cur.execute("SELECT position FROM projection_cursors WHERE name = ?", (DOCTOR_CURSOR,)).fetchone()
                if (row[0] if row else 0) != expect:
                    return False
            cur.executemany(
                "INSERT OR REPLACE INTO doctor_findings (task_id, first_position, settled, errors, warnings, findings) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            if position is not None:
                cur.execute(
                    "INSERT OR REPLACE INTO projection_cursors (name, position) VALUES (?, ?)",
                    (DOCTOR_CURSOR, position),
                )
        return True

    def findings_reset(self) -> None:
        with self._write() as cur:
            cur.execute("DELETE FROM doctor_findings")
            cur.execute("DELETE FROM projection_cursors WHERE name = ?", (DOCTOR_CURSOR,))

    def findings_unsettled(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT task_id FROM doctor_findings WHERE settled = 0")]

    def findings_totals(self) -> tuple[int, int, int]:
        """(tasks, errors, warnings) over every findings row."""
        with self._lock:
            n, e, w = self._conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(errors), 0), COALESCE(SUM(warnings), 0) FROM doctor_findings"
            ).fetchone()
        return n, e, w

    def findings_rows(self, *, faulty_only: bool = True, batch: int = 500) -> Iterator[FindingsRow]:
        """Findings rows in the order of the tasks' first events (keyset paging)."""
        cond = " AND errors + warnings > 0" if faulty_only else ""
        sql = (
            "SELECT task_id, first_position, settled, errors, warnings, findings FROM doctor_findings "
            f"WHERE (first_position, task_id) > (?, ?){cond} ORDER BY first_position, task_id LIMIT ?"
        )
        after: tuple[int, str] = (-1, "")
        while True:
            with self._lock:
                rows = self._conn.execute(sql, (*after, batch)).fetchall()
            yield from rows
            if len(rows) < batch:
                return
            after = (rows[-1][1], rows[-1][0])


class _WriteTxn:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` under the store's lock; rollback on error.

    Nested uses join the outer transaction; only the outermost one commits or rolls back. A
    COMMIT that fails (the disk filled up) is rolled back, so the connection is usable again and
    nothing half-written stays. A read-only store refuses at BEGIN.
    """

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    def __enter__(self) -> sqlite3.Cursor:
        st = self.store
        if st.readonly:
            raise ReadOnlyStore(f"{st.location} was opened read-only: cannot write")
        nowait = st._nowait.on
        if not st._lock.acquire(blocking=not nowait):
            raise WouldWait(f"{st.location} is being written by another thread of this process")
        if st._depth == 0:
            try:
                begin_immediate(st._conn, st._lock, st.location, st.busy_timeout, wait=not nowait)
            except BaseException:
                st._lock.release()
                raise
        st._depth += 1
        return st._conn.cursor()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        st = self.store
        st._depth -= 1
        try:
            if st._depth == 0:
                if exc_type is None:
                    try:
                        st._conn.execute("COMMIT")
                    except BaseException:
                        _rollback(st._conn)
                        raise
                    st._commits += 1
                else:
                    _rollback(st._conn)
        finally:
            st._lock.release()


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is still open (SQLite may have rolled back already: disk full)."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # the error that brought us here is the one to report
            pass
