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

Needs the ``postgres`` extra (psycopg 3 with its pool).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from .append_plan import EXCHANGE_FIELDS, BatchPlan, Key, event_row, exchange_from_row, exchange_values
from .driver_errors import guard_public
from .errors import ConnectionLost, SchemaTooNew, StoreError, WouldWait
from .indexes import (
    DOCTOR_CURSOR,
    SEARCH_CURSOR,
    FindingsRow,
    SearchRow,
    TaskIndexRow,
    task_filter,
    ts_prefix_query,
)
from .interface import Durability, FoldRow
from .locations import safe_location
from .paging import TaskRange, fold_rows_filter, pages, sample_positions, split_ranges
from .records import Exchange, IdempotencyRecord, NewEvent, StoredEvent, TaskEvents
from .write_lock import NoWait

try:  # optional dependency
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError:  # pragma: no cover - reported when a postgresql:// URL is used
    psycopg = None  # type: ignore[assignment]  # the names stay bound: None says the extra is missing
    ConnectionPool = None  # type: ignore[assignment,misc]  # (checked in PostgresStore.__init__)
    PoolTimeout = None  # type: ignore[assignment,misc]

SCHEMA_VERSION = 2
_NOWAIT = 0.001  # seconds a write begun without waiting may wait for a pooled connection
CHANNEL = "a2a_tape_events"
_EVENT_COLS = "position, task_id, seq, exchange_id, sse_event, payload, received_at, mono, origin"

