"""Where a log lives: a SQLite file path, or a ``postgresql://`` URL for the shared engine."""

from __future__ import annotations

import os

from a2a_tape.store.errors import StoreError
from a2a_tape.store.interface import Durability, Store
from a2a_tape.store.sqlite import DEFAULT_BUSY_TIMEOUT, SqliteStore

DEFAULT_DB = "a2a-tape.db"


def default_db() -> str:
    """``$A2A_TAPE_DB``, else ``./a2a-tape.db``."""
    return os.environ.get("A2A_TAPE_DB") or DEFAULT_DB


def open_store(
    location: str | os.PathLike[str],
    *,
    create: bool = True,
    durability: Durability = "full",
    busy_timeout: float | None = None,
    readonly: bool = False,
) -> Store:
    """Open the event log at ``location``: a file path (SQLite) or a ``postgresql://`` URL.

    ``create=False``: the log must exist (a file or database that holds none is :class:`NotADatabase`,
    left as it was: nothing is initialised). ``busy_timeout``: seconds a write waits for another writer's lock before :class:`DatabaseLocked`
    (SQLite: 30 by default; PostgreSQL: its ``lock_timeout``, unbounded by default). ``readonly``:
    nothing is created, migrated or written (a write raises :class:`ReadOnlyStore`); SQLite opens
    ``mode=ro``, or ``immutable=1`` on read-only media.
    """
    loc = os.fspath(location)
    if loc.startswith(("postgresql://", "postgres://")):
        from a2a_tape.store.postgres import PostgresStore

        return PostgresStore(loc, create=create, durability=durability, busy_timeout=busy_timeout, readonly=readonly)
    if "://" in loc and not loc.startswith("file:"):
        scheme = loc.split("://", 1)[0]
        raise StoreError(f"no store backend for '{scheme}://' (use a file path or postgresql://...)")
    if loc.startswith("file:"):
        loc = loc[7:] if loc.startswith("file://") else loc[5:]
    return SqliteStore(
        loc,
        create=create and not readonly,
        durability=durability,
        busy_timeout=DEFAULT_BUSY_TIMEOUT if busy_timeout is None else busy_timeout,
        readonly=readonly,
    )
