"""The projection SQL only PostgreSQL runs: rows loaded by key as one array, and the search index
answered by full-text search (a GIN index on the ``tsvector`` of each field: words and word prefixes).

The rest of the projection SQL (rows and cursors, the task index, findings) is shared with
SQLite: :class:`a2a_tape.store.indexes.IndexSql`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from a2a_tape.store.indexes import IndexSql, SearchRow
from a2a_tape.store.shared_sql import Cursor

TSV = "to_tsvector('simple', left(body, 100000))"
"""The search index's tsvector (the same expression in the GIN index and in every query; a
tsvector holds at most 1 MB, so very long fields are indexed by their first 100,000 characters)."""


def ts_prefix_query(words: Iterable[str]) -> str:
    """A PostgreSQL ``tsquery`` text: every word as a quoted lexeme prefix, all required."""
    return " & ".join("'" + w.replace("\\", "\\\\").replace("'", "''") + "':*" for w in words)


class PostgresIndexes(IndexSql):
    """PostgreSQL's own part of the projections (mixed into :class:`a2a_tape.store.postgres.PostgresStore`)."""

    def projection_load(self, name: str, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        if not keys:
            return {}
        rows = self._read(
            "SELECT key, value FROM projection_rows WHERE projection = %s AND key = ANY(%s)", (name, keys)
        )
        return dict(rows)

    def _search_insert(self, cur: Cursor, rows: Sequence[SearchRow]) -> None:
        if not rows:
            return
        cur.executemany(
            "INSERT INTO search_index (position, field, task_id, seq, kind, place, body) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (position, field) DO UPDATE SET "
            "task_id = EXCLUDED.task_id, seq = EXCLUDED.seq, kind = EXCLUDED.kind, place = EXCLUDED.place, "
            "body = EXCLUDED.body",
            # a text value cannot hold NUL in PostgreSQL
            [(p, f, t, seq, k, w, body.replace("\x00", "\ufffd")) for p, f, t, seq, k, w, body in rows],
        )

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
            cond += f" AND ({TSV} @@ (plainto_tsquery('simple', %s) || to_tsquery('simple', %s)))"
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
