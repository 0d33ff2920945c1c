"""The binding of each exchange (issue 22): a column since schema 5, filled in for older logs.

Rows written before it (the proxy wrote ``dialect = "rest"`` for HTTP+JSON, a version for JSON-RPC)
read as the binding they were: the migration fills the column, and
:func:`store.methods.binding_and_version` reads a row either way (a tape written before it too).
"""

from __future__ import annotations

import io
import sqlite3

import pytest

from a2a_tape.store import Exchange, open_store
from a2a_tape.store.methods import binding_and_version
from a2a_tape.store.schema import MIGRATIONS, SCHEMA_VERSION
from a2a_tape.store.tape import import_tape, write_tape


@pytest.mark.parametrize(
    ("binding", "dialect", "expected"),
    [
        (None, "rest", ("http+json", "1.0")),
        (None, "0.3", ("jsonrpc", "0.3")),
        (None, "1.0", ("jsonrpc", "1.0")),
        (None, None, (None, None)),  # a card fetch: no binding
        ("http+json", "1.0", ("http+json", "1.0")),
        ("http+json", "0.3", ("http+json", "0.3")),
        ("grpc", "1.0", ("grpc", "1.0")),
    ],
)
def test_binding_and_version_reads_old_and_new_rows(binding, dialect, expected):
    assert binding_and_version(binding, dialect) == expected


def test_a_v4_sqlite_log_gets_the_binding_of_each_exchange(tmp_path):
    path = tmp_path / "v4.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:4]:
        migration(conn)
    conn.execute("PRAGMA user_version = 4")
    for method, dialect in [("message:stream", "rest"), ("message/stream", "0.3"), ("GetTask", "1.0"), (None, None)]:
        conn.execute(
            "INSERT INTO exchanges (started_at, url, http_method, rpc_method, dialect, role) VALUES (1, 'u', 'POST', ?, ?, 'proxy')",
            (method, dialect),
        )
    conn.close()
    with open_store(path) as st:
        assert st._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        rows = [(e.rpc_method, e.binding, e.dialect) for e in st.exchanges()]
    assert rows == [
        ("message:stream", "http+json", "rest"),  # the dialect as written; readers go through binding_and_version
        ("message/stream", "jsonrpc", "0.3"),
        ("GetTask", "jsonrpc", "1.0"),
        (None, None, None),
    ]


def test_the_binding_travels_in_a_tape_and_an_old_tape_still_reads(tmp_path):
    with open_store(tmp_path / "a.db") as st:
        st.begin_exchange(
            Exchange(url="http://a/message:send", rpc_method="SendMessage", dialect="1.0", binding="http+json")
        )
        out = io.BytesIO()
        write_tape(st, out)
    assert b'"binding":"http+json"' in out.getvalue()
    old = out.getvalue().replace(b',"binding":"http+json"', b"").replace(b'"dialect":"1.0"', b'"dialect":"rest"')
    with open_store(tmp_path / "b.db") as st:
        import_tape(st, io.BytesIO(old))
        (ex,) = st.exchanges()
        assert binding_and_version(ex.binding, ex.dialect) == ("http+json", "1.0")


def test_a_v2_postgres_log_gets_the_binding_column(pg_url):
    import psycopg

    from a2a_tape.store import postgres

    old_exchanges = postgres._SCHEMA[0].replace(",\n        binding TEXT)", ")")
    assert "binding" not in old_exchanges
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE a2a_tape_schema (version INTEGER NOT NULL)")
        for stmt in [old_exchanges, *postgres._SCHEMA[1:], *postgres._SCHEMA_V2]:
            conn.execute(stmt)
        conn.execute("INSERT INTO a2a_tape_schema (version) VALUES (2)")
        conn.execute(
            "INSERT INTO exchanges (started_at, url, rpc_method, dialect) VALUES (1, 'u', 'message:send', 'rest')"
        )
    with open_store(pg_url) as st:
        (ex,) = st.exchanges()
        assert (ex.binding, ex.dialect) == ("http+json", "rest")
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM a2a_tape_schema").fetchone()[0] == postgres.SCHEMA_VERSION
