"""The SQLite schema of the event log and its migrations (``PRAGMA user_version``)."""

from __future__ import annotations

import sqlite3

from a2a_tape.store.errors import SchemaTooNew

_TABLE = 'CREATE TABLE "{name}" (\n{columns}\n)'
"""A table as the first migrations wrote it: quoted names, one column a line (see :func:`_v1`)."""


def _columns(*columns: str) -> str:
    quoted = []
    for column in columns:
        name, kind = column.split(" ", 1)
        quoted.append(f'   "{name}" {kind}')
    return ",\n".join(quoted)


_EXCHANGE_COLUMNS = _columns(
    "id INTEGER PRIMARY KEY",
    "started_at REAL",
    "ended_at REAL",
    "url TEXT",
    "http_method TEXT",
    "rpc_method TEXT",
    "dialect TEXT",
    "streaming INTEGER",
    "request_headers TEXT",  # JSON object, redacted
    "request_body BLOB",  # redacted
    "status INTEGER",
    "content_type TEXT",
    "response_headers TEXT",
    "response_body BLOB",
    "outcome TEXT",
    "error TEXT",
    "task_id TEXT",
    "context_id TEXT",
    "message_id TEXT",
    "idempotency_key TEXT",
    "role TEXT",
)


def _v1(db: sqlite3.Connection) -> None:
    # exchanges: one HTTP request and its answer. (The texts of the CREATE statements of exchanges,
    # idempotency, projection_cursors, meta and leases are those sqlite-utils wrote for the tables when
    # it made them, kept to the byte: a log made now reads as one made then.)
    db.execute(_TABLE.format(name="exchanges", columns=_EXCHANGE_COLUMNS))
    db.execute('CREATE INDEX "idx_exchanges_task_id"\n    ON "exchanges" ("task_id")')
    # events: position is the rowid (gap-free: SQLite has one writer); seq is ours, per task,
    # or per exchange while the task is not known.
    db.execute(
        """
        CREATE TABLE events (
            position INTEGER PRIMARY KEY,
            task_id TEXT,
            seq INTEGER NOT NULL,
            exchange_id INTEGER REFERENCES exchanges(id),
            sse_event TEXT,
            payload BLOB NOT NULL,
            received_at REAL NOT NULL,
            mono REAL,
            origin TEXT NOT NULL CHECK (origin IN ('upstream', 'local'))
        )
        """
    )
    db.execute("CREATE UNIQUE INDEX events_task_seq ON events(task_id, seq) WHERE task_id IS NOT NULL")
    db.execute("CREATE UNIQUE INDEX events_exchange_seq ON events(exchange_id, seq) WHERE task_id IS NULL")
    db.execute("CREATE INDEX events_exchange ON events(exchange_id)")
    db.execute(
        _TABLE.format(
            name="idempotency",
            columns=_columns(
                "key TEXT PRIMARY KEY",
                "request_hash TEXT",
                "exchange_id INTEGER",
                "task_id TEXT",
                "state TEXT",
                "created_at REAL",
                "expires_at REAL",
            ),
        )
    )
    db.execute(_TABLE.format(name="projection_cursors", columns=_columns("name TEXT PRIMARY KEY", "position INTEGER")))
    db.execute(
        """
        CREATE TABLE projection_rows (
            projection TEXT NOT NULL,
            key TEXT NOT NULL,
            value BLOB NOT NULL,
            PRIMARY KEY (projection, key)
        ) WITHOUT ROWID
        """
    )
    db.execute(_TABLE.format(name="meta", columns=_columns("key TEXT PRIMARY KEY", "value TEXT")))


def _v2(db: sqlite3.Connection) -> None:
    # row leases with expiry: one recoverer per orphaned task, even with several proxies
    db.execute(_TABLE.format(name="leases", columns=_columns("name TEXT PRIMARY KEY", "owner TEXT", "expires_at REAL")))


def _v3(db: sqlite3.Connection) -> None:
    # projection rows are whole task states (kilobytes each): in a WITHOUT ROWID table every
    # upsert moved them through the primary-key B-tree and its overflow pages, which cost a
    # rebuild more than its fold. A rowid table with a unique key index keeps the rows as they
    # are (the cursor stays valid: same rows, same values).
    db.execute(
        """
        CREATE TABLE projection_rows_v3 (
            projection TEXT NOT NULL,
            key TEXT NOT NULL,
            value BLOB NOT NULL,
            UNIQUE (projection, key)
        )
        """
    )
    db.execute(
        "INSERT INTO projection_rows_v3 (projection, key, value) SELECT projection, key, value FROM projection_rows"
    )
    db.execute("DROP TABLE projection_rows")
    db.execute("ALTER TABLE projection_rows_v3 RENAME TO projection_rows")


