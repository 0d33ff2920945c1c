"""Logs made before the index projections (SQLite schema v3, PostgreSQL schema v1) open, migrate,
and list, search and doctor every task: task rows folded before the task index existed are
folded again (their index rows are missing), never trusted as they are."""

from __future__ import annotations

import sqlite3

from a2a_tape.fold.projection import Projector
from a2a_tape.fold.task_state import STATE_VERSION
from a2a_tape.inspection.listing import count, newest
from a2a_tape.store import NewEvent, open_store
from a2a_tape.store.schema import SCHEMA_VERSION

from .builders import art03, status03


def _events() -> list[NewEvent]:
    out = []
    for t in ("t1", "t2", "t3"):
        out.append(NewEvent(payload=status03(t, "working"), task_id=t))
        out.append(NewEvent(payload=art03(t, "art-1", f"zebra {t}", last=True), task_id=t))
        out.append(NewEvent(payload=status03(t, "completed"), task_id=t))
    return out


def test_a_v3_sqlite_log_with_a_folded_projection_lists_every_task(tmp_path):
    from a2a_tape.store.schema import MIGRATIONS

    path = tmp_path / "v3.db"
    with open_store(tmp_path / "src.db") as src:  # folded by the current code, then made to look like v3
        src.append_batch(_events())
        Projector(src).catch_up()
        rows = list(src.projection_rows("tasks"))
        events = src._conn.execute("SELECT task_id, seq, payload, received_at, origin FROM events").fetchall()
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:3]:
        migration(conn)
    conn.execute("PRAGMA user_version = 3")
    conn.executemany("INSERT INTO events (task_id, seq, payload, received_at, origin) VALUES (?, ?, ?, ?, ?)", events)
    conn.executemany("INSERT INTO projection_rows VALUES ('tasks', ?, ?)", rows)
    conn.execute("INSERT INTO projection_cursors VALUES ('tasks', ?)", (len(events),))
    conn.execute("INSERT INTO meta VALUES ('projection:tasks:version', ?)", (STATE_VERSION,))
    conn.close()
    with open_store(path) as st:
        assert st._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        Projector(st).catch_up()
        assert count(st) == 3
        assert [v.task_id for v in newest(st)] == ["t3", "t2", "t1"]


def test_a_v1_postgres_log_migrates_to_the_index_projections(pg_url):
    import psycopg

    from a2a_tape.inspection.doctor_index import DoctorIndex
    from a2a_tape.inspection.grep import grep
    from a2a_tape.store import postgres

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE a2a_tape_schema (version INTEGER NOT NULL)")
        for stmt in postgres._SCHEMA:
            conn.execute(stmt)
        conn.execute("INSERT INTO a2a_tape_schema (version) VALUES (1)")
    with open_store(pg_url) as st:
        st.append_batch(_events())
        Projector(st).catch_up()
        assert [v.task_id for v in newest(st, limit=2)] == ["t3", "t2"] and count(st) == 3
        assert [m.task_id for m in grep(st, "zebra")] == ["t1", "t2", "t3"]
        doctor = DoctorIndex(st)
        assert doctor.catch_up() == 3 and doctor.report().tasks == 3
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM a2a_tape_schema").fetchone()[0] == postgres.SCHEMA_VERSION
