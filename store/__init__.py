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

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from a2a_tape.store.writer import GroupCommitWriter

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
    """``GroupCommitWriter`` is loaded on first use: it needs anyio, which a read-only command never does."""
    if name == "GroupCommitWriter":
        from a2a_tape.store.writer import GroupCommitWriter

        globals()[name] = GroupCommitWriter
        return GroupCommitWriter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
