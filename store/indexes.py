"""Rows and filters of the index projections both backends keep (issue 14).

- the task index: one row per task of a task projection, ``(key, last_position, last_at,
  state, context_id)``, so a listing pages newest first (by last event) with one indexed query;
- the search index: one row per searchable field of an event, ``(position, field, task_id,
  seq, kind, place, body)``, answered by SQLite FTS5 (trigram) or PostgreSQL full-text search;
- doctor's findings: one row per task, ``(task_id, first_position, settled, errors, warnings,
  findings)`` (``findings``: the encoded list, opaque to the store).

Each is a projection: its rows and its cursor (``projection_cursors``) change in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable

TaskIndexRow = tuple[str, int, float, str, "str | None"]
SearchRow = tuple[int, int, "str | None", int, str, str, str]
FindingsRow = tuple[str, int, int, int, int, bytes]

SEARCH_CURSOR = "search"
DOCTOR_CURSOR = "doctor"
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


def fts_phrase(text: str) -> str:
    """``text`` as one FTS5 phrase (double quotes doubled): matched as a substring by trigrams."""
    return '"' + text.replace('"', '""') + '"'


def ts_prefix_query(words: Iterable[str]) -> str:
    """A PostgreSQL ``tsquery`` text: every word as a quoted lexeme prefix, all required."""
    return " & ".join("'" + w.replace("\\", "\\\\").replace("'", "''") + "':*" for w in words)
