"""Proof for mypy that both backends satisfy every store protocol (nothing runs here).

``.ci/typecheck`` checks this module strictly: a backend that loses a method, or changes a
signature away from :mod:`a2a_tape.store.interface`, fails the type check, not a user.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .interface import (
        AppendLog,
        EventLog,
        ExchangeLog,
        FindingsProjection,
        FindingsStore,
        Following,
        IdempotencyStore,
        LeasesAndMeta,
        Projections,
        ProjectionStore,
        Recordings,
        RecordingStore,
        SearchProjection,
        SearchStore,
        Store,
        StoreHandle,
        TaskIndexStore,
    )
    from .postgres import PostgresStore
    from .sqlite import SqliteStore

    def _satisfies(st: SqliteStore | PostgresStore) -> None:
        handle: StoreHandle = st
        events: EventLog = st
        appends: AppendLog = st
        exchanges: ExchangeLog = st
        idempotency: IdempotencyStore = st
        projection_store: ProjectionStore = st
        leases: LeasesAndMeta = st
        following: Following = st
        projections: Projections = st
        recordings: Recordings = st
        recording_store: RecordingStore = st
        task_index: TaskIndexStore = st
        search: SearchStore = st
        findings: FindingsStore = st
        search_projection: SearchProjection = st
        findings_projection: FindingsProjection = st
        whole: Store = st
        del handle, events, appends, exchanges, idempotency, projection_store, leases, following, projections
        del recordings, recording_store, task_index, search, findings, search_projection, findings_projection
        entered: Store = whole.__enter__()
        del entered

    def _each(sqlite: SqliteStore, postgres: PostgresStore) -> None:
        _satisfies(sqlite)
        _satisfies(postgres)
        s: Store = sqlite
        p: Store = postgres
        del s, p
