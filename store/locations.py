"""Where a log lives: a SQLite file path, or a ``postgresql://`` URL for the shared engine."""

from __future__ import annotations

import os

from .errors import StoreError
from .sqlite import Durability, SqliteStore

DEFAULT_DB = "a2a-tape.db"


def default_db() -> str:
    """``$A2A_TAPE_DB``, else ``./a2a-tape.db``."""
    return os.environ.get("A2A_TAPE_DB") or DEFAULT_DB


def open_store(location: str | os.PathLike[str], *, create: bool = True, durability: Durability = "full"):
    """Open the event log at ``location``: a file path (SQLite) or a ``postgresql://`` URL."""
    loc = os.fspath(location)
    if loc.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(loc, durability=durability)
    if "://" in loc and not loc.startswith("file:"):
        scheme = loc.split("://", 1)[0]
        raise StoreError(f"no store backend for '{scheme}://' (use a file path or postgresql://...)")
    if loc.startswith("file:"):
        loc = loc[7:] if loc.startswith("file://") else loc[5:]
    return SqliteStore(loc, create=create, durability=durability)


def safe_location(location: str) -> str:
    """The location without a password, fit for messages and tape headers."""
    if "://" in location and "@" in location:
        scheme, rest = location.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}@{host}"
    return location
