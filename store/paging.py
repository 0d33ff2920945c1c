"""Reading in parts, for both backends: task-id ranges (for the parallel rebuild), the keyset pager
by log position, and the narrow fold reader's filter."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

Row = TypeVar("Row", bound=Sequence[Any])

TaskRange = tuple["str | None", "str | None"]
"""A range of task ids ``[low, high)`` (``None``: unbounded on that side), compared as Python
compares strings (code points; the backends' readers compare the same way in SQL)."""


def in_range(task_id: str, tasks: TaskRange) -> bool:
    low, high = tasks
    return (low is None or task_id >= low) and (high is None or task_id < high)


def pages(
    fetch: Callable[[int, int], list[Row]], after: int, batch: int, limit: int | None = None
) -> Iterator[list[Row]]:
    """Keyset paging by log position: ``fetch(after, n)`` returns up to ``n`` rows after
    position ``after`` in log order, each row's first column its position. Yields the
    non-empty pages, ``limit`` rows at most in all."""
    left = limit
    while left is None or left > 0:
        n = batch if left is None else min(batch, left)
        rows = fetch(after, n)
        if rows:
            yield rows
        if len(rows) < n:
            return
        after = rows[-1][0]
        if left is not None:
            left -= len(rows)


def fold_rows_filter(
    upto: int | None, tasks: TaskRange | None, mark: str, collate: str = ""
) -> tuple[str, list[object]]:
    """The conditions a narrow reader adds after ``position > {mark}``, and their parameters:
    ``upto``, and a task range (rows with no task id in every range). Plain comparisons: a
    function of ``task_id`` per row would cost a parallel rebuild a third of its reading.
    ``collate``: what makes the backend compare as Python does (code points: SQLite's BINARY
    order of UTF-8 already does; PostgreSQL needs ``COLLATE "C"``, its own may sort by locale)."""
    sql, params = "", list[object]()
    if upto is not None:
        sql += f" AND position <= {mark}"
        params.append(upto)
    if tasks is not None and tasks != (None, None):
        low, high = tasks
        tests = [f"task_id {op} {mark}{collate}" for op, b in ((">=", low), ("<", high)) if b is not None]
        sql += f" AND (task_id IS NULL OR ({' AND '.join(tests)}))"
        params += [b for b in tasks if b is not None]
    return sql, params


def split_ranges(sample: list[str], parts: int, lead: float = 0.0) -> list[TaskRange]:
    """``parts`` contiguous task ranges covering every id, cut at the quantiles of ``sample``
    (task ids of events picked evenly over the log, so each range holds about as many events).
    ``lead``: the first range holds that much more of the events (a share, 0.03 = 3 points)
    than the others. Fewer ranges when the sample has fewer distinct ids than that (one task is
    never split)."""
    ids = sorted(sample)
    first = min(1.0, 1 / parts + lead)
    cuts: list[str] = []
    for k in range(1, parts):
        share = first + (1 - first) * (k - 1) / (parts - 1)  # the first range, then equal ones
        cut = ids[min(len(ids) - 1, int(len(ids) * share))] if ids else None
        if cut is not None and cut > ids[0] and (not cuts or cut > cuts[-1]):
            cuts.append(cut)
    bounds: list[str | None] = [None, *cuts, None]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def sample_positions(first: int, last: int, size: int = 4096) -> list[int]:
    """Up to ``size`` positions spread evenly over ``[first, last]``."""
    if last < first:
        return []
    n = min(size, last - first + 1)
    return sorted({first + (last - first) * i // max(1, n - 1) for i in range(n)})
