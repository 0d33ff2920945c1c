"""The SQL both backends run alike, written once: exchanges (updated, read back), idempotency keys,
meta and leases (:class:`SharedSql`; the index projections' share is :class:`a2a_tape.store.indexes.IndexSql`).

A backend inherits it and gives what differs between SQLite and PostgreSQL, and only that:

- ``_mark``: its parameter placeholder (``?``, ``%s``); the SQL here is written with it;
- ``_read(sql, params)``: the rows of one query (under the backend's lock, or in the thread's
  transaction when it has one);
- ``_write()``: a write transaction yielding a :class:`Cursor` (nested uses join the outer one);
- ``_serialise(cur, key)``: concurrent writers of ``key`` take turns inside the transaction
  (SQLite: already so, one writer at a time; PostgreSQL: an advisory lock).

Where the dialects really differ (SQLite's FTS5 against PostgreSQL's full-text search, a new row's
id, a lease taken in one statement), the backend writes its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Protocol

from a2a_tape.store.append_plan import EXCHANGE_FIELDS, exchange_from_row, to_column
from a2a_tape.store.errors import StoreError
from a2a_tape.store.records import Exchange, IdempotencyRecord

_EXCHANGE_COLS = "id, " + ", ".join(EXCHANGE_FIELDS)
_IDEM_COLS = "key, request_hash, exchange_id, task_id, state, created_at, expires_at"


class Cursor(Protocol):
    """What the shared SQL uses of a driver's cursor (``sqlite3.Cursor``, ``psycopg.Cursor``)."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> object: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> object: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SharedSql:
    """The queries both backends run alike; the subclass gives the four parts named in the
    module docstring. Its public methods are the store's (``guard_public`` maps their driver errors)."""

    _mark: ClassVar[str]

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Cursor]:
        raise NotImplementedError

    def _serialise(self, cur: Cursor, key: str) -> None:
        raise NotImplementedError

    # -- exchanges (a new row and its id are each backend's: begin_exchange) ----------------

    def update_exchange(self, exchange_id: int, **fields: object) -> None:
        unknown = set(fields) - set(EXCHANGE_FIELDS)
        if unknown:
            raise StoreError(f"unknown exchange fields: {sorted(unknown)}")
        if not fields:
            return
        m = self._mark
        with self._write() as cur:
            cur.execute(
                f"UPDATE exchanges SET {', '.join(f'{k} = {m}' for k in fields)} WHERE id = {m}",
                [*(to_column(k, v) for k, v in fields.items()), exchange_id],
            )

    def get_exchange(self, exchange_id: int) -> Exchange | None:
        rows = self._read(f"SELECT {_EXCHANGE_COLS} FROM exchanges WHERE id = {self._mark}", (exchange_id,))
        return exchange_from_row(rows[0]) if rows else None

    def exchanges(self, task_id: str | None = None, *, after_id: int = 0) -> list[Exchange]:
        m = self._mark
        sql = f"SELECT {_EXCHANGE_COLS} FROM exchanges WHERE id > {m}"
        args: list[object] = [after_id]
        if task_id is not None:
            sql += f" AND (task_id = {m} OR id IN (SELECT DISTINCT exchange_id FROM events WHERE task_id = {m}))"
            args += [task_id, task_id]
        return [exchange_from_row(r) for r in self._read(sql + " ORDER BY id", args)]

    def exchange_observers(self, ids: Iterable[int]) -> dict[int, tuple[str | None, str | None]]:
        """The observer and source of each of these exchanges (observer None: one that joins the
        task's latest run); an id not in the log is left out. By primary key: a fold asks for a
        batch's new ones."""
        wanted = list(ids)
        out: dict[int, tuple[str | None, str | None]] = {}
        m = self._mark
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            rows = self._read(
                f"SELECT id, observer, source FROM exchanges WHERE id IN ({', '.join([m] * len(part))})", part
            )
            out.update((int(r[0]), (r[1], r[2])) for r in rows)
        return out

    def exchanges_open_within(self, start: float, end: float) -> list[Exchange]:
        """The exchanges open at some moment of ``[start, end]``: begun by ``end``, not ended before
        ``start`` (or not ended), by id. A scan of the exchange rows in the database, which returns
        only those (capture/lineage.py: the callers a task's calls can have, its calls' callees)."""
        m = self._mark
        rows = self._read(
            f"SELECT {_EXCHANGE_COLS} FROM exchanges WHERE started_at <= {m} "
            f"AND (ended_at IS NULL OR ended_at >= {m}) ORDER BY id",
            (end, start),
        )
        return [exchange_from_row(r) for r in rows]

    def last_exchange_id(self) -> int:
        """The highest exchange id in the log (0: none), by the primary key."""
        return int(self._read("SELECT COALESCE(MAX(id), 0) FROM exchanges")[0][0])

    def exchanges_without_task(self) -> list[Exchange]:
        """The exchanges that name no task (an index probe: not a read of every exchange)."""
        rows = self._read(f"SELECT {_EXCHANGE_COLS} FROM exchanges WHERE task_id IS NULL ORDER BY id")
        return [exchange_from_row(r) for r in rows]

    # -- idempotency --------------------------------------------------------------------------

    def idem_get(self, key: str, *, now: float | None = None) -> IdempotencyRecord | None:
        now = time.time() if now is None else now
        m = self._mark
        rows = self._read(
            f"SELECT {_IDEM_COLS} FROM idempotency WHERE key = {m} AND (expires_at IS NULL OR expires_at > {m})",
            (key, now),
        )
        return IdempotencyRecord(*rows[0]) if rows else None

    def idem_claim(self, record: IdempotencyRecord) -> tuple[IdempotencyRecord, bool]:
        """Register ``record`` unless a live record holds its key; return (record held, claimed?)."""
        now = record.created_at or time.time()
        m = self._mark
        with self._write() as cur:
            self._serialise(cur, "idem:" + record.key)
            cur.execute(f"SELECT {_IDEM_COLS} FROM idempotency WHERE key = {m}", (record.key,))
            row = cur.fetchone()
            if row is not None:
                held = IdempotencyRecord(*row)
                if held.expires_at is None or held.expires_at > now:
                    return held, False
            cur.execute(
                f"INSERT INTO idempotency ({_IDEM_COLS}) VALUES ({', '.join([m] * 7)}) ON CONFLICT (key) DO UPDATE "
                "SET request_hash = excluded.request_hash, exchange_id = excluded.exchange_id, "
                "task_id = excluded.task_id, state = excluded.state, created_at = excluded.created_at, "
                "expires_at = excluded.expires_at",
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
                sets.append(f"{col} = {self._mark}")
                args.append(val)
        if not sets:
            return
        with self._write() as cur:
            cur.execute(f"UPDATE idempotency SET {', '.join(sets)} WHERE key = {self._mark}", [*args, key])

    def idem_release(self, key: str) -> None:
        """Forget a key (its request never reached the agent, so a retry may run it)."""
        with self._write() as cur:
            cur.execute(f"DELETE FROM idempotency WHERE key = {self._mark}", (key,))

    def idem_all(self) -> list[IdempotencyRecord]:
        return [IdempotencyRecord(*r) for r in self._read(f"SELECT {_IDEM_COLS} FROM idempotency ORDER BY created_at")]

    def idem_expire(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        with self._write() as cur:
            cur.execute(f"DELETE FROM idempotency WHERE expires_at IS NOT NULL AND expires_at <= {self._mark}", (now,))
            return int(cur.rowcount)

    # -- leases and meta ----------------------------------------------------------------------

    def lease_holder(self, name: str, *, now: float | None = None) -> str | None:
        """Who holds ``name`` now (None when free or expired)."""
        now = time.time() if now is None else now
        m = self._mark
        rows = self._read(f"SELECT owner FROM leases WHERE name = {m} AND expires_at > {m}", (name, now))
        return rows[0][0] if rows else None

    def lease_release(self, name: str, owner: str) -> None:
        with self._write() as cur:
            cur.execute(f"DELETE FROM leases WHERE name = {self._mark} AND owner = {self._mark}", (name, owner))

    def get_meta(self, key: str) -> str | None:
        rows = self._read(f"SELECT value FROM meta WHERE key = {self._mark}", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        m = self._mark
        with self._write() as cur:
            cur.execute(
                f"INSERT INTO meta (key, value) VALUES ({m}, {m}) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
