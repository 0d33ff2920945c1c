"""Proof for mypy that both backends satisfy every store protocol (nothing runs here).

``.ci/typecheck`` checks this module strictly: a backend that loses a method, or changes a
signature away from :mod:`a2a_tape.store.interface`, fails the type check, not a user.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from a2a_tape.store.interface import (
        AppendLog,
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
    from a2a_tape.store.postgres import PostgresStore
    from a2a_tape.store.sqlite import SqliteStore

    def _satisfies(st: SqliteStore | PostgresStore) -> None:
        handle: StoreHandle = st
        events: EventLog = st
        appends: AppendLog = st
        exchanges: ExchangeLog = st
        recordings: Recordings = st
        recording_store: RecordingStore = st
        idempotency: IdempotencyStore = st
        meta: MetaStore = st
        leases: LeasesAndMeta = st
        following: Following = st
        projection_store: ProjectionStore = st
        task_index: TaskIndexStore = st
        projections: Projections = st
        search: SearchStore = st
        findings: FindingsStore = st
        whole: Store = st
        del handle, events, appends, exchanges, recordings, recording_store, idempotency, meta, leases
        del following, projection_store, task_index, projections, search, findings
        entered: Store = whole.__enter__()
        del entered

    def _each(sqlite: SqliteStore, postgres: PostgresStore) -> None:
        _satisfies(sqlite)
        _satisfies(postgres)
        s: Store = sqlite
        p: Store = postgres
        del s, p
