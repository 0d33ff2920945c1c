"""Opening a log creates nothing it was not asked to: reading never initialises a file, a tape is
read through a private copy, and a log made by a use that failed before recording is removed."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from a2a_tape import store
from a2a_tape.store import Exchange, NewEvent, NotADatabase, StoreNotFound, open_for_reading
from a2a_tape.store.tape import TapeError
from a2a_tape.store.tape_copy import TapeCopy

TAPE = Path(__file__).resolve().parents[2] / "recordings" / "sdk-v10-stream.jsonl"


def _sqlite(*statements: str) -> Callable[[Path], None]:
    """Another program's SQLite database, made by ``statements``."""

    def make(path: Path) -> None:
        conn = sqlite3.connect(path)
        for sql in statements:
            conn.execute(sql)
        conn.commit()
        conn.close()

    return make


NOT_OURS = {
    "empty file": lambda p: p.write_bytes(b""),
    "text file": lambda p: p.write_bytes(b"hello, not a database\n"),
    "random bytes": lambda p: p.write_bytes(os.urandom(4096)),
    "another program's SQLite": _sqlite("CREATE TABLE notes (body TEXT)", "INSERT INTO notes VALUES ('mine')"),
    # its user_version says 3, but it holds no log of ours
    "SQLite with a foreign user_version": _sqlite("PRAGMA user_version = 3", "CREATE TABLE other (x)"),
}
FOREIGN_SQLITE = ["another program's SQLite", "SQLite with a foreign user_version"]
OPENS = {
    "open_for_reading": lambda p: open_for_reading(p),
    "open_for_reading keep_cache": lambda p: open_for_reading(p, keep_cache=True),
    "open_store readonly": lambda p: store.open_store(p, readonly=True),
    "open_store create=False": lambda p: store.open_store(p, create=False),
}


@pytest.mark.parametrize("make", NOT_OURS.values(), ids=NOT_OURS.keys())
@pytest.mark.parametrize("opener", OPENS.values(), ids=OPENS.keys())
def test_a_file_that_holds_no_log_is_refused_and_left_as_it_was(tmp_path, make, opener):
    path = tmp_path / "x.db"
    make(path)
    before = path.read_bytes()
    with pytest.raises(NotADatabase, match=f"^not an a2a-tape database: {path}$"):
        opener(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]


@pytest.mark.parametrize("make", [NOT_OURS[k] for k in FOREIGN_SQLITE], ids=FOREIGN_SQLITE)
def test_another_programs_database_is_not_given_our_tables(tmp_path, make):
    """Opened to write (``record``, ``import``, ``proxy`` create a log when there is none): a database
    of another program's is refused and left as it was, not initialised beside its own tables."""
    path = tmp_path / "x.db"
    make(path)
    before = path.read_bytes()
    with pytest.raises(NotADatabase, match=f"^not an a2a-tape database: {path}$"):
        store.open_store(path)
    assert path.read_bytes() == before


def test_an_empty_file_or_database_to_write_becomes_a_log(tmp_path):
    """A file made beforehand (touched, or a new SQLite database with no tables) is a new log."""
    touched, fresh = tmp_path / "touched.db", tmp_path / "fresh.db"
    touched.write_bytes(b"")
    _sqlite("PRAGMA user_version = 0")(fresh)
    for path in (touched, fresh):
        with store.open_store(path) as st:
            assert st.read_task("t-none") == []


@pytest.mark.parametrize("opener", OPENS.values(), ids=OPENS.keys())
def test_a_missing_file_is_not_created(tmp_path, opener):
    with pytest.raises(StoreNotFound):
        opener(tmp_path / "missing.db")
    assert list(tmp_path.iterdir()) == []


def test_a_log_is_read_and_an_older_one_is_still_ours(tmp_path):
    path = tmp_path / "log.db"
    with store.open_store(path) as st:
        st.begin_exchange(Exchange(started_at=1.0, url="http://agent/"))
    for keep_cache in (False, True):
        with open_for_reading(path, keep_cache=keep_cache) as st:
            assert len(st.exchanges()) == 1


