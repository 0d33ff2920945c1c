"""Rows and filters of the index projections both backends keep (issue 14).

- the task index: one row per task of a task projection, ``(key, last_position, last_at,
  state, context_id)``, so a listing pages newest first (by last event) with one indexed query;
- the search index: one row per searchable field of an event, ``(position, field, task_id,
  seq, kind, place, body)``, answered by SQLite FTS5 (trigram) or PostgreSQL full-text search;
- doctor's findings: one row per task, ``(task_id, first_position, settled, errors, warnings,
  findings)`` (``findings``: the encoded list, opaque to the store).

Each is a projection: its rows and its cursor (``projection_cursors``) change in one transaction.
:class:`IndexSql` holds the projection SQL both backends run alike (projection rows and cursors,
the task index, findings); each backend's own part (its search index, how it loads rows by key)
is in ``sqlite_indexes.py`` and ``postgres_indexes.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import ClassVar

from a2a_tape.store.shared_sql import Cursor, SharedSql

TaskIndexRow = tuple[str, int, float, str, "str | None"]
SearchRow = tuple[int, int, "str | None", int, str, str, str]
FindingsRow = tuple[str, int, int, int, int, bytes]

SEARCH_CURSOR = "search"
DOCTOR_CURSOR = "doctor"
_CHUNK = 100  # tasks (and exchange ids, positions) per statement: under SQLite's 999 parameters of older builds
FIELDS_PER_EVENT = 1024
"""A search row's key is ``position * FIELDS_PER_EVENT + field`` (fields past that are not indexed)."""


def task_filter(
    mark: str, states: Iterable[str] | None = None, context: str | None = None, since: float | None = None
) -> tuple[str, list[object]]:
    """The ``AND ...`` conditions of a task index query and their parameters."""
    sql = ""
    params: list[object] = []
    if states is not None:
        wanted = sorted(set(states))
        sql += f" AND state IN ({', '.join([mark] * len(wanted))})" if wanted else " AND 0 = 1"
        params += wanted
    if context is not None:
        sql += f" AND context_id = {mark}"
        params.append(context)
    if since is not None:
        sql += f" AND last_at >= {mark}"
        params.append(since)
    return sql, params


