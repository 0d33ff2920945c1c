"""What only the SQLite backend has: PRAGMAs, the schema version, file-level failures."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from a2a_tape import store
from a2a_tape.store import NewEvent, NotADatabase, SchemaTooNew, SqliteStore, StoreError, StoreNotFound
from a2a_tape.store.schema import SCHEMA_VERSION


def pragma(st: SqliteStore, name: str):
    return st._conn.execute(f"PRAGMA {name}").fetchone()[0]  # the store's own connection


@pytest.mark.parametrize("durability, level", [("full", 2), ("normal", 1)])
def test_durability_setting_is_applied(tmp_path, durability, level):
    with store.open_store(tmp_path / "d.db", durability=durability) as st:
        assert st.durability == durability
        assert pragma(st, "synchronous") == level
        assert pragma(st, "journal_mode") == "wal"


def test_wal_mode_persists_in_the_file(tmp_path):
    SqliteStore(tmp_path / "w.db").close()
    conn = sqlite3.connect(tmp_path / "w.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_fresh_file_gets_the_current_schema_version(tmp_path):
    with SqliteStore(tmp_path / "v.db") as st:
        assert pragma(st, "user_version") == SCHEMA_VERSION >= 1
        tables = {r[0] for r in st._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"events", "exchanges", "idempotency", "projection_cursors", "projection_rows", "meta"} <= tables


def test_empty_sqlite_file_is_migrated(tmp_path):
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()  # a valid SQLite file at user_version 0, no tables
    with SqliteStore(path) as st:
        assert pragma(st, "user_version") == SCHEMA_VERSION
        assert st.append(NewEvent(payload=b"x", task_id="t")).position == 1


def test_a_version_2_database_keeps_its_projection_through_the_migration(tmp_path):
    """v3 moves projection rows out of a WITHOUT ROWID table: same rows, same cursor, nothing
    folded again; the log is untouched."""
    from a2a_tape.store.schema import MIGRATIONS

    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for migration in MIGRATIONS[:2]:
        migration(conn)
    conn.execute("PRAGMA user_version = 2")
    assert "WITHOUT ROWID" in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'projection_rows'").fetchone()[0]
    conn.execute(
        "INSERT INTO events (task_id, seq, payload, received_at, origin) VALUES ('t', 1, x'00ff', 1.0, 'upstream')"
    )
    conn.executemany(
        "INSERT INTO projection_rows VALUES (?, ?, ?)", [("tasks", "t", b"\x01" * 5000), ("other", "k", b"v")]
    )
    conn.execute("INSERT INTO projection_cursors VALUES ('tasks', 1)")
    conn.close()
    with SqliteStore(path) as st:
        assert pragma(st, "user_version") == SCHEMA_VERSION >= 3
        sql = st._conn.execute("SELECT sql FROM sqlite_master WHERE name = 'projection_rows'").fetchone()[0]
        assert "WITHOUT ROWID" not in sql
        assert list(st.projection_rows("tasks")) == [("t", b"\x01" * 5000)]
        assert list(st.projection_rows("other")) == [("k", b"v")]
        assert st.projection_cursor("tasks") == 1
        assert [e.payload for e in st.read_from(0)] == [b"\x00\xff"]
        # the key is still unique: a commit updates the row in place
        st.projection_commit("tasks", 1, {"t": b"new"}, expect=1)
        assert list(st.projection_rows("tasks")) == [("t", b"new")]


def test_newer_schema_is_refused_with_a_clear_message(tmp_path):
    path = tmp_path / "new.db"
    with SqliteStore(path) as st:
        st.append(NewEvent(payload=b"keep me", task_id="t"))
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 3}")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNew) as info:
        SqliteStore(path)
    msg = str(info.value)
    assert f"schema version {SCHEMA_VERSION + 3}" in msg and "upgrade a2a-tape" in msg and "\n" not in msg
    conn = sqlite3.connect(path)  # the newer file is left untouched
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 3
    assert conn.execute("SELECT payload FROM events").fetchall() == [(b"keep me",)]
    conn.close()


def test_not_a_database(tmp_path):
    path = tmp_path / "junk.db"
    junk = bytes(range(256)) * 64
    path.write_bytes(junk)
    with pytest.raises(NotADatabase, match="not an a2a-tape database"):
        SqliteStore(path)
    assert path.read_bytes() == junk  # never overwritten


def test_missing_file_without_create(tmp_path):
    with pytest.raises(StoreNotFound, match="no database at"):
        SqliteStore(tmp_path / "nope.db", create=False)
    assert not (tmp_path / "nope.db").exists()


def test_missing_directory(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        SqliteStore(tmp_path / "no" / "such" / "dir.db")


def test_parent_is_a_file(tmp_path):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(StoreError):
        SqliteStore(tmp_path / "plain" / "x.db")


def test_path_is_a_directory(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        SqliteStore(tmp_path)


def test_other_backend_url_is_a_clear_error():
    with pytest.raises(StoreError, match="no store backend for 'mysql://'"):
        store.open_store("mysql://localhost/x")


def test_postgres_url_with_nothing_listening_fails_fast_and_readably():
    from tests.support.servers import closed_port

    with pytest.raises(StoreError, match=r"^cannot connect to postgresql://a2a@127\.0\.0\.1:\d+/x: .*refused"):
        store.open_store(f"postgresql://a2a:secret@127.0.0.1:{closed_port()}/x")


def test_file_url_opens_sqlite(tmp_path):
    with store.open_store(f"file:{tmp_path / 'u.db'}") as st:
        assert st.append(NewEvent(payload=b"x", task_id="t")).position == 1
    assert (tmp_path / "u.db").exists()


def test_payload_bytes_bind_exactly_through_the_registered_adapter(tmp_path):
    """bytes bind as themselves (sqlite3 otherwise builds and drops an AttributeError per BLOB):
    every byte value, empty payloads, a run of a stream's batch and single rows come back exact."""
    assert sqlite3.adapters[(bytes, sqlite3.PrepareProtocol)] is bytes
    payloads = [bytes(range(256)), b"", b"\x00", b'{"token": "x"}', bytes(range(255, -1, -1)) * 40]
    with SqliteStore(tmp_path / "log.db") as st:
        st.append_batch([NewEvent(payload=p, task_id="run") for p in payloads])  # one run: bound by column
        for p in payloads:
            st.append(NewEvent(payload=p, task_id="single"))
    conn = sqlite3.connect(tmp_path / "log.db")
    for task in ("run", "single"):
        rows = conn.execute("SELECT payload FROM events WHERE task_id = ? ORDER BY seq", (task,))
        assert [r[0] for r in rows] == payloads
    assert conn.execute("SELECT DISTINCT typeof(payload) FROM events").fetchall() == [("blob",)]
    conn.close()


def test_a_programs_own_bytes_adapter_is_left_alone(tmp_path):
    """Registered before the store is imported, a program's adapter for bytes stays in place."""
    code = (
        "import sqlite3\n"
        "mine = lambda b: b\n"
        "sqlite3.register_adapter(bytes, mine)\n"
        "import a2a_tape.store.sqlite\n"
        "assert sqlite3.adapters[(bytes, sqlite3.PrepareProtocol)] is mine\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
