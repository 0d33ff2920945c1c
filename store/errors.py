"""Errors the store raises. Each message is one readable line, fit for a CLI's stderr."""

from __future__ import annotations


class StoreError(Exception):
    """Base class: something is wrong with the event log or how it was asked."""


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
