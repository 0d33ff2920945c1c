"""Search recorded payloads: the text of every part, data parts, stream metadata, errors and notes.

A match is reported with where it was found (``artifact art-1``, ``status message``, ...) so a
person can go straight to ``a2a-tape show TASK`` at that position. Payloads are decoded with
:func:`store.decode_item`; an undecodable payload is searched as raw text (it is still evidence).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import msgspec

from a2a_tape.inspection.searchable import item_fields
from a2a_tape.store import SearchStore, decode_item


class Match(msgspec.Struct, frozen=True):
    task_id: str | None
    position: int
    seq: int
    kind: str
    where: str
    text: str  # the matching field, shortened around the match


def _snippet(text: str, m: re.Match[str], width: int = 40) -> str:
    start = max(0, m.start() - width)
    end = min(len(text), m.end() + width)
    return ("…" if start else "") + text[start:end].replace("\n", " ") + ("…" if end < len(text) else "")


_REGEX_CHARS = frozenset(".^$*+?{}[]\\|()")


def is_literal(pattern: str) -> bool:
    """Whether ``pattern`` means the same as a regular expression and as plain text."""
    return not (_REGEX_CHARS & set(pattern))


def grep(
    store: SearchStore,
    pattern: str,
    *,
    ignore_case: bool = False,
    task_id: str | None = None,
    regex: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[Match]:
    """Every field matching ``pattern``, in log order (see :func:`iter_grep`)."""
    return list(iter_grep(store, pattern, ignore_case=ignore_case, task_id=task_id, regex=regex, progress=progress))


def iter_grep(
    store: SearchStore,
    pattern: str,
    *,
    ignore_case: bool = False,
    task_id: str | None = None,
    regex: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[Match]:
    """Every field matching the regular expression ``pattern``, in log order.

    Plain text of 3 characters or more (no regular-expression syntax, and not ``regex``) is
    looked up in the search index (:mod:`inspection.search_index`, brought up to date first; its
    rows are narrowed with the same expression, so the matches are the scan's); anything else,
    or a store without the index, is a scan of the log. Raises ``re.error`` for a bad pattern
    (the CLI turns it into one line, exit 2). ``progress(done, total)``: events indexed so far.
    """
    rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    if not regex and is_literal(pattern):
        from a2a_tape.inspection.search_index import SearchIndex

        index = SearchIndex(store)
        if index.can_answer(pattern) and index.catch_up(progress=progress) is not None:
            for position, _field, tid, seq, kind, where, body in index.candidates(pattern, task_id=task_id):
                m = rx.search(body)
                if m is not None:
                    yield Match(tid, position, seq, kind, where, _snippet(body, m))
            return
    events = store.read_task(task_id) if task_id is not None else store.read_from(0)
    for ev in events:
        payload = bytes(ev.payload)
        item = decode_item(payload)
        for where, text in item_fields(item, payload):
            m = rx.search(text)
            if m is not None:
                yield Match(ev.task_id, ev.position, ev.seq, item.kind, where, _snippet(text, m))