def _v4(db: sqlite3.Connection) -> None:
    # projections that answer with an index instead of a fold of the log (issue 14): the task
    # list by last event, a full-text index of the searchable fields, doctor's findings per task.
    # (Task rows folded before have no index rows: the projector folds them again, see
    # fold.projection, so this migration keeps every row as it is.)
    db.execute(
        """
        CREATE TABLE task_index (
            projection TEXT NOT NULL,
            key TEXT NOT NULL,
            last_position INTEGER NOT NULL,
            last_at REAL NOT NULL,
            state TEXT NOT NULL,
            context_id TEXT,
            UNIQUE (projection, key)
        )
        """
    )
    db.execute("CREATE INDEX task_index_newest ON task_index(projection, last_position)")
    # one row per searchable field of an event; trigram tokens answer substrings (3+ characters)
    db.execute(
        "CREATE VIRTUAL TABLE search_index USING fts5("
        "body, position UNINDEXED, field UNINDEXED, task_id UNINDEXED, seq UNINDEXED, kind UNINDEXED, "
        "place UNINDEXED, tokenize = 'trigram')"
    )
    db.execute(
        """
        CREATE TABLE doctor_findings (
            task_id TEXT PRIMARY KEY,
            first_position INTEGER NOT NULL,
            settled INTEGER NOT NULL,
            errors INTEGER NOT NULL,
            warnings INTEGER NOT NULL,
            findings BLOB NOT NULL
        )
        """
    )
    db.execute("CREATE INDEX doctor_findings_order ON doctor_findings(first_position)")
    db.execute("CREATE INDEX doctor_findings_unsettled ON doctor_findings(settled) WHERE settled = 0")


def _v5(db: sqlite3.Connection) -> None:
    # the binding of each exchange (issue 22): jsonrpc, http+json, grpc. Rows written before it
    # are filled from their dialect ("rest" was HTTP+JSON, a version JSON-RPC); the dialect is
    # left as written, and store.methods.binding_and_version reads both alike.
    db.execute("ALTER TABLE exchanges ADD COLUMN binding TEXT")
    db.execute("UPDATE exchanges SET binding = 'http+json' WHERE dialect = 'rest'")
    db.execute("UPDATE exchanges SET binding = 'jsonrpc' WHERE dialect IN ('0.3', '1.0')")


def _v6(db: sqlite3.Connection) -> None:
    # runs (issue 30): who recorded each exchange. Rows written before it say only their role:
    # each task's exchanges recorded by a proxy are one run, those of a client (record, a
    # transport) another, those of an import or a probe one each; recovery's join the task's
    # latest run (observer NULL), as they do when recorded now.
    for stmt in V6:
        db.execute(stmt)


V6 = [
    "ALTER TABLE exchanges ADD COLUMN observer TEXT",
    "ALTER TABLE exchanges ADD COLUMN source TEXT",
    "ALTER TABLE exchanges ADD COLUMN host TEXT",
    "UPDATE exchanges SET observer = 'v5-proxy', source = 'proxy' WHERE role = 'proxy' AND observer IS NULL",
    "UPDATE exchanges SET observer = 'v5-' || role, source = role"
    " WHERE role IN ('import', 'probe', 'replay') AND observer IS NULL",
    "UPDATE exchanges SET observer = 'v5-client', source = 'client'"
    " WHERE COALESCE(role, 'client') NOT IN ('proxy', 'import', 'probe', 'replay', 'recovery') AND observer IS NULL",
]
"""The v6 upgrade, in SQL both backends run (PostgreSQL: :mod:`store.postgres`)."""


MIGRATIONS = [_v1, _v2, _v3, _v4, _v5, _v6]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; returns the version found before."""
    found: int = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"the database has schema version {found}, this a2a-tape knows up to {SCHEMA_VERSION}: upgrade a2a-tape"
        )
    if found == SCHEMA_VERSION:
        return found
    conn.execute("BEGIN IMMEDIATE")
    try:
        again = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have migrated
        for version in range(again, SCHEMA_VERSION):
            MIGRATIONS[version](conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found
