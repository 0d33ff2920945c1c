"""The store behaviour suite runs against every backend listed in ``BACKENDS``.

Each backend provides a factory ``open(location, durability)`` and a way to make a fresh,
empty location per test. SQLite is the only backend today; a PostgreSQL backend adds an entry
here (a location being a DSN of a throw-away database) and the whole suite runs against it too.
Tests that check something only one backend has (SQLite PRAGMAs) live in ``test_sqlite_*.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import store


@dataclass
class Backend:
    """Opens stores of one backend at locations of a test's own (closed at teardown)."""

    name: str
    root: Path
    opened: list = field(default_factory=list)

    def location(self, label: str = "log") -> str:
        return str(self.root / f"{label}.db")

    def open(self, label: str = "log", *, durability: store.Durability = "full"):
        st = store.open_store(self.location(label), durability=durability)
        self.opened.append(st)
        return st

    def close_all(self) -> None:
        for st in self.opened:
            try:
                st.close()
            except Exception:  # noqa: BLE001 - already closed by the test
                pass


BACKENDS: dict[str, Callable[[Path], Backend]] = {
    "sqlite": lambda root: Backend("sqlite", root),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request, tmp_path) -> Iterator[Backend]:
    b = BACKENDS[request.param](tmp_path)
    yield b
    b.close_all()


@pytest.fixture
def st(backend):
    """A fresh, empty store of the backend under test."""
    return backend.open()
