"""The task list, newest first, a page at a time: an indexed query on the task projection.

``a2a-tape tasks`` costs what it shows: the task index (``store.task_index_*``, kept by
:class:`replay.projection.Projector` in the same transaction as the task rows) gives the keys
of the newest tasks by last event, already filtered; only those rows are loaded and viewed.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice

import msgspec

from a2a_tape.store import TaskIndexStore

from ..fold import TaskFold
from ..views import TaskView


def count(
    store: TaskIndexStore,
    name: str = "tasks",
    *,
    states: Iterable[str] | None = None,
    context: str | None = None,
    since: float | None = None,
) -> int:
    """How many tasks pass the filters."""
    return store.task_index_count(name, states=states, context=context, since=since)


def newest(
    store: TaskIndexStore,
    name: str = "tasks",
    *,
    limit: int | None = None,
    states: Iterable[str] | None = None,
    context: str | None = None,
    since: float | None = None,
    batch: int = 200,
    closed: Callable[[list[str]], Mapping[int, float]] | None = None,
) -> Iterator[TaskView]:
    """The views of the tasks passing the filters, newest last event first, ``limit`` at most,
    read ``batch`` at a time (memory stays flat however many are listed). ``closed(task_ids)``:
    the exchanges of those tasks that ended (see :meth:`replay.fold.TaskFold.view`)."""
    if limit is not None:
        batch = max(1, min(batch, limit))  # a short listing reads no more rows than it shows
    keyed = keyed_newest(store, name, states=states, context=context, since=since, batch=batch, closed=closed)
    return (view for view, _ in islice(keyed, limit))


def keyed_newest(
    store: TaskIndexStore,
    name: str = "tasks",
    *,
    before: int | None = None,
    states: Iterable[str] | None = None,
    context: str | None = None,
    since: float | None = None,
    batch: int = 200,
    closed: Callable[[list[str]], Mapping[int, float]] | None = None,
) -> Iterator[tuple[TaskView, int]]:
    """:func:`newest` with each view's key in the index: passed back as ``before``, it goes on
    after that task (paging by key: a page deep in a long list costs what the first one does)."""
    wanted = None if states is None else sorted(set(states))
    while True:
        keys = store.task_index_page(name, limit=batch, before=before, states=wanted, context=context, since=since)
        if not keys:
            return
        ids = [k for k, _ in keys]
        raw = store.projection_load(name, ids)
        ended = closed(ids) if closed is not None else None
        for key, position in keys:
            row = raw.get(key)
            if row is None:  # pragma: no cover - rows and index rows commit together
                continue
            try:
                view = TaskFold.load(row).view(ended)
            except (msgspec.DecodeError, msgspec.ValidationError):  # pragma: no cover - caught by catch_up
                continue
            yield view, position
        if len(keys) < batch:
            return
        before = keys[-1][1]


def parse_since(value: str | None) -> float | None:
    """Unix seconds (``1796004536.5``) or an ISO time (``2026-11-30T02:08``, ``...Z``; UTC when no zone).

    Raises ValueError for anything that is not a real moment (nan, inf, years out of range).
    """
    if value is None:
        return None
    text = value.strip()
    try:
        moment = float(text)
    except ValueError:
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = _dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"'{value}' is neither unix seconds nor an ISO time (2026-11-30T02:08:00Z)") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=_dt.UTC)
        return parsed.timestamp()
    try:
        _dt.datetime.fromtimestamp(moment, _dt.UTC)  # nan, inf and years past 9999 fail here
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"'{value}' is not a time (unix seconds from 0 to year 9999)") from None
    return moment
