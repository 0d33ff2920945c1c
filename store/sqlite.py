"""The event log on SQLite (WAL): the embedded default backend.

Hot paths (append, read from a position) use the raw ``sqlite3`` connection with prepared
statements and batches; sqlite-utils serves the schema and inspection. One connection per
store object, guarded by a lock so a worker thread (the group-commit writer) and the event
loop can share it.

This module holds what only SQLite does with the log (appends, readers, leases, following); the
queries both backends run alike are written once (:mod:`a2a_tape.store.shared_sql`,
:mod:`a2a_tape.store.indexes`), SQLite's own projection SQL is :mod:`a2a_tape.store.sqlite_indexes`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from a2a_tape.store.append_plan import EXCHANGE_FIELDS, ROW_WIDTH, BatchPlan, Key, Run, exchange_values
from a2a_tape.store.driver_errors import guard_public, on_readonly_media, translate
from a2a_tape.store.errors import NotADatabase, ReadOnlyStore, StoreError, StoreNotFound, StoreUnavailable, WouldWait
from a2a_tape.store.files import create_private
from a2a_tape.store.interface import Durability, FoldRow
from a2a_tape.store.methods import CARD_PATHS
from a2a_tape.store.observers import stamp
from a2a_tape.store.paging import TaskRange, fold_rows_filter, pages, sample_positions, split_ranges
from a2a_tape.store.records import Exchange, NewEvent, StoredEvent, TaskEvents
from a2a_tape.store.schema import SCHEMA_VERSION, migrate
from a2a_tape.store.shared_sql import Cursor
from a2a_tape.store.sqlite_indexes import SqliteIndexes
from a2a_tape.store.write_lock import NoWait, begin_immediate

DEFAULT_BUSY_TIMEOUT = 30.0
"""Seconds a write waits for another process's write transaction before :class:`DatabaseLocked`."""

# sqlite3 binds str, int, float and bytearray as they are, but takes a bytes value (every payload)
# for an object that may need adapting: it asks its protocol for ``__adapt__``, which builds and drops
# an AttributeError per BLOB bound (~2,500 instructions a row). Registered as its own adapter
# (``bytes(b) is b``), a bytes value is one dict hit and binds as before. Left alone when the
# program using this store registered an adapter of its own.
sqlite3.adapters.setdefault((bytes, sqlite3.PrepareProtocol), bytes)

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


_RECORDED_SQL = (
    "SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM events LIMIT 1)) + (SELECT COUNT(*) FROM (SELECT 1 FROM exchanges "
    "WHERE NOT (http_method = 'GET' AND (" + " OR ".join(f"url LIKE '%{path}%'" for path in CARD_PATHS) + ")) LIMIT 1))"
)
"""Non-zero when something was recorded: an event, or an exchange other than an agent-card read."""

_SQLITE_MAGIC = b"SQLite format 3\x00"


def _not_ours(path: Path) -> NotADatabase:
    return NotADatabase(f"not an a2a-tape database: {path}")


def _check_sqlite_file(path: Path) -> None:
    """An existing file to read: refuse one that is empty or no SQLite database (SQLite would take
    an empty file as a new database, and a writer would initialise it)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError:  # unreadable: SQLite's own error says why, below
        return
    if head != _SQLITE_MAGIC:
        raise _not_ours(path)


def _check_ours(conn: sqlite3.Connection, path: Path) -> None:
    """An SQLite database of a2a-tape's: a schema version and the events table (another
    program's database, or one whose creation never committed, is not a log)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    events = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    if version == 0 or events is None:
        raise _not_ours(path)


def _check_ours_or_new(conn: sqlite3.Connection, path: Path) -> None:
    """A database to write: a2a-tape's, or a new one (no tables yet). Another program's SQLite
    database is refused rather than given our tables beside its own."""
    tables = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1").fetchone()
    if tables is not None:
        _check_ours(conn, path)


def _row_event(row: tuple[Any, ...]) -> StoredEvent:
    return StoredEvent(*row)


