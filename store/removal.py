"""Removing tasks from a log (``a2a-tape rm``, ``a2a-tape prune``), as vcrpy users delete a
cassette: the task's events, its exchanges, its idempotency keys and its projection rows, in one
transaction with a LOCAL note of the removal (:meth:`IndexSql.remove_tasks` says why the note).

What stays equals a rebuild of what stays: every projection row belongs to one task or one
event. The removed positions stay unused (positions have gaps after a removal, never repeats).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import msgspec

from a2a_tape.store.decode import local_note
from a2a_tape.store.interface import Store
from a2a_tape.store.records import NewEvent


class Removed(msgspec.Struct):
    """What a removal took out of the log (``rm --json``, ``prune --json``)."""

    task_ids: list[str]
    events: int
    exchanges: int
    dry_run: bool = False


def remove_tasks(st: Store, task_ids: Sequence[str], *, by: str) -> Removed:
    """Remove ``task_ids`` and note it (``by``: who asked, ``a2a-tape rm``), all or nothing."""
    ids = list(dict.fromkeys(task_ids))
    if not ids:
        return Removed([], 0, 0)
    with st.transaction():
        # the note first, past every position given so far: appended after the removal, it would
        # take a removed position again when the newest events were among those removed
        detail = f"{by}: removed {len(ids):,} task{'' if len(ids) == 1 else 's'}"
        st.append(NewEvent(payload=local_note("removed", detail), received_at=time.time(), origin="local"))
        events, exchanges = st.remove_tasks(ids)
    return Removed(ids, events, exchanges)
