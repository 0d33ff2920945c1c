"""store: the event log of a2a-tape.

The narrow API every backend offers (SQLite, PostgreSQL), typed as Protocols by capability in
:mod:`a2a_tape.store.interface` (``Store`` is all of them; ``open_store`` returns one):

- events: ``append_batch``/``append`` (idempotent by ``(task_id, seq)``), ``read_from(position)``,
  ``read_task``, ``read_exchange`` (``iter_exchange``: the same in batches), ``last_position``, ``task_events``;
- exchanges: ``begin_exchange``, ``update_exchange``, ``get_exchange``, ``exchanges``;
- idempotency: ``idem_get``, ``idem_claim``, ``idem_update``, ``idem_all``, ``idem_expire``;
- projections: ``projection_cursor``, ``projection_load``, ``projection_rows``,
  ``projection_commit`` (rows and cursor in one transaction), ``projection_reset``; the three
  index projections kept with their cursors: the task index (``task_index_*``), search
  (``search_*``), doctor's findings (``findings_*``);
- leases and meta, following (``wait_for_events``).

Driver errors never leave a backend: the machine's faults arrive as :class:`StoreUnavailable`
subclasses (:mod:`a2a_tape.store.driver_errors`).

Payloads are kept as the exact bytes received; :func:`decode_item` turns them into the typed
model of :mod:`store.events`, the only shape the layers above read.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from a2a_tape.store.decode import decode_item, local_failed, local_note, normalise_state
    from a2a_tape.store.errors import (
        A2ATapeError,
        AppendConflict,
        ConnectionLost,
        DatabaseLocked,
        DiskFull,
        NotADatabase,
        ReadOnlyStore,
        SchemaTooNew,
        StoreError,
        StoreNotFound,
        StoreUnavailable,
        UnknownTask,
        WouldWait,
    )
    from a2a_tape.store.events import (
        ACTIVE_STATES,
        INTERRUPTED_STATES,
        SETTLED_STATES,
        TERMINAL_STATES,
        Artifact,
        ArtifactUpdate,
        ErrorItem,
        Item,
        Message,
        MessageItem,
        Note,
        Other,
        Part,
        StatusUpdate,
        StreamMeta,
        TaskSnapshot,
        Undecodable,
    )
    from a2a_tape.store.interface import (
        AppendLog,
        Durability,
        EventLog,
        ExchangeLog,
        FindingsStore,
        Following,
        IdempotencyStore,
        LeasesAndMeta,
        MetaStore,
        Projections,
        ProjectionStore,
        Recordings,
        RecordingStore,
        SearchStore,
        Store,
        StoreHandle,
        TaskIndexStore,
    )
    from a2a_tape.store.locations import DEFAULT_DB, default_db, open_store
    from a2a_tape.store.open_reading import open_for_reading, tasks_named
    from a2a_tape.store.records import Exchange, IdempotencyRecord, NewEvent, StoredEvent, TaskEvents
    from a2a_tape.store.redact import safe_location
    from a2a_tape.store.sqlite import SqliteStore
    from a2a_tape.store.writer import GroupCommitWriter

# public name -> the module that defines it: loaded on first use (PEP 562), so importing one
# submodule (``store.errors``, ``store.redact``) does not load SQLite, msgspec and the decoder
_EXPORTS: dict[str, str] = {
    "decode_item": "a2a_tape.store.decode",
    "local_failed": "a2a_tape.store.decode",
    "local_note": "a2a_tape.store.decode",
    "normalise_state": "a2a_tape.store.decode",
    "A2ATapeError": "a2a_tape.store.errors",
    "AppendConflict": "a2a_tape.store.errors",
    "ConnectionLost": "a2a_tape.store.errors",
    "DatabaseLocked": "a2a_tape.store.errors",
    "DiskFull": "a2a_tape.store.errors",
    "NotADatabase": "a2a_tape.store.errors",
    "ReadOnlyStore": "a2a_tape.store.errors",
    "SchemaTooNew": "a2a_tape.store.errors",
    "StoreError": "a2a_tape.store.errors",
    "StoreNotFound": "a2a_tape.store.errors",
    "StoreUnavailable": "a2a_tape.store.errors",
    "UnknownTask": "a2a_tape.store.errors",
    "WouldWait": "a2a_tape.store.errors",
    "ACTIVE_STATES": "a2a_tape.store.events",
    "INTERRUPTED_STATES": "a2a_tape.store.events",
    "SETTLED_STATES": "a2a_tape.store.events",
    "TERMINAL_STATES": "a2a_tape.store.events",
    "Artifact": "a2a_tape.store.events",
    "ArtifactUpdate": "a2a_tape.store.events",
    "ErrorItem": "a2a_tape.store.events",
    "Item": "a2a_tape.store.events",
    "Message": "a2a_tape.store.events",
    "MessageItem": "a2a_tape.store.events",
    "Note": "a2a_tape.store.events",
    "Other": "a2a_tape.store.events",
    "Part": "a2a_tape.store.events",
    "StatusUpdate": "a2a_tape.store.events",
    "StreamMeta": "a2a_tape.store.events",
    "TaskSnapshot": "a2a_tape.store.events",
    "Undecodable": "a2a_tape.store.events",
    "AppendLog": "a2a_tape.store.interface",
    "Durability": "a2a_tape.store.interface",
    "EventLog": "a2a_tape.store.interface",
    "ExchangeLog": "a2a_tape.store.interface",
    "FindingsStore": "a2a_tape.store.interface",
    "Following": "a2a_tape.store.interface",
    "IdempotencyStore": "a2a_tape.store.interface",
    "LeasesAndMeta": "a2a_tape.store.interface",
    "MetaStore": "a2a_tape.store.interface",
    "Projections": "a2a_tape.store.interface",
    "ProjectionStore": "a2a_tape.store.interface",
    "Recordings": "a2a_tape.store.interface",
    "RecordingStore": "a2a_tape.store.interface",
    "SearchStore": "a2a_tape.store.interface",
    "Store": "a2a_tape.store.interface",
    "StoreHandle": "a2a_tape.store.interface",
    "TaskIndexStore": "a2a_tape.store.interface",
    "DEFAULT_DB": "a2a_tape.store.locations",
    "default_db": "a2a_tape.store.locations",
    "open_store": "a2a_tape.store.locations",
    "open_for_reading": "a2a_tape.store.open_reading",
    "tasks_named": "a2a_tape.store.open_reading",
    "Exchange": "a2a_tape.store.records",
    "IdempotencyRecord": "a2a_tape.store.records",
    "NewEvent": "a2a_tape.store.records",
    "StoredEvent": "a2a_tape.store.records",
    "TaskEvents": "a2a_tape.store.records",
    "safe_location": "a2a_tape.store.redact",
    "SqliteStore": "a2a_tape.store.sqlite",
    "GroupCommitWriter": "a2a_tape.store.writer",
}

__all__ = [
    "A2ATapeError",
    "ACTIVE_STATES",
    "ConnectionLost",
    "DatabaseLocked",
    "DiskFull",
    "ReadOnlyStore",
    "StoreUnavailable",
    "WouldWait",
    "AppendConflict",
    "Artifact",
    "ArtifactUpdate",
    "DEFAULT_DB",
    "AppendLog",
    "EventLog",
    "ExchangeLog",
    "FindingsStore",
    "Following",
    "IdempotencyStore",
    "LeasesAndMeta",
    "MetaStore",
    "Projections",
    "ProjectionStore",
    "RecordingStore",
    "Recordings",
    "SearchStore",
    "Store",
    "StoreHandle",
    "TaskIndexStore",
    "Durability",
    "ErrorItem",
    "Exchange",
    "GroupCommitWriter",
    "INTERRUPTED_STATES",
    "SETTLED_STATES",
    "IdempotencyRecord",
    "Item",
    "Message",
    "MessageItem",
    "NewEvent",
    "NotADatabase",
    "Note",
    "Other",
    "Part",
    "SchemaTooNew",
    "SqliteStore",
    "StatusUpdate",
    "StoreError",
    "StoreNotFound",
    "StoredEvent",
    "StreamMeta",
    "TERMINAL_STATES",
    "TaskEvents",
    "TaskSnapshot",
    "Undecodable",
    "UnknownTask",
    "decode_item",
    "default_db",
    "local_failed",
    "local_note",
    "normalise_state",
    "open_for_reading",
    "open_store",
    "safe_location",
    "tasks_named",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (``GroupCommitWriter`` needs anyio,
    which a read-only command never does; ``SqliteStore`` needs sqlite3, which ``--help`` does not)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
