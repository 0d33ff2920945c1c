"""The store behaviour suite runs against every backend listed in ``BACKENDS``, through the
:class:`a2a_tape.store.Store` protocol (the fixtures are typed so; the tests use no attribute outside it), so what passes
here holds for any backend that satisfies it (mypy checks both do: ``store/_conformance.py``).

Each backend provides a factory ``open(location, durability)`` and a way to make a fresh,
empty location per test. SQLite is the embedded default; PostgreSQL runs the same suite, each location a
throw-away schema on a private server started for the session (``pg_server``).
Tests that check something only one backend has (SQLite PRAGMAs) live in ``test_sqlite_*.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from a2a_tape import store


@dataclass
class Backend:
    """Opens stores of one backend at locations of a test's own (closed at teardown)."""

    name: str
    root: Path
    opened: list[store.Store] = field(default_factory=list)

    def location(self, label: str = "log") -> str:
        return str(self.root / f"{label}.db")

    def open(self, label: str = "log", *, durability: store.Durability = "full") -> store.Store:
        st: store.Store = store.open_store(self.location(label), durability=durability)
        self.opened.append(st)
        return st

    def close_all(self) -> None:
        for st in self.opened:
            try:
                st.close()
            except Exception:  # noqa: BLE001 - already closed by the test
                pass


class PostgresBackend(Backend):
    """Each label is a fresh schema on the session's PostgreSQL server (tests/conftest.py)."""

    def __init__(self, name: str, root: Path, server_url: str) -> None:
        super().__init__(name, root)
        self.server_url = server_url
        self.urls: dict[str, str] = {}

    def location(self, label: str = "log") -> str:
        if label not in self.urls:
            import psycopg

            schema = f"s{next(_schemas)}"
            with psycopg.connect(self.server_url, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            self.urls[label] = f"{self.server_url}?options=-csearch_path%3D{schema}"
        return self.urls[label]


_schemas = iter(range(1, 10_000_000))

BACKENDS: dict[str, Callable[..., Backend]] = {
    "sqlite": lambda root, request: Backend("sqlite", root),
    "postgres": lambda root, request: PostgresBackend("postgres", root, request.getfixturevalue("pg_server")),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request, tmp_path) -> Iterator[Backend]:
    b = BACKENDS[request.param](tmp_path, request)
    yield b
    b.close_all()


@pytest.fixture
def st(backend: Backend) -> store.Store:
    """A fresh, empty store of the backend under test."""
    return backend.open()
