"""Errors of a2a-tape. Each message is one readable line, fit for a CLI's stderr.

:class:`A2ATapeError` is the one root every error of ours derives from (``except a2a_tape.A2ATapeError``
catches them all); :class:`StoreError` and its subclasses are what the event log raises, driver errors
(sqlite3's, psycopg's) included: the backends map them here, so nothing above ``store`` sees a driver.
"""

from __future__ import annotations


class A2ATapeError(Exception):
    """The root of every error a2a-tape raises on purpose."""


class StoreError(A2ATapeError):
    """Something is wrong with the event log or how it was asked."""


class StoreNotFound(StoreError):
    """The database file does not exist (and we were not asked to create it)."""


class NotADatabase(StoreError):
    """The file exists but is not an SQLite database (or is corrupt)."""


class SchemaTooNew(StoreError):
    """The database was written by a newer a2a-tape."""


class AppendConflict(StoreError):
    """The same event key was appended before with different bytes."""


class UnknownTask(StoreError):
    """No event of that task is in the log."""


class StoreUnavailable(StoreError):
    """The log cannot be written or read right now: the machine said why (see the subclasses)."""


class DatabaseLocked(StoreUnavailable):
    """Another process held the write lock past the busy timeout."""


class WouldWait(DatabaseLocked):
    """A write begun without waiting (``Store.without_waiting``) found another writer holding
    the log's lock; nothing was written. The caller retries where waiting harms nothing."""


class DiskFull(StoreUnavailable):
    """The file system holding the log has no room left."""


class ReadOnlyStore(StoreUnavailable):
    """The log is on read-only media, or was opened read-only, and a write was asked."""


class ConnectionLost(StoreUnavailable):
    """The database server went away (PostgreSQL)."""
