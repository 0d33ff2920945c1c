"""The event log on PostgreSQL: one shared log for several recorders on several hosts.

Same narrow API as :class:`store.sqlite.SqliteStore`. What PostgreSQL needs that SQLite gives
for free:

- **gap-free positions in commit order.** Appends take ``LOCK TABLE events IN EXCLUSIVE MODE``
  (readers are not blocked) and number rows ``max(position) + 1 ...`` inside that lock, so a
  reader following positions never skips a row that commits late, and a rolled-back batch
  leaves no hole (the eventsourcing library's approach, without its sequence gaps).
- **followers.** Every append sends ``NOTIFY a2a_tape_events, '<last position>'`` (delivered at
  commit); :meth:`PostgresStore.wait_for_events` sleeps on ``LISTEN`` until then.
- **one recoverer per task.** Row leases with expiry (:meth:`lease_acquire`), shared by every
  process on the log; a lease whose holder died expires and is taken over.

The queries both backends run alike are written once (:mod:`a2a_tape.store.shared_sql`,
:mod:`a2a_tape.store.indexes`); PostgreSQL's own projection SQL (full-text search) is
:mod:`a2a_tape.store.postgres_indexes`. Needs the ``postgres`` extra (psycopg 3 with its pool).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from a2a_tape.store.append_plan import EXCHANGE_FIELDS, BatchPlan, Key, event_row, exchange_values
from a2a_tape.store.driver_errors import driver_line, guard_public
from a2a_tape.store.errors import (
    ConnectionLost,
    DatabaseLocked,
    NotADatabase,
    SchemaTooNew,
    StoreError,
    WouldWait,
)
from a2a_tape.store.interface import Durability, FoldRow
from a2a_tape.store.observers import stamp
from a2a_tape.store.paging import TaskRange, fold_rows_filter, pages, sample_positions, split_ranges
from a2a_tape.store.postgres_indexes import TSV, PostgresIndexes
from a2a_tape.store.records import Exchange, NewEvent, StoredEvent, TaskEvents
from a2a_tape.store.redact import Redactor, safe_location
from a2a_tape.store.schema import V6
from a2a_tape.store.shared_sql import Cursor
from a2a_tape.store.write_lock import NoWait

try:  # optional dependency
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError:  # pragma: no cover - reported when a postgresql:// URL is used
    psycopg = None  # type: ignore[assignment]  # the names stay bound: None says the extra is missing
    ConnectionPool = None  # type: ignore[assignment,misc]  # (checked in PostgresStore.__init__)
    PoolTimeout = None  # type: ignore[assignment,misc]

SCHEMA_VERSION = 4
_NOWAIT = 0.001  # seconds a write begun without waiting may wait for a pooled connection
CHANNEL = "a2a_tape_events"
_EVENT_COLS = "position, task_id, seq, exchange_id, sse_event, payload, received_at, mono, origin"

_SCHEMA = [
    """CREATE TABLE exchanges (
        id BIGSERIAL PRIMARY KEY, started_at DOUBLE PRECISION, ended_at DOUBLE PRECISION, url TEXT,
        http_method TEXT, rpc_method TEXT, dialect TEXT, streaming INTEGER, request_headers TEXT,
        request_body BYTEA, status INTEGER, content_type TEXT, response_headers TEXT, response_body BYTEA,
        outcome TEXT, error TEXT, task_id TEXT, context_id TEXT, message_id TEXT, idempotency_key TEXT, role TEXT,
        binding TEXT)""",
    "CREATE INDEX exchanges_task_id ON exchanges(task_id)",
    """CREATE TABLE events (
        position BIGINT PRIMARY KEY, task_id TEXT, seq BIGINT NOT NULL, exchange_id BIGINT, sse_event TEXT,
        payload BYTEA NOT NULL, received_at DOUBLE PRECISION NOT NULL, mono DOUBLE PRECISION,
        origin TEXT NOT NULL CHECK (origin IN ('upstream', 'local')))""",
    "CREATE UNIQUE INDEX events_task_seq ON events(task_id, seq) WHERE task_id IS NOT NULL",
    "CREATE UNIQUE INDEX events_exchange_seq ON events(exchange_id, seq) WHERE task_id IS NULL",
    "CREATE INDEX events_exchange ON events(exchange_id)",
    """CREATE TABLE idempotency (key TEXT PRIMARY KEY, request_hash TEXT, exchange_id BIGINT, task_id TEXT,
        state TEXT, created_at DOUBLE PRECISION, expires_at DOUBLE PRECISION)""",
    "CREATE TABLE projection_cursors (name TEXT PRIMARY KEY, position BIGINT NOT NULL)",
    """CREATE TABLE projection_rows (projection TEXT NOT NULL, key TEXT NOT NULL, value BYTEA NOT NULL,
        PRIMARY KEY (projection, key))""",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE leases (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL)",
]

_SCHEMA_V2 = [
    # index projections (issue 14): the task list, the search index, doctor's findings
    """CREATE TABLE task_index (projection TEXT NOT NULL, key TEXT NOT NULL, last_position BIGINT NOT NULL,
        last_at DOUBLE PRECISION NOT NULL, state TEXT NOT NULL, context_id TEXT, PRIMARY KEY (projection, key))""",
    "CREATE INDEX task_index_newest ON task_index(projection, last_position)",
    """CREATE TABLE search_index (position BIGINT NOT NULL, field INTEGER NOT NULL, task_id TEXT, seq BIGINT NOT NULL,
        kind TEXT NOT NULL, place TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (position, field))""",
    f"CREATE INDEX search_index_body ON search_index USING GIN ({TSV})",
    """CREATE TABLE doctor_findings (task_id TEXT PRIMARY KEY, first_position BIGINT NOT NULL, settled INTEGER NOT NULL,
        errors INTEGER NOT NULL, warnings INTEGER NOT NULL, findings BYTEA NOT NULL)""",
    "CREATE INDEX doctor_findings_order ON doctor_findings(first_position, task_id)",
    "CREATE INDEX doctor_findings_unsettled ON doctor_findings(settled) WHERE settled = 0",
]

_SCHEMA_V3 = [
    # the binding of each exchange (issue 22); older rows filled from their dialect, as SQLite's v5
    "ALTER TABLE exchanges ADD COLUMN IF NOT EXISTS binding TEXT",
    "UPDATE exchanges SET binding = 'http+json' WHERE dialect = 'rest' AND binding IS NULL",
    "UPDATE exchanges SET binding = 'jsonrpc' WHERE dialect IN ('0.3', '1.0') AND binding IS NULL",
]

_SCHEMA_V4 = [
    # runs (issue 30): who recorded each exchange; older rows split by role, as SQLite's v6
    *(stmt.replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS") for stmt in V6),
]


@guard_public
class PostgresStore(PostgresIndexes):
    """The event log in a PostgreSQL database. See :mod:`a2a_tape.store.interface` for the API contract.

    ``busy_timeout``: when given, a statement waits that many seconds for a lock another session
    holds (``lock_timeout``), then :class:`DatabaseLocked`; by default it waits as PostgreSQL does.
    ``readonly``: every transaction is read-only (a write raises :class:`ReadOnlyStore`) and the
    schema is neither created nor migrated. ``create=False``: the database must hold a log already
    (one of an older schema is migrated; a database without one is :class:`NotADatabase`, left as
    it was). ``pool_timeout``: how long a call waits for a connection
    (all in use, or the server gone) before :class:`ConnectionLost`.
    """

    backend = "postgres"
    _mark = "%s"
    _bytewise = ' COLLATE "C"'

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        durability: Durability = "full",
        max_size: int = 8,
        busy_timeout: float | None = None,
        readonly: bool = False,
        pool_timeout: float = 10.0,
    ) -> None:
        if psycopg is None:
            raise StoreError("PostgreSQL needs the postgres extra: pip install 'a2a-tape[postgres]'")
        self.url = url
        self.path = url
        self.durability: Durability = durability
        self.busy_timeout = busy_timeout
        self.readonly = readonly
        sync = "on" if durability == "full" else "off"

        def configure(conn: psycopg.Connection[Any]) -> None:
            conn.execute(f"SET synchronous_commit = {sync}")
            if busy_timeout is not None:
                conn.execute(f"SET lock_timeout = {max(1, int(busy_timeout * 1000))}")
            if readonly:
                conn.execute("SET default_transaction_read_only = on")
            # where append batches are staged before the table lock (no WAL, emptied at commit)
            conn.execute(
                "CREATE TEMP TABLE IF NOT EXISTS a2a_stage (ord INTEGER, task_id TEXT, exchange_id BIGINT, "
                "sse_event TEXT, payload BYTEA, received_at DOUBLE PRECISION, mono DOUBLE PRECISION, origin TEXT) "
                "ON COMMIT DELETE ROWS"
            )
            conn.commit()

        try:
            psycopg.connect(url, connect_timeout=10).close()  # fail fast, with the server's reason
            self._pool = ConnectionPool(
                url, min_size=1, max_size=max_size, configure=configure, open=False, timeout=pool_timeout
            )
            self._pool.open(wait=True, timeout=10)
        except Exception as exc:  # noqa: BLE001 - one readable line for the CLI
            why = driver_line(exc, Redactor().url_secrets(url)[1])  # libpq may quote the password
            raise ConnectionLost(f"cannot connect to {safe_location(url)}: {why}") from None
        self._local = threading.local()
        self._nowait = NoWait()  # see without_waiting
        if readonly or not create:
            self._check_schema(migrating=not readonly)
        if not readonly:
            self._migrate()

    @property
    def location(self) -> str:
        return safe_location(self.url)

    # -- plumbing ----------------------------------------------------------------------------

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _txn(self) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor in a transaction; nested uses on one thread join the outer transaction."""
        cur = getattr(self._local, "cur", None)
        if cur is not None:
            yield cur
            return
        nowait = self._nowait.on
        try:
            with self._pool.connection(timeout=_NOWAIT if nowait else None) as conn:
                with conn.transaction(), conn.cursor() as cur:
                    if nowait:
                        cur.execute("SET LOCAL lock_timeout = 1")  # ms; 0 would mean no limit
                    self._local.cur = cur
                    try:
                        yield cur
                    finally:
                        self._local.cur = None
        # a lock another session holds: PostgreSQL takes locks statement by statement, so the 1 ms
        # timeout can surface inside a store method, already mapped (driver_errors: DatabaseLocked)
        except (PoolTimeout, psycopg.errors.LockNotAvailable, DatabaseLocked):
            if not nowait:
                raise
            raise WouldWait(f"{self.location}: the log is being written by another session") from None

    def transaction(self) -> AbstractContextManager[psycopg.Cursor[Any]]:
        return self._txn()

    def without_waiting(self) -> AbstractContextManager[None]:
        """Transactions this thread begins inside raise :class:`WouldWait` instead of waiting for
        a pooled connection or a lock another session holds (rolled back: nothing written). The
        round trips themselves still take the time they take."""
        return self._nowait.block()

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        with self._txn() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def _write(self) -> AbstractContextManager[psycopg.Cursor[Any]]:
        """A write transaction: :meth:`_txn` (a PostgreSQL transaction reads and writes alike)."""
        return self._txn()

    def _serialise(self, cur: Cursor, key: str) -> None:
        """Concurrent transactions on ``key`` take turns: a transaction-scoped advisory lock."""
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))

    def _check_schema(self, *, migrating: bool = False) -> None:
        """An open that creates nothing: the schema must be there already, at a version we read
        (``migrating``: or an older one, which the open then migrates)."""
        rows = self._read("SELECT to_regclass('a2a_tape_schema') IS NOT NULL")
        found = self._read("SELECT version FROM a2a_tape_schema")[0][0] if rows[0][0] else 0
        if found == 0:
            self._pool.close()
            raise NotADatabase(f"not an a2a-tape database: {self.location}")
        if found != SCHEMA_VERSION and not (migrating and found < SCHEMA_VERSION):
            self._pool.close()
            raise StoreError(
                f"{self.location} has schema version {found}, this a2a-tape reads {SCHEMA_VERSION}"
                + (": open it once with a writing command" if found < SCHEMA_VERSION else ": upgrade a2a-tape")
            )

    def _migrate(self) -> None:
        with self._txn() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext('a2a-tape-migrate'))")
            cur.execute("CREATE TABLE IF NOT EXISTS a2a_tape_schema (version INTEGER NOT NULL)")
            cur.execute("SELECT version FROM a2a_tape_schema")
            row = cur.fetchone()
            found = row[0] if row else 0
            if found > SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"the database has schema version {found}, this a2a-tape knows up to {SCHEMA_VERSION}: upgrade a2a-tape"
                )
            if found == 0:
                for stmt in _SCHEMA + _SCHEMA_V2 + _SCHEMA_V4:
                    cur.execute(stmt)
                cur.execute("INSERT INTO a2a_tape_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
            elif found < SCHEMA_VERSION:
                # version 1 -> 2: the index projections (task rows folded before are folded again
                # by the projector, which sees they have no index rows); 2 -> 3: the binding column;
                # 3 -> 4: the observer of each exchange (runs)
                for stmt in (_SCHEMA_V2 if found < 2 else []) + (_SCHEMA_V3 if found < 3 else []) + _SCHEMA_V4:
                    cur.execute(stmt)
                cur.execute("UPDATE a2a_tape_schema SET version = %s", (SCHEMA_VERSION,))

    # -- events ------------------------------------------------------------------------------

    def append_batch(self, events: Sequence[NewEvent]) -> list[StoredEvent]:
        if not events:
            return []
        if all(ev.seq is None and ev.task_id is not None for ev in events):
            return self._append_live(events)
        with self._txn() as cur:
            cur.execute("LOCK TABLE events IN EXCLUSIVE MODE")  # commit order == position order, no gaps
            start: int = cur.execute("SELECT COALESCE(MAX(position), 0) FROM events").fetchall()[0][0]
            plan = BatchPlan(events, lambda keys: _max_seqs(cur, keys), lambda key, seq: _find(cur, key, seq), start)
            if not plan.count:
                return plan.stored()
            with cur.copy(
                "COPY events (position, task_id, seq, exchange_id, sse_event, payload, received_at, mono, origin) FROM STDIN"
            ) as copy:
                for row in plan.rows():
                    copy.write_row(row)
            cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(start + plan.count)))
            return plan.stored()

    def _append_live(self, events: Sequence[NewEvent]) -> list[StoredEvent]:
        """The live path (every event has a task, none a seq): the rows are copied into a
        staging table BEFORE the table lock; under the lock one INSERT ... SELECT numbers
        positions and per-task seqs server-side. The lock (which serialises every writer of the
        log) is held for a few statements, not for the Python that formats each row."""
        with self._txn() as cur:
            with cur.copy(
                "COPY a2a_stage (ord, task_id, exchange_id, sse_event, payload, received_at, mono, origin) FROM STDIN"
            ) as copy:
                for k, ev in enumerate(events, 1):
                    copy.write_row(
                        (k, ev.task_id, ev.exchange_id, ev.sse_event, ev.payload, ev.received_at, ev.mono, ev.origin)
                    )
            cur.execute("LOCK TABLE events IN EXCLUSIVE MODE")  # commit order == position order, no gaps
            cur.execute(
                "WITH base AS MATERIALIZED (SELECT t.task_id, COALESCE((SELECT MAX(e.seq) FROM events e "
                "      WHERE e.task_id = t.task_id AND e.task_id IS NOT NULL), 0) AS m "
                "      FROM (SELECT DISTINCT task_id FROM a2a_stage) t), "
                "  top AS MATERIALIZED (SELECT COALESCE(MAX(position), 0) AS p FROM events) "
                "INSERT INTO events (position, task_id, seq, exchange_id, sse_event, payload, received_at, mono, origin) "
                "SELECT top.p + s.ord, s.task_id, base.m + row_number() OVER (PARTITION BY s.task_id ORDER BY s.ord), "
                "       s.exchange_id, s.sse_event, s.payload, s.received_at, s.mono, s.origin "
                "FROM a2a_stage s JOIN base USING (task_id) CROSS JOIN top RETURNING position, seq"
            )
            seqs = dict(cur.fetchall())
            start = min(seqs) - 1
            # an outer transaction may stage another batch; followers learn the last position at commit
            cur.execute(f"DELETE FROM a2a_stage; NOTIFY {CHANNEL}, '{start + len(events)}'")
        return [StoredEvent(*event_row(start + k, seqs[start + k], ev)) for k, ev in enumerate(events, 1)]

    def append(self, event: NewEvent) -> StoredEvent:
        return self.append_batch([event])[0]

    def read_from(self, position: int = 0, *, limit: int | None = None, batch: int = 5000) -> Iterator[StoredEvent]:
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE position > %s ORDER BY position LIMIT %s"
        for rows in pages(lambda after, n: self._read(sql, (after, n)), position, batch, limit):
            for row in rows:
                yield StoredEvent(*row)

    def read_fold_rows(
        self, position: int = 0, *, batch: int = 5000, upto: int | None = None, tasks: TaskRange | None = None
    ) -> Iterator[list[FoldRow]]:
        """The log after ``position`` as batches of ``(position, task_id, seq, exchange_id,
        received_at, payload, origin)`` tuples, in log order (the narrow reader of a rebuild); ``upto``
        and ``tasks`` as in :meth:`store.sqlite.SqliteStore.read_fold_rows`."""
        cond, extra = fold_rows_filter(upto, tasks, "%s", ' COLLATE "C"')
        sql = f"SELECT position, task_id, seq, exchange_id, received_at, payload, origin FROM events WHERE position > %s{cond}"
        sql += " ORDER BY position LIMIT %s"
        return pages(lambda after, n: self._read(sql, (after, *extra, n)), position, batch)

    def task_ranges(self, parts: int, upto: int | None = None, *, lead: float = 0.0) -> list[TaskRange]:
        """As :meth:`store.sqlite.SqliteStore.task_ranges`."""
        first, last = self._read("SELECT (SELECT MIN(position) FROM events), (SELECT MAX(position) FROM events)")[0]
        if first is None:
            return [(None, None)]
        positions = sample_positions(first, last if upto is None else min(last, upto))
        rows = self._read("SELECT task_id FROM events WHERE task_id IS NOT NULL AND position = ANY(%s)", (positions,))
        return split_ranges([r[0] for r in rows], parts, lead)

    def read_task(self, task_id: str) -> list[StoredEvent]:
        rows = self._read(f"SELECT {_EVENT_COLS} FROM events WHERE task_id = %s ORDER BY position", (task_id,))
        return [StoredEvent(*r) for r in rows]

    def iter_task(
        self, task_id: str, *, after: int = 0, limit: int | None = None, batch: int = 5000
    ) -> Iterator[StoredEvent]:
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE task_id = %s AND position > %s ORDER BY position LIMIT %s"
        for rows in pages(lambda pos, n: self._read(sql, (task_id, pos, n)), after, batch, limit):
            for row in rows:
                yield StoredEvent(*row)

    def read_exchange(self, exchange_id: int) -> list[StoredEvent]:
        rows = self._read(f"SELECT {_EVENT_COLS} FROM events WHERE exchange_id = %s ORDER BY position", (exchange_id,))
        return [StoredEvent(*r) for r in rows]

    def iter_exchange(self, exchange_id: int, *, batch: int = 5000) -> Iterator[StoredEvent]:
        """``read_exchange`` in batches: a long exchange is served while the rest is still read."""
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE exchange_id = %s AND position > %s ORDER BY position LIMIT %s"
        for rows in pages(lambda after, n: self._read(sql, (exchange_id, after, n)), 0, batch):
            for row in rows:
                yield StoredEvent(*row)

    def last_position(self) -> int:
        return int(self._read("SELECT COALESCE(MAX(position), 0) FROM events")[0][0])

    def count_events(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM events")[0][0])

    def has_task(self, task_id: str) -> bool:
        return bool(self._read("SELECT 1 FROM events WHERE task_id = %s LIMIT 1", (task_id,)))

    def task_events(self) -> list[TaskEvents]:
        rows = self._read(
            "SELECT task_id, COUNT(*), MIN(received_at), MAX(received_at), MIN(position), MAX(position) "
            "FROM events WHERE task_id IS NOT NULL GROUP BY task_id ORDER BY MIN(position)"
        )
        return [TaskEvents(*r) for r in rows]

    def task_ids_with_prefix(self, prefix: str) -> list[str]:
        rows = self._read(
            "SELECT DISTINCT task_id FROM events WHERE starts_with(task_id, %s) ORDER BY task_id LIMIT 10", (prefix,)
        )
        return [r[0] for r in rows]

    def wait_for_events(self, after: int, timeout: float) -> bool:
        """Block until an event past ``after`` is committed (LISTEN/NOTIFY), or ``timeout``."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            if self.last_position() > after:  # committed before we listened
                return True
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                for note in conn.notifies(timeout=left, stop_after=1):
                    if int(note.payload or 0) > after:
                        return True
            return self.last_position() > after

    # -- exchanges ---------------------------------------------------------------------------

    def begin_exchange(self, exchange: Exchange) -> int:
        values = exchange_values(stamp(exchange))
        with self._txn() as cur:
            cur.execute(
                f"INSERT INTO exchanges ({', '.join(EXCHANGE_FIELDS)}) VALUES ({', '.join(['%s'] * len(values))}) RETURNING id",
                values,
            )
            new_id: int = cur.fetchall()[0][0]
        exchange.id = new_id
        return new_id

    # -- leases (the rest of leases, meta, idempotency and the exchanges' readers: SharedSql) -----

    def lease_acquire(
        self, name: str, owner: str, ttl: float, *, now: float | None = None, take_over: str | None = None
    ) -> bool:
        """Hold ``name`` for ``ttl`` seconds unless another live owner holds it (renewal by the
        holder is fine). ``take_over``: also take it from that holder (one known to be dead).
        One atomic statement: two processes racing for it cannot both win."""
        now = time.time() if now is None else now
        with self._txn() as cur:
            cur.execute(
                "INSERT INTO leases (name, owner, expires_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at "
                "WHERE leases.owner = EXCLUDED.owner OR leases.owner = %s OR leases.expires_at <= %s RETURNING owner",
                (name, owner, now + ttl, take_over, now),
            )
            return cur.fetchone() is not None

    def integrity_check(self) -> str:
        return "ok"


def _max_seqs(cur: psycopg.Cursor[Any], keys: list[Key]) -> dict[Key, int]:
    out: dict[tuple[str | None, int | None], int] = {}
    tasks = [k[0] for k in keys if k[0] is not None]
    if tasks:
        # one index probe per task (a GROUP BY would read every row of those tasks)
        cur.execute(
            "SELECT k, (SELECT MAX(seq) FROM events WHERE task_id = k AND task_id IS NOT NULL) FROM unnest(%s::text[]) AS k",
            (tasks,),
        )
        out.update(((t, None), m) for t, m in cur.fetchall() if m is not None)
    for _, exchange_id in (k for k in keys if k[0] is None):
        cur.execute(
            "SELECT MAX(seq) FROM events WHERE task_id IS NULL AND exchange_id IS NOT DISTINCT FROM %s", (exchange_id,)
        )
        m = cur.fetchall()[0][0]
        if m is not None:
            out[(None, exchange_id)] = m
    return out


def _find(cur: psycopg.Cursor[Any], key: Key, seq: int) -> StoredEvent | None:
    task_id, exchange_id = key
    if task_id is not None:
        cur.execute(f"SELECT {_EVENT_COLS} FROM events WHERE task_id = %s AND seq = %s", (task_id, seq))
    else:
        cur.execute(
            f"SELECT {_EVENT_COLS} FROM events WHERE task_id IS NULL AND exchange_id IS NOT DISTINCT FROM %s AND seq = %s",
            (exchange_id, seq),
        )
    row = cur.fetchone()
    if row is None:
        return None
    position, task_id, seq_, exchange_id, sse_event, payload, received_at, mono, origin = row
    return StoredEvent(position, task_id, seq_, exchange_id, sse_event, bytes(payload), received_at, mono, origin)
