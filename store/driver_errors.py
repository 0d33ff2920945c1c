"""The machine's faults as readable errors: driver exceptions become :class:`StoreUnavailable` subclasses.

Written once for both backends. :func:`guard_public` wraps every public method of a store class
(and the iterators and transactions those methods return) so that a ``sqlite3`` or ``psycopg`` error
leaves the store as one of

- :class:`DatabaseLocked`: another process held the write lock past the busy timeout;
- :class:`DiskFull`: the file system (or the server's) has no room left;
- :class:`ReadOnlyStore`: the log was opened read-only, or its file or directory is on read-only media;
- :class:`ConnectionLost`: the PostgreSQL server went away or cannot be reached;
- :class:`NotADatabase`: the file is not an SQLite database (or is damaged);

each with one line naming the cause and the database (never a URL password). A driver error we do
not recognise (a programming error of ours) passes unchanged: it is a bug, not a fault.
"""

from __future__ import annotations

import errno
import functools
import inspect
import os
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from a2a_tape.store.errors import (
    ConnectionLost,
    DatabaseLocked,
    DiskFull,
    NotADatabase,
    ReadOnlyStore,
    StoreError,
    StoreUnavailable,
)
from a2a_tape.store.redact import safe_text

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=type)


def _psycopg() -> Any:
    """psycopg when something imported it (no psycopg error can exist before): importing it here
    would slow every SQLite-only start."""
    return sys.modules.get("psycopg")


def is_driver_error(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.Error):
        return True
    pg = _psycopg()
    return pg is not None and isinstance(exc, pg.Error)


# SQLite's primary result codes (the low byte of an extended code)
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_NOTADB = 26


class Guarded(Protocol):
    """What the mapping reads of a store: where it is and how long it waits for a lock."""

    @property
    def location(self) -> str: ...

    @property
    def busy_timeout(self) -> float | None: ...


def on_readonly_media(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (or the directory that would hold its ``-wal`` and ``-shm`` files) is on a
    file system mounted read-only. ``os.access`` answers EROFS even for root, unlike a mode bit."""
    p = Path(path)
    where = p if p.exists() else p.parent
    try:
        if os.statvfs(where).f_flag & os.ST_RDONLY:
            return True
    except OSError:
        return False
    return not os.access(where if where.is_dir() else where.parent, os.W_OK)


def _no_room(path: str) -> bool:
    """Whether the file system holding ``path`` has no block left (an I/O error there is a full disk)."""
    p = Path(path)
    try:
        st = os.statvfs(p.parent if not p.is_dir() else p)
    except OSError:
        return False
    return st.f_bavail == 0


def _first_line(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """A driver's message, first line, with the redaction of every line we print: libpq quotes a
    connection URL's password (``invalid percent-encoded token: "..."``) or the whole URI in its own
    error texts; ``secrets`` are the store's (its URL's password and secret parameters)."""
    return safe_text((str(exc).strip().splitlines() or [type(exc).__name__])[0], secrets=secrets)


def driver_line(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """:func:`_first_line` for a backend's own messages (a failed connection)."""
    return _first_line(exc, secrets)


def _sqlite_fault(exc: sqlite3.Error, where: str, busy_timeout: float | None) -> StoreError | None:
    msg = _first_line(exc)
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    low = msg.lower()
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED) or "database is locked" in low or "table is locked" in low:
        waited = f" after waiting {busy_timeout:g} s" if busy_timeout is not None else ""
        return DatabaseLocked(
            f"{where} is locked by another process{waited} (a write transaction is open there; "
            "try again, or give a longer --busy-timeout)"
        )
    if primary == _SQLITE_FULL or "database or disk is full" in low:
        return DiskFull(f"{where}: the disk is full (no room left for the log; nothing of this write was stored)")
    if primary == _SQLITE_READONLY or "readonly database" in low or "read-only" in low:
        return ReadOnlyStore(f"{where} is read-only here (opened read-only or on read-only media): cannot write")
    if primary == _SQLITE_CANTOPEN or "unable to open database file" in low:
        if on_readonly_media(where):
            return ReadOnlyStore(f"{where} is on read-only media: cannot write it, nor its -wal and -shm files")
        return StoreUnavailable(f"cannot open {where}: {msg}")
    if primary in (_SQLITE_NOTADB, _SQLITE_CORRUPT) or "not a database" in low or "malformed" in low:
        return NotADatabase(f"{where} is not an a2a-tape database, or it is damaged ({msg})")
    if primary == _SQLITE_IOERR or "disk i/o error" in low:
        if _no_room(where):
            return DiskFull(f"{where}: the disk is full (no room left for the log; nothing of this write was stored)")
        return StoreUnavailable(f"{where}: the disk failed to read or write ({msg})")
    return None


