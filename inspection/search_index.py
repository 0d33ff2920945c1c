"""The search index: every searchable field of every event (:func:`inspection.searchable.item_fields`),
kept as a projection so ``a2a-tape grep WORD`` reads an index instead of the log.

One row per field, ``(position, field, task_id, seq, kind, where, text)``, in SQLite's FTS5 table
``search_index`` (trigram tokens: any substring of 3 characters or more) or PostgreSQL's
full-text search (a GIN index on the ``tsvector`` of the text). The rules are the other
projections' (docs/design.md section 2): a cursor (``projection_cursors``, name ``search``) moves in
the same transaction as the rows it covers, so a crash replays the events after it and never
indexes one twice; rows are a function of one event each, so an index kept incrementally and
one rebuilt from position 0 hold the same rows. When the code that decides what is searchable
changes (a new a2a-tape), the index is dropped and rebuilt: its version is a digest of that code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from a2a_tape.fold.catch_up import ProjectionMoved, catch_up_retrying, code_digest
from a2a_tape.inspection import searchable
from a2a_tape.store import SearchStore, decode_item
from a2a_tape.store.indexes import FIELDS_PER_EVENT, SEARCH_CURSOR, SearchRow

Progress = Callable[[int, int], None]
_VERSION_KEY = "projection:search:version"


def _code_digest() -> str:
    """A digest of the modules whose rules decide the rows (what is searchable, how items decode)."""
    from a2a_tape.store import decode, events

    return code_digest(b"search-1", (searchable, decode, events))


def event_rows(position: int, task_id: str | None, seq: int, payload: bytes) -> list[SearchRow]:
    """The search rows of one event."""
    item = decode_item(payload)
    kind = item.kind
    return [
        (position, n, task_id, seq, kind, where, text)
        for n, (where, text) in enumerate(searchable.item_fields(item, payload))
        if n < FIELDS_PER_EVENT
    ]


class SearchIndex:
    """The search projection of one store."""

    def __init__(self, store: SearchStore, *, commit_every: int = 20_000) -> None:
        self.store = store
        self.commit_every = max(1, commit_every)

    def cursor(self) -> int:
        return self.store.projection_cursor(SEARCH_CURSOR)

    def catch_up(self, *, progress: Progress | None = None) -> int | None:
        """Index the events after the cursor; return how many were read (None: the store cannot
        be written, e.g. a read-only file: search by a scan instead)."""
        return catch_up_retrying("search", lambda: self._catch_up(progress))

    def _catch_up(self, progress: Progress | None) -> int:
        st = self.store
        digest = _code_digest()
        if st.get_meta(_VERSION_KEY) != digest:
            st.search_reset()
            st.set_meta(_VERSION_KEY, digest)
        start = committed = st.projection_cursor(SEARCH_CURSOR)
        end = st.last_position()
        if end <= start:
            return 0
        total = end - start
        rows: list[SearchRow] = []
        read = since = 0
        position = start
        for ev in st.read_from(start):
            if ev.position > end:
                break
            rows.extend(event_rows(ev.position, ev.task_id, ev.seq, bytes(ev.payload)))
            position = ev.position
            read += 1
            since += 1
            if since >= self.commit_every:
                self._commit(position, rows, committed)
                committed = position
                rows, since = [], 0
                if progress is not None:
                    progress(min(total, position - start), total)
        if since:
            self._commit(position, rows, committed)
        if progress is not None:
            progress(total, total)
        return read

    def _commit(self, position: int, rows: list[SearchRow], expect: int) -> None:
        if not self.store.search_commit(position, rows, expect=expect):
            raise ProjectionMoved("search")

    def rebuild(self, *, progress: Progress | None = None) -> int | None:
        self.store.search_reset()
        return self.catch_up(progress=progress)

    def candidates(self, text: str, *, task_id: str | None = None) -> Iterator[SearchRow]:
        """Rows that may contain ``text`` (a superset: case and word boundaries are the index's)."""
        yield from self.store.search_match(text, task_id=task_id)

    def can_answer(self, text: str) -> bool:
        return self.store.search_can_answer(text)

    def rows(self) -> list[SearchRow]:
        """Every row, in log order (what incremental == rebuild compares)."""
        return list(self.store.search_match(None))