@guard_public
class SqliteStore(SqliteIndexes):
    """The event log in one SQLite file. See :mod:`a2a_tape.store.interface` for the API contract.

    ``busy_timeout``: seconds a write waits for another process's write transaction, then
    :class:`DatabaseLocked`. ``readonly``: open with ``mode=ro`` (nothing is created or migrated,
    every write raises :class:`ReadOnlyStore`); on read-only media, where SQLite cannot create the
    ``-shm`` file a WAL reader needs, the file is opened ``immutable=1`` instead.
    """

    backend = "sqlite"
    _mark = "?"
    _bytewise = ""

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
        self.created = False  # this store made its file (see __exit__)
        if (readonly or not create) and not self.path.exists():
            raise StoreNotFound(f"no database at {self.path}")
        if create and not readonly and not self.path.parent.exists():
            raise StoreError(f"cannot create {self.path}: directory {self.path.parent} does not exist")
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory, not a database file")
        if readonly or not create:
            _check_sqlite_file(self.path)
        self._lock = threading.RLock()
        self._nowait = NoWait()  # see without_waiting
        self._depth = 0
        self._commits = 0  # our own commits: PRAGMA data_version only counts other connections'
        if readonly:
            self._conn = self._open_readonly()
            return
        if create:
            with contextlib.suppress(OSError):  # owner-only (store.files); SQLite names any failure below
                self.created = create_private(self.path)
        try:
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._fault(exc, "open") from None
        try:
            if not create:  # before WAL mode is set: that alone rewrites the file's header
                _check_ours(self._conn, self.path)  # an existing log is migrated, never another file initialised
            elif not self.created:
                _check_ours_or_new(self._conn, self.path)  # nor another program's database given our tables
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
            self._conn.execute("PRAGMA foreign_keys=OFF")
            migrate(self._conn)
        except sqlite3.Error as exc:
            self._conn.close()
            raise self._fault(exc, "use") from None
        except StoreError:
            self._conn.close()
            raise

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
            try:
                _check_ours(conn, self.path)
            except BaseException:
                conn.close()
                raise
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
        """Close; a file this store created is removed again when an error ends its use before
        anything was recorded in it (a ``record`` whose agent cannot be reached, a failed
        ``import``): a failed command leaves no empty log behind. Never while another connection
        has the file open (another process may be about to record into it)."""
        if exc and exc[0] is not None and self.created and self._alone_and_empty():
            for suffix in ("", "-wal", "-shm", "-journal"):  # under the exclusive lock taken below
                with contextlib.suppress(OSError):
                    os.unlink(f"{self.path}{suffix}")
        self.close()

    def _alone_and_empty(self) -> bool:
        """Nothing recorded (no event, no exchange but agent-card reads), and no other connection
        to the file: SQLite takes a database out of WAL mode only for its sole connection, and the
        exclusive lock then taken (released by :meth:`close`) keeps newcomers out until it is gone."""
        try:
            with self._lock:
                self._conn.execute("PRAGMA busy_timeout = 0")
                if self._conn.execute(_RECORDED_SQL).fetchone()[0]:
                    return False
                if self._conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] != "delete":
                    return False  # another connection has it open
                self._conn.execute("BEGIN EXCLUSIVE")
                return bool(self._conn.execute(_RECORDED_SQL).fetchone()[0] == 0)
        except sqlite3.Error:  # locked by another connection, closed, unreadable: keep the file
            return False

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
        for rows in pages(lambda after, n: self._read(sql, (after, n)), position, batch, limit):
            for row in rows:
                yield StoredEvent(*row)

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def _serialise(self, cur: Cursor, key: str) -> None:
        """Nothing to do: a write transaction (``BEGIN IMMEDIATE``) holds the database's one write lock."""

    def read_fold_rows(
        self, position: int = 0, *, batch: int = 5000, upto: int | None = None, tasks: TaskRange | None = None
    ) -> Iterator[list[FoldRow]]:
        """The log after ``position`` as batches of ``(position, task_id, seq, exchange_id,
        received_at, payload, origin)`` tuples, in log order.

        The narrow reader of a projection rebuild: six columns and plain tuples (building a
        nine-field :class:`StoredEvent` per row costs more than reading it). ``upto``: stop at
        that position. ``tasks=(low, high)``: only the rows of tasks in that range
        (:func:`store.paging.in_range`), plus the rows with no task id (every range gets those;
        the caller knows which task, if any, their payload names).
        """
        cond, extra = fold_rows_filter(upto, tasks, "?")
        sql = f"SELECT position, task_id, seq, exchange_id, received_at, payload, origin FROM events WHERE position > ?{cond}"
        sql += " ORDER BY position LIMIT ?"
        return pages(lambda after, n: self._read(sql, (after, *extra, n)), position, batch)

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

    def iter_task(
        self, task_id: str, *, after: int = 0, limit: int | None = None, batch: int = 5000
    ) -> Iterator[StoredEvent]:
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE task_id = ? AND position > ? ORDER BY position LIMIT ?"
        for rows in pages(lambda pos, n: self._read(sql, (task_id, pos, n)), after, batch, limit):
            for row in rows:
                yield StoredEvent(*row)

    def read_exchange(self, exchange_id: int) -> list[StoredEvent]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_EVENT_COLS} FROM events WHERE exchange_id = ? ORDER BY position", (exchange_id,)
            ).fetchall()
        return [StoredEvent(*r) for r in rows]

    def iter_exchange(self, exchange_id: int, *, batch: int = 5000) -> Iterator[StoredEvent]:
        """``read_exchange`` in batches: a long exchange is served while the rest is still read."""
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE exchange_id = ? AND position > ? ORDER BY position LIMIT ?"
        for rows in pages(lambda after, n: self._read(sql, (exchange_id, after, n)), 0, batch):
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
        values = exchange_values(stamp(exchange))
        with self._write() as cur:
            cur.execute(
                f"INSERT INTO exchanges ({', '.join(EXCHANGE_FIELDS)}) VALUES ({', '.join('?' * len(values))})",
                values,
            )
            new_id = cur.lastrowid
        assert new_id is not None  # an INSERT sets it
        exchange.id = new_id
        return new_id

    # -- leases (the rest of leases, meta, idempotency and the exchanges' readers: SharedSql) -----

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

    def integrity_check(self) -> str:
        with self._lock:
            return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])


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
