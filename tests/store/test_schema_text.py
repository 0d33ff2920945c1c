"""The schema a new SQLite log gets, to the byte: ``sqlite_master`` of a fresh log is ``schema_v6.json``.

The first migrations made five tables with sqlite-utils; they are plain SQL now (sqlite-utils cost every process
that creates a log ~60 ms of imports), written so that a log made now has the very statements a log made then
has. A change to the schema is a new migration and a new golden, never an edit of the old statements.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from a2a_tape.store import SqliteStore
from a2a_tape.store.schema import SCHEMA_VERSION

GOLDEN = Path(__file__).with_name(f"schema_v{SCHEMA_VERSION}.json")


def _master(path: Path) -> list[list[str | None]]:
    conn = sqlite3.connect(path)
    try:
        return [list(r) for r in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid")]
    finally:
        conn.close()


def test_a_new_log_has_the_schema_of_the_golden_to_the_byte(tmp_path):
    SqliteStore(tmp_path / "new.db").close()
    assert _master(tmp_path / "new.db") == json.loads(GOLDEN.read_text())


def test_creating_a_log_imports_no_sqlite_utils(tmp_path):
    import subprocess

    code = (
        "import sys; from a2a_tape.store import SqliteStore; "
        f"SqliteStore({str(tmp_path / 'fresh.db')!r}).close(); print('sqlite_utils' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