def test_a_tape_is_read_through_a_private_copy(tmp_path):
    tape = tmp_path / "x.tape.data"  # no tape suffix: found by its first byte
    tape.write_bytes(TAPE.read_bytes())
    st = open_for_reading(tape)
    assert isinstance(st, TapeCopy)
    copy = Path(st.location)
    assert copy.parent.stat().st_mode & 0o077 == 0  # owner-only
    assert st.count_events() == 6 and st.task_events()
    st.close()
    assert not copy.parent.exists()  # the copy goes when it is closed
    assert tape.read_bytes() == TAPE.read_bytes()


def test_a_bad_tape_leaves_no_copy_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"type": "nothing"}\n')
    with pytest.raises(TapeError):
        open_for_reading(bad)
    assert list((tmp_path / "tmp").iterdir()) == []


def _names(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir())


@pytest.mark.parametrize(
    "recorded",
    [[], ["card"]],
    ids=["nothing", "a card read"],
)
def test_a_log_created_by_a_failed_use_that_recorded_nothing_is_removed(tmp_path, recorded):
    path = tmp_path / "new.db"
    with pytest.raises(RuntimeError), store.open_store(path) as st:
        for _ in recorded:
            st.begin_exchange(
                Exchange(started_at=1.0, url="http://agent/.well-known/agent-card.json", http_method="GET")
            )
        raise RuntimeError("the agent cannot be reached")
    assert _names(tmp_path) == []


def test_a_log_that_recorded_something_or_existed_stays(tmp_path):
    path = tmp_path / "new.db"
    with pytest.raises(RuntimeError), store.open_store(path) as st:
        ex = st.begin_exchange(Exchange(started_at=1.0, url="http://agent/", rpc_method="SendMessage"))
        raise RuntimeError("failed after sending")
    assert "new.db" in _names(tmp_path)
    with store.open_store(path) as st:
        assert [e.id for e in st.exchanges()] == [ex]
    empty = tmp_path / "existing.db"
    store.open_store(empty).close()  # an empty log made earlier: this use did not create it
    with pytest.raises(RuntimeError), store.open_store(empty):
        raise RuntimeError("boom")
    assert empty.exists()
    events = tmp_path / "events.db"
    with pytest.raises(RuntimeError), store.open_store(events) as st:
        st.append(NewEvent(payload=b"{}", task_id="t", received_at=1.0))
        raise RuntimeError("boom")
    assert events.exists()
    ok = tmp_path / "ok.db"
    with store.open_store(ok):
        pass
    assert ok.exists()  # a use that did not fail keeps its (empty) log


def test_reading_an_empty_database_of_either_backend_initialises_nothing(backend):
    """An empty SQLite file, an empty PostgreSQL schema: no log is there, and none is made."""
    location = backend.location("empty")
    if backend.name == "sqlite":
        Path(location).write_bytes(b"")
    for opener in OPENS.values():
        with pytest.raises(NotADatabase, match="^not an a2a-tape database: "):
            opener(location)
    if backend.name == "sqlite":
        assert Path(location).read_bytes() == b""
    else:
        import psycopg

        with psycopg.connect(location) as conn:
            assert conn.execute("SELECT to_regclass('a2a_tape_schema')").fetchone()[0] is None


def test_a_log_another_connection_has_open_is_never_removed(tmp_path):
    """Another process may be about to record into the file this use created: it stays."""
    path = tmp_path / "shared.db"
    with pytest.raises(RuntimeError), store.open_store(path) as st:
        other = store.open_store(path)  # opened after it was created: it did not create it
        raise RuntimeError("the first use fails")
    assert st.created and not other.created
    other.append(NewEvent(payload=b"{}", task_id="t", received_at=1.0))
    other.close()
    with store.open_store(path, readonly=True) as again:
        assert again.count_events() == 1