_SCHEMA = [
    """CREATE TABLE exchanges (
        id BIGSERIAL PRIMARY KEY, started_at DOUBLE PRECISION, ended_at DOUBLE PRECISION, url TEXT,
        http_method TEXT, rpc_method TEXT, dialect TEXT, streaming INTEGER, request_headers TEXT,
        request_body BYTEA, status INTEGER, content_type TEXT, response_headers TEXT, response_body BYTEA,
        outcome TEXT, error TEXT, task_id TEXT, context_id TEXT, message_id TEXT, idempotency_key TEXT, role TEXT)""",
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

_TSV = "to_tsvector('simple', left(body, 100000))"
"""The search index's tsvector (the same expression in the GIN index and in every query; a
tsvector holds at most 1 MB, so very long fields are indexed by their first 100,000 characters)."""

_SCHEMA_V2 = [
    # index projections (issue 14): the task list, the search index, doctor's findings
    """CREATE TABLE task_index (projection TEXT NOT NULL, key TEXT NOT NULL, last_position BIGINT NOT NULL,
        last_at DOUBLE PRECISION NOT NULL, state TEXT NOT NULL, context_id TEXT, PRIMARY KEY (projection, key))""",
    "CREATE INDEX task_index_newest ON task_index(projection, last_position)",
    """CREATE TABLE search_index (position BIGINT NOT NULL, field INTEGER NOT NULL, task_id TEXT, seq BIGINT NOT NULL,
        kind TEXT NOT NULL, place TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (position, field))""",
    f"CREATE INDEX search_index_body ON search_index USING GIN ({_TSV})",
    """CREATE TABLE doctor_findings (task_id TEXT PRIMARY KEY, first_position BIGINT NOT NULL, settled INTEGER NOT NULL,
        errors INTEGER NOT NULL, warnings INTEGER NOT NULL, findings BYTEA NOT NULL)""",
    "CREATE INDEX doctor_findings_order ON doctor_findings(first_position, task_id)",
    "CREATE INDEX doctor_findings_unsettled ON doctor_findings(settled) WHERE settled = 0",
]


@guard_public
class PostgresStore:
    """The event log in a PostgreSQL database. See :mod:`a2a_tape.store.interface` for the API contract.

    ``busy_timeout``: when given, a statement waits that many seconds for a lock another session
    holds (``lock_timeout``), then :class:`DatabaseLocked`; by default it waits as PostgreSQL does.
    ``readonly``: every transaction is read-only (a write raises :class:`ReadOnlyStore`) and the
    schema is neither created nor migrated. ``pool_timeout``: how long a call waits for a connection
    (all in use, or the server gone) before :class:`ConnectionLost`.
    """

    backend = "postgres"

    def __init__(
        self,
        url: str,
        *,
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
            raise ConnectionLost(f"cannot connect to {safe_location(url)}: {_first_line(exc)}") from None
        self._local = threading.local()
        self._nowait = NoWait()  # see without_waiting
        if readonly:
            self._check_schema()
        else:
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
        except (PoolTimeout, psycopg.errors.LockNotAvailable):
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

    def _read(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        with self._txn() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    def _check_schema(self) -> None:
        """A read-only open: the schema must be there already, at a version we read."""
        rows = self._read("SELECT to_regclass('a2a_tape_schema') IS NOT NULL")
        found = self._read("SELECT version FROM a2a_tape_schema")[0][0] if rows[0][0] else 0
        if found != SCHEMA_VERSION:
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
                for stmt in _SCHEMA + _SCHEMA_V2:
                    cur.execute(stmt)
                cur.execute("INSERT INTO a2a_tape_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
            elif found < SCHEMA_VERSION:
                # version 1 -> 2: the index projections (task rows folded before are folded again
                # by the projector, which sees they have no index rows)
                for stmt in _SCHEMA_V2:
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
        received_at, payload)`` tuples, in log order (the narrow reader of a rebuild); ``upto``
        and ``tasks`` as in :meth:`store.sqlite.SqliteStore.read_fold_rows`."""
        cond, extra = fold_rows_filter(upto, tasks, "%s", ' COLLATE "C"')
        sql = f"SELECT position, task_id, seq, exchange_id, received_at, payload FROM events WHERE position > %s{cond}"
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
        values = exchange_values(exchange)
        with self._txn() as cur:
            cur.execute(
                f"INSERT INTO exchanges ({', '.join(EXCHANGE_FIELDS)}) VALUES ({', '.join(['%s'] * len(values))}) RETURNING id",
                values,
            )
            new_id: int = cur.fetchall()[0][0]
        exchange.id = new_id
        return new_id

    def update_exchange(self, exchange_id: int, **fields: object) -> None:
        unknown = set(fields) - set(EXCHANGE_FIELDS)
        if unknown:
            raise StoreError(f"unknown exchange fields: {sorted(unknown)}")
        if not fields:
            return
        # the keys are checked against EXCHANGE_FIELDS above; msgspec does not check values at init
        ex = Exchange(**{k: v for k, v in fields.items()})  # type: ignore[arg-type]  # keys checked; values as given
        values = dict(zip(EXCHANGE_FIELDS, exchange_values(ex)))
        with self._txn() as cur:
            cur.execute(
                f"UPDATE exchanges SET {', '.join(f'{k} = %s' for k in fields)} WHERE id = %s",
                [*(values[k] for k in fields), exchange_id],
            )

    def get_exchange(self, exchange_id: int) -> Exchange | None:
        rows = self._read(f"SELECT id, {', '.join(EXCHANGE_FIELDS)} FROM exchanges WHERE id = %s", (exchange_id,))
        return exchange_from_row(rows[0]) if rows else None

    def exchanges(self, task_id: str | None = None, *, after_id: int = 0) -> list[Exchange]:
        sql = f"SELECT id, {', '.join(EXCHANGE_FIELDS)} FROM exchanges WHERE id > %s"
        args: list[object] = [after_id]
        if task_id is not None:
            sql += " AND (task_id = %s OR id IN (SELECT DISTINCT exchange_id FROM events WHERE task_id = %s))"
            args += [task_id, task_id]
        return [exchange_from_row(r) for r in self._read(sql + " ORDER BY id", args)]

    # -- idempotency -------------------------------------------------------------------------

    _IDEM = "key, request_hash, exchange_id, task_id, state, created_at, expires_at"

    def idem_get(self, key: str, *, now: float | None = None) -> IdempotencyRecord | None:
        now = time.time() if now is None else now
        rows = self._read(
            f"SELECT {self._IDEM} FROM idempotency WHERE key = %s AND (expires_at IS NULL OR expires_at > %s)",
            (key, now),
        )
        return IdempotencyRecord(*rows[0]) if rows else None

    def idem_claim(self, record: IdempotencyRecord) -> tuple[IdempotencyRecord, bool]:
        now = record.created_at or time.time()
        with self._txn() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("idem:" + record.key,))
            cur.execute(f"SELECT {self._IDEM} FROM idempotency WHERE key = %s", (record.key,))
            row = cur.fetchone()
            if row is not None:
                held = IdempotencyRecord(*row)
                if held.expires_at is None or held.expires_at > now:
                    return held, False
            cur.execute(
                f"INSERT INTO idempotency ({self._IDEM}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (key) DO UPDATE SET request_hash = EXCLUDED.request_hash, exchange_id = EXCLUDED.exchange_id, "
                "task_id = EXCLUDED.task_id, state = EXCLUDED.state, created_at = EXCLUDED.created_at, "
                "expires_at = EXCLUDED.expires_at",
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
                sets.append(f"{col} = %s")
                args.append(val)
        if sets:
            with self._txn() as cur:
                cur.execute(f"UPDATE idempotency SET {', '.join(sets)} WHERE key = %s", [*args, key])

    def idem_release(self, key: str) -> None:
        """Forget a key (its request never reached the agent, so a retry may run it)."""
        with self._txn() as cur:
            cur.execute("DELETE FROM idempotency WHERE key = %s", (key,))

    def idem_all(self) -> list[IdempotencyRecord]:
        return [IdempotencyRecord(*r) for r in self._read(f"SELECT {self._IDEM} FROM idempotency ORDER BY created_at")]

    def idem_expire(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        with self._txn() as cur:
            cur.execute("DELETE FROM idempotency WHERE expires_at IS NOT NULL AND expires_at <= %s", (now,))
            return int(cur.rowcount)

    # -- projections -------------------------------------------------------------------------

    def projection_cursor(self, name: str) -> int:
        rows = self._read("SELECT position FROM projection_cursors WHERE name = %s", (name,))
        return rows[0][0] if rows else 0

    def projection_load(self, name: str, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        if not keys:
            return {}
        rows = self._read(
            "SELECT key, value FROM projection_rows WHERE projection = %s AND key = ANY(%s)", (name, keys)
        )
        return {k: bytes(v) for k, v in rows}

    def projection_rows(self, name: str, *, batch: int = 500) -> Iterator[tuple[str, bytes]]:
        """Every row of a projection in key order, ``batch`` rows per query (keyset paging):
        memory stays flat however many tasks there are."""
        rows = self._read(
            "SELECT key, value FROM projection_rows WHERE projection = %s ORDER BY key LIMIT %s", (name, batch)
        )
        while True:
            for k, v in rows:
                yield k, bytes(v)
            if len(rows) < batch:
                return
            rows = self._read(
                "SELECT key, value FROM projection_rows WHERE projection = %s AND key > %s ORDER BY key LIMIT %s",
                (name, rows[-1][0], batch),
            )

    def projection_commit(
        self, name: str, position: int, upserts: dict[str, bytes], *, expect: int | None = None
    ) -> bool:
        with self._txn() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("proj:" + name,))
            if expect is not None:
                cur.execute("SELECT position FROM projection_cursors WHERE name = %s", (name,))
                row = cur.fetchone()
                if (row[0] if row else 0) != expect:
                    return False
            if upserts:
                cur.executemany(
                    "INSERT INTO projection_rows (projection, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (projection, key) DO UPDATE SET value = EXCLUDED.value",
                    [(name, k, v) for k, v in upserts.items()],
                )
            cur.execute(
                "INSERT INTO projection_cursors (name, position) VALUES (%s, %s) "
                "ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position",
                (name, position),
            )
        return True

    def projection_reset(self, name: str) -> None:
        with self._txn() as cur:
            cur.execute("DELETE FROM projection_rows WHERE projection = %s", (name,))
            cur.execute("DELETE FROM projection_cursors WHERE name = %s", (name,))

    # -- leases ------------------------------------------------------------------------------

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

    def lease_holder(self, name: str, *, now: float | None = None) -> str | None:
        """Who holds ``name`` now (None when free or expired)."""
        now = time.time() if now is None else now
        rows = self._read("SELECT owner FROM leases WHERE name = %s AND expires_at > %s", (name, now))
        return rows[0][0] if rows else None

    def lease_release(self, name: str, owner: str) -> None:
        with self._txn() as cur:
            cur.execute("DELETE FROM leases WHERE name = %s AND owner = %s", (name, owner))

    # -- meta --------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = %s", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self._txn() as cur:
            cur.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (key, value),
            )

    def integrity_check(self) -> str:
        return "ok"

    # -- index projections (issue 14): task list, search, doctor's findings ----------------------
    # Kept apart from the methods above on purpose (see store/indexes.py for the row shapes).

    def task_index_upsert(self, name: str, rows: Sequence[TaskIndexRow]) -> None:
        if not rows:
            return
        with self._txn() as cur:
            cur.executemany(
                "INSERT INTO task_index (projection, key, last_position, last_at, state, context_id) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (projection, key) DO UPDATE SET "
                "last_position = EXCLUDED.last_position, last_at = EXCLUDED.last_at, state = EXCLUDED.state, "
                "context_id = EXCLUDED.context_id",
                [(name, *r) for r in rows],
            )

    def exchanges_without_task(self) -> list[Exchange]:
        """The exchanges that name no task (an index probe: not a read of every exchange)."""
        sql = f"SELECT id, {', '.join(EXCHANGE_FIELDS)} FROM exchanges WHERE task_id IS NULL ORDER BY id"
        return [exchange_from_row(r) for r in self._read(sql)]

    def task_index_reset(self, name: str) -> None:
        with self._txn() as cur:
            cur.execute("DELETE FROM task_index WHERE projection = %s", (name,))

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
        cond, params = task_filter("%s", states, context, since)
        if before is not None:
            cond += " AND last_position < %s"
            params.append(before)
        return self._read(
            f"SELECT key, last_position FROM task_index WHERE projection = %s{cond} ORDER BY last_position DESC LIMIT %s",
            [name, *params, limit],
        )

    def task_index_count(
        self,
        name: str,
        *,
        states: Iterable[str] | None = None,
        context: str | None = None,
        since: float | None = None,
    ) -> int:
        cond, params = task_filter("%s", states, context, since)
        return int(self._read(f"SELECT COUNT(*) FROM task_index WHERE projection = %s{cond}", [name, *params])[0][0])

    def _guarded(self, cur: Any, name: str, expect: int | None) -> bool:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("proj:" + name,))
        if expect is None:
            return True
        cur.execute("SELECT position FROM projection_cursors WHERE name = %s", (name,))
        row = cur.fetchone()
        return (row[0] if row else 0) == expect

    def _move_cursor(self, cur: Any, name: str, position: int) -> None:
        cur.execute(
            "INSERT INTO projection_cursors (name, position) VALUES (%s, %s) "
            "ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position",
            (name, position),
        )

    def search_commit(self, position: int, rows: Sequence[SearchRow], *, expect: int | None = None) -> bool:
        with self._txn() as cur:
            if not self._guarded(cur, SEARCH_CURSOR, expect):
                return False
            if rows:
                cur.executemany(
                    "INSERT INTO search_index (position, field, task_id, seq, kind, place, body) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (position, field) DO UPDATE SET "
                    "task_id = EXCLUDED.task_id, seq = EXCLUDED.seq, kind = EXCLUDED.kind, place = EXCLUDED.place, "
                    "body = EXCLUDED.body",
                    [(p, f, t, seq, k, w, body.replace("\x00", "\ufffd")) for p, f, t, seq, k, w, body in rows],
                )
            self._move_cursor(cur, SEARCH_CURSOR, position)
        return True

    def search_reset(self) -> None:
        with self._txn() as cur:
            cur.execute("DELETE FROM search_index")
            cur.execute("DELETE FROM projection_cursors WHERE name = %s", (SEARCH_CURSOR,))

    def search_can_answer(self, text: str) -> bool:
        """Full-text search finds words and word prefixes: ``text`` needs a word in it."""
        return bool(re.search(r"\w", text))

    def search_match(self, text: str | None, *, task_id: str | None = None, batch: int = 1000) -> Iterator[SearchRow]:
        """The search rows that may contain ``text``, in log order (``None``: every row). PostgreSQL's
        full-text search answers by words: the rows holding every word of ``text`` as a word or a
        word prefix, or the words of ``text`` as PostgreSQL's parser splits them (a superset the
        caller narrows; a text inside a longer word is not found, unlike SQLite's trigrams)."""
        cond, params = "", []
        if text is not None:
            words = re.findall(r"\w+", text)
            cond += f" AND ({_TSV} @@ (plainto_tsquery('simple', %s) || to_tsquery('simple', %s)))"
            params += [text, ts_prefix_query(words) if words else "''"]
        if task_id is not None:
            cond += " AND task_id = %s"
            params.append(task_id)
        sql = (
            "SELECT position, field, task_id, seq, kind, place, body FROM search_index "
            f"WHERE (position, field) > (%s, %s){cond} ORDER BY position, field LIMIT %s"
        )
        after: tuple[int, int] = (0, -1)
        while True:
            rows = self._read(sql, [*after, *params, batch])
            yield from rows
            if len(rows) < batch:
                return
            after = (rows[-1][0], rows[-1][1])

    def tasks_touched(self, after: int, upto: int) -> list[str]:
        rows = self._read(
            "SELECT DISTINCT task_id FROM events WHERE position > %s AND position <= %s AND task_id IS NOT NULL",
            (after, upto),
        )
        return [r[0] for r in rows]

    def findings_commit(self, position: int | None, rows: Sequence[FindingsRow], *, expect: int | None = None) -> bool:
        with self._txn() as cur:
            if not self._guarded(cur, DOCTOR_CURSOR, expect):
                return False
            if rows:
                cur.executemany(
                    "INSERT INTO doctor_findings (task_id, first_position, settled, errors, warnings, findings) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (task_id) DO UPDATE SET "
                    "first_position = EXCLUDED.first_position, settled = EXCLUDED.settled, errors = EXCLUDED.errors, "
                    "warnings = EXCLUDED.warnings, findings = EXCLUDED.findings",
                    rows,
                )
            if position is not None:
                self._move_cursor(cur, DOCTOR_CURSOR, position)
        return True

    def findings_reset(self) -> None:
        with self._txn() as cur:
            cur.execute("DELETE FROM doctor_findings")
            cur.execute("DELETE FROM projection_cursors WHERE name = %s", (DOCTOR_CURSOR,))

    def findings_unsettled(self) -> list[str]:
        return [r[0] for r in self._read("SELECT task_id FROM doctor_findings WHERE settled = 0")]

    def findings_totals(self) -> tuple[int, int, int]:
        n, e, w = self._read(
            "SELECT COUNT(*), COALESCE(SUM(errors), 0), COALESCE(SUM(warnings), 0) FROM doctor_findings"
        )[0]
        return int(n), int(e), int(w)

    def findings_rows(self, *, faulty_only: bool = True, batch: int = 500) -> Iterator[FindingsRow]:
        cond = " AND errors + warnings > 0" if faulty_only else ""
        sql = (
            "SELECT task_id, first_position, settled, errors, warnings, findings FROM doctor_findings "
            f'WHERE (first_position, task_id COLLATE "C") > (%s, %s){cond} '
            'ORDER BY first_position, task_id COLLATE "C" LIMIT %s'
        )
        after: tuple[int, str] = (-1, "")
        while True:
            rows = self._read(sql, (*after, batch))
            for r in rows:
                yield (r[0], r[1], r[2], r[3], r[4], bytes(r[5]))
            if len(rows) < batch:
                return
            after = (rows[-1][1], rows[-1][0])


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


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
