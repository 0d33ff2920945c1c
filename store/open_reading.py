"""Opening a log to read it: what every inspection command opens, and the one place that says
what may be read.

:func:`open_for_reading` takes a database (SQLite file or ``postgresql://`` URL) or a tape, and
never creates or initialises anything: a missing file is :class:`StoreNotFound`; an empty file, a
file that is not SQLite, or a database that holds no a2a-tape log is :class:`NotADatabase` ("not
an a2a-tape database: PATH"), each left byte for byte as it was (:mod:`a2a_tape.store.sqlite`
and :mod:`a2a_tape.store.postgres` refuse them whenever they are asked not to create). A tape is
read into a temporary copy (:class:`a2a_tape.store.tape_copy.TapeCopy`); the tape is not touched.
"""

from __future__ import annotations

import os
from pathlib import Path

from a2a_tape.store.errors import ReadOnlyStore, StoreNotFound
from a2a_tape.store.interface import Durability, EventLog, Store
from a2a_tape.store.locations import open_store
from a2a_tape.store.tape_copy import TapeCopy, is_tape


def open_for_reading(
    location: str | os.PathLike[str],
    *,
    keep_cache: bool = False,
    durability: Durability = "full",
    busy_timeout: float | None = None,
) -> Store:
    """The log at ``location``, to read.

    ``keep_cache``: the reader keeps a cache in the log when it can (the persisted projections of
    ``tasks``, ``channels``, ``doctor``): a database is opened for writing (an existing log of an
    older schema is migrated), read-only when it cannot be written here. Otherwise it is opened
    read-only (read-only media too). A tape's copy is private: its cache goes there.
    """
    loc = os.fspath(location)
    if "://" not in loc:
        path = Path(loc[7:] if loc.startswith("file://") else loc[5:] if loc.startswith("file:") else loc)
        if not path.exists():
            raise StoreNotFound(f"no database at {loc}")
        if path.is_file() and is_tape(path):
            return TapeCopy(path)
    if keep_cache:
        try:
            return open_store(loc, create=False, durability=durability, busy_timeout=busy_timeout)
        except ReadOnlyStore:  # read-only media, or a read-only server: read it as it is
            pass
    return open_store(loc, readonly=True, durability=durability, busy_timeout=busy_timeout)


def tasks_named(log: EventLog, key: str) -> list[str]:
    """The tasks a person means by ``key``: the task of that id, else every task whose id begins
    with it (one: found; several: ambiguous; none: unknown). One rule for the CLI and the UI."""
    if key and log.has_task(key):
        return [key]
    return log.task_ids_with_prefix(key) if key else []