def _postgres_fault(exc: BaseException, where: str) -> StoreError | None:
    psycopg = _psycopg()
    state = getattr(exc, "sqlstate", None) or ""
    msg = _first_line(exc)
    if state == "53100":  # disk_full
        return DiskFull(f"{where}: the database server's disk is full ({msg})")
    if state == "25006":  # read_only_sql_transaction (a hot standby, or default_transaction_read_only)
        return ReadOnlyStore(f"{where} is read-only (a standby, or read-only transactions): cannot write ({msg})")
    if state in ("55P03", "40P01"):  # lock_not_available (lock_timeout), deadlock_detected
        return DatabaseLocked(f"{where} is locked by another session past the lock timeout ({msg})")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return ConnectionLost(f"lost the connection to {where}: {msg}")
    return None


def translate(exc: BaseException, where: str, busy_timeout: float | None = None) -> StoreError | None:
    """The :class:`StoreError` a driver error means, or None when it is not a fault we know."""
    if isinstance(exc, sqlite3.Error):
        return _sqlite_fault(exc, where, busy_timeout)
    pg = _psycopg()
    if pg is not None and isinstance(exc, pg.Error):
        return _postgres_fault(exc, where)
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return DiskFull(f"{where}: the disk is full ({exc.strerror})")
    return None


class store_faults(AbstractContextManager[None]):
    """``with store_faults(store): ...``: a driver error raised inside leaves as its StoreError."""

    __slots__ = ("_store",)

    def __init__(self, store: Guarded) -> None:
        self._store = store

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None or not is_driver_error(exc):
            return None
        mapped = translate(exc, self._store.location, self._store.busy_timeout)
        if mapped is None:
            return None
        raise mapped from exc


def _guarded_iter(store: Guarded, it: Iterator[R]) -> Iterator[R]:
    with store_faults(store):
        yield from it


class _GuardedContext(AbstractContextManager[Any]):
    """A transaction whose enter and exit (where a COMMIT fails) map driver errors too."""

    __slots__ = ("_store", "_inner")

    def __init__(self, store: Guarded, inner: AbstractContextManager[Any]) -> None:
        self._store = store
        self._inner = inner

    def __enter__(self) -> Any:
        with store_faults(self._store):
            return self._inner.__enter__()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        with store_faults(self._store):
            return self._inner.__exit__(exc_type, exc, tb)


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Map the driver errors of one store method (its first argument is the store), including those
    raised later by the iterator or transaction it returns."""

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        store = cast(Guarded, args[0])  # a method: args[0] is the store
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            mapped = translate(exc, store.location, store.busy_timeout) if is_driver_error(exc) else None
            if mapped is None:
                raise
            raise mapped from exc
        if isinstance(result, Iterator) and not isinstance(result, AbstractContextManager):
            return _guarded_iter(store, result)  # type: ignore[return-value]  # the same iterator type
        if isinstance(result, AbstractContextManager) and result is not args[0]:
            return _GuardedContext(store, result)  # type: ignore[return-value]  # the same protocol
        return result

    return call


_GUARDED_CODE = guarded(len).__code__  # every wrapper guarded() makes runs this code


def guard_public(cls: C) -> C:
    """Apply :func:`guarded` to every public method of ``cls``, those it inherits too (the store's
    whole API: the SQL both backends share is written in base classes)."""
    for name in dir(cls):
        value = inspect.getattr_static(cls, name)
        if not name.startswith("_") and inspect.isfunction(value) and not is_guarded(value):
            setattr(cls, name, guarded(value))
    return cls


def is_guarded(fn: object) -> bool:
    """Whether ``fn`` is a method :func:`guarded` wrapped."""
    return getattr(fn, "__code__", None) is _GUARDED_CODE


def store_fault(exc: BaseException) -> StoreError | None:
    """The log cannot be written: the :class:`store.StoreError` naming why (None: not a fault
    of the log). Our own store errors pass as they are; driver errors are classified. Needs no
    httpx: the command line's error handler calls it whatever failed (an unsupported httpx too)."""
    if isinstance(exc, StoreError):
        return exc
    msg = str(exc).lower()
    if isinstance(exc, sqlite3.Error):
        if "full" in msg:
            return DiskFull(f"the log cannot be written: the disk is full ({exc})")
        if "locked" in msg or "busy" in msg:
            return DatabaseLocked(f"the log is locked by another process ({exc})")
        if "readonly" in msg or "read-only" in msg:
            return ReadOnlyStore(f"the log is on read-only storage ({exc})")
        return StoreError(f"the log cannot be written: {type(exc).__name__}: {exc}")
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"the log cannot be written: the disk is full ({exc.strerror})")
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return ReadOnlyStore(f"the log is on read-only storage ({exc.strerror})")
    return None
