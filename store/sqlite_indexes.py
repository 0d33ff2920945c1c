"""The projection SQL only SQLite runs: rows loaded by key in chunks (no arrays), and the search
index as an FTS5 table with trigram tokens (any substring of 3 characters or more).

The rest of the projection SQL (rows and cursors, the task index, findings) is shared with
PostgreSQL: :class:`a2a_tape.store.indexes.IndexSql`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from a2a_tape.store.indexes import FIELDS_PER_EVENT, IndexSql, SearchRow
from a2a_tape.store.shared_sql import Cursor

_CHUNK = 500
"""Keys per ``IN (...)`` list: far below SQLite's limit of bound variables."""


def fts_phrase(text: str) -> str:
    """``text`` as one FTS5 phrase (double quotes doubled): matched as a substring by trigrams."""
    return '"' + text.replace('"', '""') + '"'


class SqliteIndexes(IndexSql):
    """SQLite's own part of the projections (mixed into :class:`a2a_tape.store.sqlite.SqliteStore`)."""

    def projection_load(self, name: str, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        out: dict[str, bytes] = {}
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
            rows = self._read(
                f"SELECT key, value FROM projection_rows WHERE projection = ? AND key IN ({', '.join('?' * len(chunk))})",
                [name, *chunk],
            )
            out.update(rows)
        return out

    def _search_insert(self, cur: Cursor, rows: Sequence[SearchRow]) -> None:
        # an FTS5 table has no upsert: a row's rowid is its key (position, field), REPLACE keeps one
        cur.executemany(
            "INSERT OR REPLACE INTO search_index (rowid, body, position, field, task_id, seq, kind, place) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(p * FIELDS_PER_EVENT + f, body, p, f, t, seq, k, w) for p, f, t, seq, k, w, body in rows],
        )

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
            rows = self._read(sql, [after, *params, batch])
            for r in rows:
                yield r[1:]
            if len(rows) < batch:
                return
            after = rows[-1][0]

    def search_can_answer(self, text: str) -> bool:
        """Whether :meth:`search_match` finds every row containing ``text`` (trigrams: 3+ characters)."""
        return len(text) >= 3