class IndexSql(SharedSql):
    """The projection SQL both backends run alike (see :class:`a2a_tape.store.shared_sql.SharedSql`
    for what the backend gives); the search index's own SQL is each backend's."""

    _bytewise: ClassVar[str]
    """What makes a text column compare by bytes, as Python compares strings (PostgreSQL:
    ``COLLATE "C"``; SQLite's default already does)."""

    def _search_insert(self, cur: Cursor, rows: Sequence[SearchRow]) -> None:
        raise NotImplementedError

    def _commit(self, name: str, position: int | None, expect: int | None, write: Callable[[Cursor], None]) -> bool:
        """One transaction: if the cursor ``name`` is still at ``expect`` (None: wherever it is),
        ``write(cur)`` and move the cursor to ``position`` (None: leave it); whether it committed."""
        m = self._mark
        with self._write() as cur:
            self._serialise(cur, "proj:" + name)
            if expect is not None:
                cur.execute(f"SELECT position FROM projection_cursors WHERE name = {m}", (name,))
                row = cur.fetchone()
                if (row[0] if row else 0) != expect:
                    return False
            write(cur)
            if position is not None:
                cur.execute(
                    f"INSERT INTO projection_cursors (name, position) VALUES ({m}, {m}) "
                    "ON CONFLICT (name) DO UPDATE SET position = excluded.position",
                    (name, position),
                )
        return True

    # -- removing tasks (a2a-tape rm, prune) --------------------------------------------------

    def remove_tasks(self, task_ids: Sequence[str]) -> tuple[int, int]:
        """Remove tasks from the log, in the caller's transaction (or one of its own): their
        events, the task-less events of their exchanges (an error before the task id was known),
        those exchanges unless a kept event is of one, their idempotency keys, and their rows in
        every projection (task views and index, search index, doctor's findings). Every
        projection row is of one task or one event, so what stays equals a rebuild. Returns
        (events, exchanges) removed.

        The positions of the removed events stay unused; the log's last position must not go
        back either (a follower's cursor would skip what is appended next), so the caller first
        appends a note of the removal in the same transaction (:func:`a2a_tape.store.removal.remove_tasks`)."""
        events = exchanges = 0
        with self._write() as cur:
            for i in range(0, len(task_ids), _CHUNK):
                removed = self._remove_chunk(cur, list(task_ids[i : i + _CHUNK]))
                events, exchanges = events + removed[0], exchanges + removed[1]
        return events, exchanges

    def _remove_chunk(self, cur: Cursor, tasks: list[str]) -> tuple[int, int]:
        m = self._mark

        def among(values: Sequence[object]) -> str:
            return f"({', '.join([m] * len(values))})"

        cur.execute(f"SELECT id FROM exchanges WHERE task_id IN {among(tasks)}", tasks)
        ids = [int(r[0]) for r in cur.fetchall()]
        owned = f"task_id IN {among(tasks)}"
        args: list[object] = [*tasks]
        for j in range(0, len(ids), _CHUNK):
            some = ids[j : j + _CHUNK]
            owned += f" OR (task_id IS NULL AND exchange_id IN {among(some)})"
            args += some
        cur.execute(f"SELECT position FROM events WHERE {owned}", args)
        positions = [int(r[0]) for r in cur.fetchall()]
        for j in range(0, len(positions), _CHUNK):
            some = positions[j : j + _CHUNK]
            cur.execute(f"DELETE FROM search_index WHERE position IN {among(some)}", some)
        cur.execute(f"DELETE FROM events WHERE {owned}", args)
        events = cur.rowcount
        exchanges = 0
        for j in range(0, len(ids), _CHUNK):
            some = ids[j : j + _CHUNK]
            cur.execute(
                f"DELETE FROM exchanges WHERE id IN {among(some)} "
                "AND NOT EXISTS (SELECT 1 FROM events WHERE events.exchange_id = exchanges.id)",
                some,
            )
            exchanges += cur.rowcount
        cur.execute(f"DELETE FROM idempotency WHERE task_id IN {among(tasks)}", tasks)
        cur.execute(f"DELETE FROM projection_rows WHERE key IN {among(tasks)}", tasks)
        cur.execute(f"DELETE FROM task_index WHERE key IN {among(tasks)}", tasks)
        cur.execute(f"DELETE FROM doctor_findings WHERE task_id IN {among(tasks)}", tasks)
        return events, exchanges

    def _reset(self, cursor: str, *deletes: str) -> None:
        """Run ``deletes`` (statements with no parameters) and drop the cursor, in one transaction."""
        with self._write() as cur:
            for sql in deletes:
                cur.execute(sql)
            cur.execute(f"DELETE FROM projection_cursors WHERE name = {self._mark}", (cursor,))

    # -- projection rows and cursors ----------------------------------------------------------

    def projection_cursor(self, name: str) -> int:
        rows = self._read(f"SELECT position FROM projection_cursors WHERE name = {self._mark}", (name,))
        return int(rows[0][0]) if rows else 0

    def projection_rows(self, name: str, *, batch: int = 500) -> Iterator[tuple[str, bytes]]:
        """Every row of a projection in key order, ``batch`` rows per query (keyset paging, the
        store's lock held per batch only): memory stays flat however many tasks there are."""
        m = self._mark
        rows = self._read(
            f"SELECT key, value FROM projection_rows WHERE projection = {m} ORDER BY key LIMIT {m}", (name, batch)
        )
        while True:
            yield from rows
            if len(rows) < batch:
                return
            rows = self._read(
                f"SELECT key, value FROM projection_rows WHERE projection = {m} AND key > {m} ORDER BY key LIMIT {m}",
                (name, rows[-1][0], batch),
            )

    def projection_commit(
        self, name: str, position: int, upserts: dict[str, bytes], *, expect: int | None = None
    ) -> bool:
        """Write a projection's rows and its cursor in one transaction (exactly once).

        With ``expect``, commit only if the cursor is still there (another process did not
        move it meanwhile); returns whether it committed.
        """
        m = self._mark

        def write(cur: Cursor) -> None:
            if upserts:
                cur.executemany(
                    f"INSERT INTO projection_rows (projection, key, value) VALUES ({m}, {m}, {m}) "
                    "ON CONFLICT (projection, key) DO UPDATE SET value = excluded.value",
                    [(name, k, v) for k, v in upserts.items()],
                )

        return self._commit(name, position, expect, write)

    def projection_reset(self, name: str) -> None:
        m = self._mark
        with self._write() as cur:
            cur.execute(f"SELECT 1 FROM projection_rows WHERE projection != {m} LIMIT 1", (name,))
            if cur.fetchone() is None:  # the only projection: SQLite frees whole pages for a DELETE without WHERE
                cur.execute("DELETE FROM projection_rows")
            else:
                cur.execute(f"DELETE FROM projection_rows WHERE projection = {m}", (name,))
            cur.execute(f"DELETE FROM projection_cursors WHERE name = {m}", (name,))

    # -- the task index -----------------------------------------------------------------------

    def task_index_upsert(self, name: str, rows: Sequence[TaskIndexRow]) -> None:
        """Write task index rows (join the caller's transaction: the projection's commit)."""
        if not rows:
            return
        m = self._mark
        with self._write() as cur:
            cur.executemany(
                "INSERT INTO task_index (projection, key, last_position, last_at, state, context_id) "
                f"VALUES ({m}, {m}, {m}, {m}, {m}, {m}) ON CONFLICT (projection, key) DO UPDATE SET "
                "last_position = excluded.last_position, last_at = excluded.last_at, state = excluded.state, "
                "context_id = excluded.context_id",
                [(name, *r) for r in rows],
            )

    def task_index_reset(self, name: str) -> None:
        with self._write() as cur:
            cur.execute(f"DELETE FROM task_index WHERE projection = {self._mark}", (name,))

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
        m = self._mark
        cond, params = task_filter(m, states, context, since)
        if before is not None:
            cond += f" AND last_position < {m}"
            params.append(before)
        return self._read(
            f"SELECT key, last_position FROM task_index WHERE projection = {m}{cond} ORDER BY last_position DESC LIMIT {m}",
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
        cond, params = task_filter(self._mark, states, context, since)
        rows = self._read(f"SELECT COUNT(*) FROM task_index WHERE projection = {self._mark}{cond}", [name, *params])
        return int(rows[0][0])

    # -- the search index: its rows are each backend's ---------------------------------------------

    def search_commit(self, position: int, rows: Sequence[SearchRow], *, expect: int | None = None) -> bool:
        """Add search rows and move the search cursor, in one transaction (``expect``: as in
        :meth:`projection_commit`)."""
        return self._commit(SEARCH_CURSOR, position, expect, lambda cur: self._search_insert(cur, rows))

    def search_reset(self) -> None:
        self._reset(SEARCH_CURSOR, "DELETE FROM search_index")

    # -- doctor's findings --------------------------------------------------------------------

    def findings_commit(self, position: int | None, rows: Sequence[FindingsRow], *, expect: int | None = None) -> bool:
        """Upsert findings rows; with ``position``, move doctor's cursor in the same transaction."""
        m = self._mark

        def write(cur: Cursor) -> None:
            if rows:
                cur.executemany(
                    "INSERT INTO doctor_findings (task_id, first_position, settled, errors, warnings, findings) "
                    f"VALUES ({m}, {m}, {m}, {m}, {m}, {m}) ON CONFLICT (task_id) DO UPDATE SET "
                    "first_position = excluded.first_position, settled = excluded.settled, errors = excluded.errors, "
                    "warnings = excluded.warnings, findings = excluded.findings",
                    rows,
                )

        return self._commit(DOCTOR_CURSOR, position, expect, write)

    def findings_reset(self) -> None:
        self._reset(DOCTOR_CURSOR, "DELETE FROM doctor_findings")

    def findings_unsettled(self) -> list[str]:
        return [r[0] for r in self._read("SELECT task_id FROM doctor_findings WHERE settled = 0")]

    def findings_counts(self, task_id: str) -> tuple[int, int] | None:
        """(errors, warnings) of a task's findings row, None when it has none."""
        rows = self._read(f"SELECT errors, warnings FROM doctor_findings WHERE task_id = {self._mark}", (task_id,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def findings_totals(self) -> tuple[int, int, int]:
        """(tasks, errors, warnings) over every findings row."""
        n, e, w = self._read(
            "SELECT COUNT(*), COALESCE(SUM(errors), 0), COALESCE(SUM(warnings), 0) FROM doctor_findings"
        )[0]
        return int(n), int(e), int(w)

    def findings_rows(self, *, faulty_only: bool = True, batch: int = 500) -> Iterator[FindingsRow]:
        """Findings rows in the order of the tasks' first events (keyset paging)."""
        m, c = self._mark, self._bytewise
        cond = " AND errors + warnings > 0" if faulty_only else ""
        sql = (
            "SELECT task_id, first_position, settled, errors, warnings, findings FROM doctor_findings "
            f"WHERE (first_position, task_id{c}) > ({m}, {m}){cond} ORDER BY first_position, task_id{c} LIMIT {m}"
        )
        after: tuple[int, str] = (-1, "")
        while True:
            rows = self._read(sql, (*after, batch))
            yield from rows
            if len(rows) < batch:
                return
            after = (rows[-1][1], rows[-1][0])

    def tasks_touched(self, after: int, upto: int) -> list[str]:
        """The task ids of the events in ``(after, upto]`` (what doctor examines again)."""
        rows = self._read(
            "SELECT DISTINCT task_id FROM events "
            f"WHERE position > {self._mark} AND position <= {self._mark} AND task_id IS NOT NULL",
            (after, upto),
        )
        return [r[0] for r in rows]
