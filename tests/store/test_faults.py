"""The machine's faults become readable StoreErrors: a full disk, a lock held past the busy timeout,
read-only media, a PostgreSQL server that goes away.

Everything here is real: a 2 MB tmpfs mounted by the test (root only; skipped with the reason
otherwise), a second process holding ``BEGIN IMMEDIATE`` with the real sqlite3 module, a private
PostgreSQL server stopped mid-use, and the installed ``a2a-tape`` console script in a subprocess (once per
case; a case's repeats, and what prepares a log or reads it back, run the same command in process:
``installed=False``).
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import anyio
import pytest

from a2a_tape import store
from a2a_tape.store import (
    ConnectionLost,
    DatabaseLocked,
    DiskFull,
    Exchange,
    GroupCommitWriter,
    IdempotencyRecord,
    NewEvent,
    ReadOnlyStore,
    SqliteStore,
    StoreError,
    WouldWait,
)
from a2a_tape.store.driver_errors import is_guarded
from a2a_tape.store.postgres import PostgresStore
from a2a_tape.store.tape import write_tape
from a2a_tape.store.tape_reader import READER_MIN_BYTES
from a2a_tape.store.writer import writer_of
from tests.recorder.cli.conftest import TASK, make_log
from tests.support.in_process import run_text_in_process
from tests.support.locks import write_lock_held

CLI = str(Path(sys.executable).with_name("a2a-tape"))
CHUNK = 5000  # bytes of one event payload in the filling loops


def cli(*args: str | Path, timeout: float = 60, installed: bool = True) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it; ``installed=False``: the same command in process."""
    if not installed:
        return run_text_in_process([str(a) for a in args], env={"A2A_TAPE_DB": None}, timeout=timeout)
    env = {k: v for k, v in os.environ.items() if k != "A2A_TAPE_DB"}
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)


def assert_one_line(r: subprocess.CompletedProcess[str], *needles: str) -> str:
    lines = r.stderr.splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("a2a-tape: error: "), lines[0]
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def payload(n: int) -> bytes:
    """Incompressible enough: SQLite stores it as is; tmpfs fills at a known pace."""
    return b'{"n": %d, "pad": "%s"}' % (n, os.urandom(CHUNK // 2).hex().encode())


# -- a small file system of our own (root) ----------------------------------------------------


@contextmanager
def _mounted(where: Path, size: str = "2m") -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root: the test mounts its own small tmpfs (disk full, read-only media)")
    where.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): needs CAP_SYS_ADMIN")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture
def small_fs(tmp_path) -> Iterator[Path]:
    """A 2 MB tmpfs, unmounted at teardown."""
    with _mounted(tmp_path / "small") as d:
        yield d


def fill_until_full(st: SqliteStore, limit: int = 2000) -> list[bytes]:
    """Append batches of 10 events until the disk is full; return the payloads that were stored."""
    stored: list[bytes] = []
    for b in range(limit):
        batch = [payload(b * 10 + i) for i in range(10)]
        try:
            st.append_batch([NewEvent(payload=p, task_id=f"t{b % 7}") for p in batch])
        except DiskFull:
            return stored
        stored += batch
    raise AssertionError(f"{limit} batches fitted on a 2 MB file system")


def test_append_on_a_full_disk_raises_disk_full_and_keeps_the_log(small_fs):
    path = small_fs / "log.db"
    st = SqliteStore(path)
    stored = fill_until_full(st)
    assert stored, "nothing fitted before the disk was full"
    with pytest.raises(DiskFull) as info:  # the connection is usable: the same refusal, not a stuck transaction
        st.append_batch([NewEvent(payload=payload(-i), task_id="late") for i in range(1, 21)])
    message = str(info.value)
    assert str(path) in message and "disk is full" in message and "\n" not in message
    assert isinstance(info.value, store.StoreUnavailable)
    # the log stays readable and whole: every acknowledged event, byte for byte, nothing of the refused
    assert [e.payload for e in st.read_from(0)] == stored
    assert not st.has_task("late")
    st.close()
    with SqliteStore(path) as again:
        assert again.integrity_check() == "ok"
        assert again.count_events() == len(stored)


def test_group_commit_producers_receive_disk_full(small_fs):
    st = SqliteStore(small_fs / "log.db")
    fill_until_full(st)

    async def main() -> BaseException:
        with anyio.fail_after(30):  # a producer that hangs fails here instead
            async with GroupCommitWriter(st) as w:
                try:
                    await w.append_many([NewEvent(payload=payload(-i), task_id="t") for i in range(1, 21)])
                except StoreError as exc:
                    return exc
                raise AssertionError("the append was acknowledged on a full disk")

    assert isinstance(anyio.run(main), DiskFull)
    st.close()


def _tape(tmp_path: Path, events: int) -> Path:
    """A JSONL tape of ``events`` events of one task (written from a db on the ordinary disk)."""
    src = tmp_path / "src.db"
    with SqliteStore(src) as st:
        ex = st.begin_exchange(Exchange(started_at=1.0, url="http://agent/", task_id="imported"))
        st.append_batch([NewEvent(payload=payload(i), task_id="imported", exchange_id=ex) for i in range(events)])
        tape = tmp_path / "tape.jsonl"
        with tape.open("wb") as fh:
            write_tape(st, fh)
    return tape


def test_import_and_copy_on_a_full_disk_exit_2_with_one_line_and_the_log_unchanged(tmp_path, small_fs):
    tape = _tape(tmp_path, 600)  # ~3 MB of payloads: more than the file system holds
    assert tape.stat().st_size >= READER_MIN_BYTES  # parsed by the import's reader process
    db = small_fs / "log.db"
    make_log(db)
    before = _dump(db)
    r = cli("import", tape, "--db", db)
    assert_one_line(r, "disk is full", str(db))
    assert _dump(db) == before
    r = cli("copy", tmp_path / "src.db", db)
    assert_one_line(r, "disk is full", str(db))
    assert _dump(db) == before
    with store.open_store(db) as st:  # and it still takes what fits
        st.append(NewEvent(payload=b'{"after": "the refusal"}', task_id="small"))
        assert st.integrity_check() == "ok"


def _dump(path: Path) -> list[tuple[int, str | None, bytes]]:
    with store.open_store(path, readonly=True) as st:
        return [(e.position, e.task_id, e.payload) for e in st.read_from(0)]


# -- another process holds the write lock ------------------------------------------------------


def test_append_while_another_process_writes_raises_database_locked(tmp_path):
    path = tmp_path / "log.db"
    st = SqliteStore(path, busy_timeout=0.2)
    st.append(NewEvent(payload=payload(0), task_id="t"))
    with write_lock_held(path):
        with pytest.raises(DatabaseLocked) as info:
            st.append(NewEvent(payload=payload(1), task_id="t"))
        message = str(info.value)
        assert str(path) in message and "locked by another process" in message and "0.2 s" in message
        assert "\n" not in message
        assert [e.seq for e in st.read_task("t")] == [1]  # reads go on while the lock is held
    st.append(NewEvent(payload=payload(1), task_id="t"))  # the store is usable again once it is free
    assert st.count_events() == 2
    st.close()


def test_busy_timeout_defaults_to_thirty_seconds_and_is_configurable(tmp_path):
    with store.open_store(tmp_path / "a.db") as st:
        assert st.busy_timeout == 30.0
    with store.open_store(tmp_path / "a.db", busy_timeout=1.5) as st:
        assert st.busy_timeout == 1.5


def test_group_commit_producers_receive_database_locked(tmp_path):
    path = tmp_path / "log.db"
    st = SqliteStore(path, busy_timeout=0.2)

    async def main() -> list[BaseException]:
        errors: list[BaseException] = []

        async def producer(w: GroupCommitWriter, n: int) -> None:
            try:
                await w.append(NewEvent(payload=payload(n), task_id=f"t{n}"))
            except StoreError as exc:
                errors.append(exc)

        with anyio.fail_after(30):
            async with GroupCommitWriter(st) as w, anyio.create_task_group() as tg:
                for n in range(4):
                    tg.start_soon(producer, w, n)
        return errors

    with write_lock_held(path):
        errors = anyio.run(main)
    assert len(errors) == 4 and all(isinstance(e, DatabaseLocked) for e in errors)
    assert st.count_events() == 0
    st.close()


@pytest.mark.parametrize("events", [20, 600], ids=["parsed-in-process", "reader-process"])
def test_import_and_copy_while_locked_exit_2_after_the_busy_timeout(tmp_path, events):
    """Through the installed script with the reader process; the small tape's case in process."""
    installed = events == 600
    tape = _tape(tmp_path, events)
    assert (tape.stat().st_size >= READER_MIN_BYTES) == (events == 600)
    db = tmp_path / "log.db"
    make_log(db)
    before = _dump(db)
    with write_lock_held(db):
        r = cli("import", tape, "--db", db, "--busy-timeout", "0.3", installed=installed)
        assert_one_line(r, "locked by another process", str(db), "--busy-timeout")
        r = cli("copy", tmp_path / "src.db", db, "--busy-timeout", "0.3", installed=installed)
        assert_one_line(r, "locked by another process", str(db))
    assert _dump(db) == before


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_busy_timeout_that_is_not_a_duration_is_refused_before_anything_is_written(tmp_path, value):
    tape = _tape(tmp_path, 1)
    db = tmp_path / "new.db"
    r = cli("import", tape, "--db", db, "--busy-timeout", value, installed=value == "0")  # the others in process
    assert_one_line(r, "--busy-timeout")
    assert not db.exists()


# -- read-only ---------------------------------------------------------------------------------


def test_a_store_opened_read_only_refuses_every_write(tmp_path):
    path = tmp_path / "log.db"
    make_log(path)
    with store.open_store(path, readonly=True) as st:
        assert st.readonly and st.count_events() == 8
        writes = [
            lambda: st.append(NewEvent(payload=b"{}", task_id="x")),
            lambda: st.begin_exchange(Exchange(started_at=1.0)),
            lambda: st.set_meta("k", "v"),
            lambda: st.projection_commit("p", 1, {}),
            lambda: st.idem_expire(),
            lambda: st.lease_acquire("l", "me", 1.0),
        ]
        for write in writes:
            with pytest.raises(ReadOnlyStore, match="read-only"):
                write()
    assert not store.open_store(path).get_meta("k")


def test_read_only_open_does_not_create_a_missing_database(tmp_path):
    with pytest.raises(store.StoreNotFound):
        store.open_store(tmp_path / "nope.db", readonly=True)
    assert not (tmp_path / "nope.db").exists()


@pytest.fixture(params=["projection behind", "projection current"])
def readonly_copy(request, tmp_path) -> Iterator[Path]:
    """A log copied onto a tmpfs remounted read-only (no -wal or -shm can be made there)."""
    src = tmp_path / "src.db"
    make_log(src)
    if request.param == "projection current":
        assert cli("tasks", "--db", src, installed=False).returncode == 0  # folds and commits the projection
    with _mounted(tmp_path / "media", size="4m") as media:
        shutil.copy(src, media / "log.db")
        r = subprocess.run(["mount", "-o", "remount,ro", str(media)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only: {r.stderr.strip()}")
        yield media / "log.db"


def test_read_only_commands_work_on_read_only_media(readonly_copy, request):
    """Through the installed script with the projection behind; with it current, in process."""
    db = readonly_copy
    installed = request.node.callspec.params["readonly_copy"] == "projection behind"
    r = cli("tasks", "--json", "--db", db, installed=installed)
    assert r.returncode == 0, r.stderr
    assert TASK in r.stdout and "other-task" in r.stdout
    r = cli("show", TASK[:8], "--db", db, installed=installed)
    assert r.returncode == 0, r.stderr
    r = cli("channels", TASK, "--db", db, installed=installed)
    assert r.returncode == 0, r.stderr
    assert "chunk-0 chunk-1" in r.stdout
    for args in (("doctor",), ("export", "--all"), ("grep", "chunk")):
        r = cli(*args, "--db", db, installed=installed)
        assert r.returncode in (0, 1), (args, r.stderr)
        assert "error" not in r.stderr, (args, r.stderr)
    assert sorted(os.listdir(db.parent)) == ["log.db"]


def test_tasks_and_channels_keep_the_projection_when_the_log_can_be_written(tmp_path):
    """Read-only commands open the log read-only, except that tasks and channels still commit the
    projection (a cache: a log of a million events folds in seconds, a current projection at once)."""
    db = tmp_path / "log.db"
    make_log(db)
    assert cli("tasks", "--db", db, installed=False).returncode == 0
    with store.open_store(db, readonly=True) as st:
        assert st.projection_cursor("tasks") == st.last_position() == 8
    with store.open_store(db) as st:
        st.append(NewEvent(payload=b'{"later": 1}', task_id="later"))
    assert cli("channels", TASK, "--db", db, installed=False).returncode == 0
    with store.open_store(db, readonly=True) as st:
        assert st.projection_cursor("tasks") == st.last_position() == 9


def test_serve_starts_on_read_only_media(readonly_copy):
    p = subprocess.Popen(
        [CLI, "serve", "--listen", "127.0.0.1:0", "--db", str(readonly_copy)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert p.stderr is not None
        first = p.stderr.readline()
        assert "replaying" in first, first + p.stderr.read() if p.poll() is not None else first
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_a_write_on_read_only_media_raises_read_only_store(readonly_copy):
    with store.open_store(readonly_copy, readonly=True) as st:
        assert st.count_events() == 8
        with pytest.raises(ReadOnlyStore):
            st.append(NewEvent(payload=b"{}", task_id="x"))
    r = cli("import", "-", "--db", readonly_copy)
    assert_one_line(r, "read-only", str(readonly_copy))


@pytest.mark.parametrize("copied", [("-wal", "-shm"), ("-wal",)], ids=["wal and shm", "wal without shm"])
def test_commits_waiting_in_a_wal_on_read_only_media(tmp_path, copied):
    """A copy taken while a writer was open: its last commits are only in the -wal file. With the
    -shm beside it, SQLite reads them read-only; without, no -shm can be made on read-only media
    and the main file alone would miss them: a readable refusal, never a silently shorter log."""
    src = tmp_path / "src.db"
    make_log(src)
    writer = SqliteStore(src)
    writer._conn.execute("PRAGMA wal_autocheckpoint=0")  # keep the next commit in the -wal file
    writer.append(NewEvent(payload=b'{"only": "in the wal"}', task_id="wal-task"))
    with _mounted(tmp_path / "media", size="4m") as media:
        for suffix in ("", *copied):
            shutil.copy(f"{src}{suffix}", media / f"log.db{suffix}")
        writer.close()
        r = subprocess.run(["mount", "-o", "remount,ro", str(media)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only: {r.stderr.strip()}")
        db = media / "log.db"
        if "-shm" in copied:
            with store.open_store(db, readonly=True) as st:
                assert st.count_events() == 9 and st.has_task("wal-task")
            r = cli("tasks", "--json", "--db", db)
            assert r.returncode == 0 and "wal-task" in r.stdout, r.stderr
        else:
            with pytest.raises(store.StoreUnavailable, match="commits wait in its -wal file"):
                store.open_store(db, readonly=True)
            assert_one_line(cli("tasks", "--db", db), "commits wait in its -wal file", str(db))


def test_read_only_and_lock_timeout_on_every_backend(backend):
    """The same faults through the protocol on both backends: a read-only store refuses writes with
    ReadOnlyStore; a writer waiting past its busy timeout for another's lock gets DatabaseLocked."""
    location = backend.location()
    holder = store.open_store(location)
    holder.append(NewEvent(payload=payload(0), task_id="t"))
    reader = store.open_store(location, readonly=True)
    backend.opened += [holder, reader]
    assert reader.readonly and [e.seq for e in reader.read_task("t")] == [1]
    with pytest.raises(ReadOnlyStore, match="read-only"):
        reader.append(NewEvent(payload=payload(1), task_id="t"))
    waiter = store.open_store(location, busy_timeout=0.2)
    backend.opened.append(waiter)
    with holder.transaction():
        holder.append(NewEvent(payload=payload(2), task_id="t"))  # holds the write lock until the block ends
        with pytest.raises(DatabaseLocked, match="locked by another"):
            waiter.append(NewEvent(payload=payload(3), task_id="t"))
    assert [e.seq for e in waiter.read_task("t")] == [1, 2]


# Every write of the store protocols, as a call on a store (each one writes something: no empty
# input that returns before its transaction).
WRITES: dict[str, Callable[[store.Store], object]] = {
    "append": lambda st: st.append(NewEvent(payload=b"{}", task_id="x")),
    "append_batch": lambda st: st.append_batch([NewEvent(payload=b"{}", task_id="x", seq=9)]),
    "begin_exchange": lambda st: st.begin_exchange(Exchange(started_at=1.0)),
    "update_exchange": lambda st: st.update_exchange(1, outcome="ok"),
    "idem_claim": lambda st: st.idem_claim(IdempotencyRecord(key="k", request_hash="h", exchange_id=None)),
    "idem_update": lambda st: st.idem_update("k", state="done"),
    "idem_release": lambda st: st.idem_release("k"),
    "idem_expire": lambda st: st.idem_expire(),
    "set_meta": lambda st: st.set_meta("k", "v"),
    "lease_acquire": lambda st: st.lease_acquire("l", "me", 1.0),
    "lease_release": lambda st: st.lease_release("l", "me"),
    "projection_commit": lambda st: st.projection_commit("p", 1, {"k": b"v"}),
    "projection_reset": lambda st: st.projection_reset("p"),
    "task_index_upsert": lambda st: st.task_index_upsert("p", [("k", 1, 1.0, "working", None)]),
    "task_index_reset": lambda st: st.task_index_reset("p"),
    "search_commit": lambda st: st.search_commit(1, [(1, 0, "x", 1, "artifact", "a", "text")]),
    "search_reset": lambda st: st.search_reset(),
    "findings_commit": lambda st: st.findings_commit(1, [("x", 1, 1, 0, 0, b"\x90")]),
    "findings_reset": lambda st: st.findings_reset(),
}


def test_a_read_only_store_refuses_every_write_on_every_backend(backend):
    """Each write of every protocol, on a store opened read-only, raises ReadOnlyStore (on
    PostgreSQL the server refuses: the driver's error must leave as ours, whichever class of the
    backend's defines the method) and writes nothing."""
    location = backend.location()
    backend.opened.append(store.open_store(location))  # the schema
    reader = store.open_store(location, readonly=True)
    backend.opened.append(reader)
    for name, write in WRITES.items():
        with pytest.raises(ReadOnlyStore, match="read-only"):
            write(reader)
        assert reader.count_events() == 0 and reader.get_meta("k") is None, name


@pytest.mark.parametrize("cls", [SqliteStore, PostgresStore], ids=["sqlite", "postgres"])
def test_every_public_method_of_a_backend_maps_driver_errors(cls):
    """``guard_public`` wraps every public method a backend has, its mixins' too (a method written
    once for both backends is a method of each)."""
    names = {n for n in dir(cls) if not n.startswith("_") and inspect.isfunction(inspect.getattr_static(cls, n))}
    assert set(WRITES) <= names and {"task_index_page", "search_match", "findings_rows", "get_exchange"} <= names
    unguarded = sorted(n for n in names if not is_guarded(inspect.getattr_static(cls, n)))
    assert unguarded == []


@contextmanager
def held_by_a_thread(location: str) -> Iterator[None]:
    """Another connection of this process, on a thread of its own, in a write transaction that
    holds the log's lock (both backends) until the block ends."""
    holder = store.open_store(location)
    taken, release, failed = threading.Event(), threading.Event(), []

    def hold() -> None:
        try:
            with holder.transaction():
                holder.append(NewEvent(payload=payload(100), task_id="holder"))
                taken.set()
                release.wait(60)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failed.append(exc)
            taken.set()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert taken.wait(30) and not failed, failed
        yield
    finally:
        release.set()
        thread.join(30)
        holder.close()


def test_a_write_begun_without_waiting_raises_would_wait_at_once_on_every_backend(backend):
    """``without_waiting``: while another connection holds the log's lock, an append raises
    WouldWait (a DatabaseLocked) at once, not after the busy timeout, and writes nothing; once
    the lock is gone it is written at once; outside the block writes wait as always."""
    location = backend.location()
    st = store.open_store(location, busy_timeout=20)
    backend.opened.append(st)
    st.append(NewEvent(payload=payload(0), task_id="t"))
    with held_by_a_thread(location):
        started = time.monotonic()
        with st.without_waiting(), pytest.raises(WouldWait) as info:
            st.append(NewEvent(payload=payload(1), task_id="t"))
        assert time.monotonic() - started < 10  # at once, not after the 20 s busy timeout
        assert isinstance(info.value, DatabaseLocked) and "\n" not in str(info.value)
        assert [e.seq for e in st.read_task("t")] == [1]
    with st.without_waiting():
        st.append(NewEvent(payload=payload(1), task_id="t"))
    assert [e.seq for e in st.read_task("t")] == [1, 2]


def test_a_transaction_begun_without_waiting_raises_would_wait_on_every_backend(backend):
    """The same inside a transaction of the caller's (a producer of the group commit writes its rows
    so): PostgreSQL takes its locks statement by statement, so the lock timeout meets a store method
    nested in the transaction; it still leaves as WouldWait, nothing written, so the writer retries
    waiting instead of failing the write."""
    location = backend.location()
    st = store.open_store(location, busy_timeout=20)
    backend.opened.append(st)
    st.append(NewEvent(payload=payload(0), task_id="t"))
    with held_by_a_thread(location):
        with st.without_waiting(), pytest.raises(WouldWait), st.transaction():
            st.append(NewEvent(payload=payload(1), task_id="t"))
            st.append(NewEvent(payload=payload(2), task_id="u"))
        assert [e.seq for e in st.read_task("t")] == [1] and st.read_task("u") == []


def test_the_group_commit_loop_never_waits_for_another_writers_lock(backend):
    """A small batch (committed on the loop when it can be) and a caller's own write through the
    store's shared writer (``writer_of(st).write``: recovery's synthetic FAILED), while
    another connection holds the lock: both wait on a worker thread instead, so the loop goes on
    (a ticker keeps running); both are stored once the lock is released."""
    location = backend.location()
    st = store.open_store(location, busy_timeout=10)
    backend.opened.append(st)
    done: dict[str, object] = {}

    async def main() -> int:
        ticks = 0
        async with GroupCommitWriter(st) as w:
            with ExitStack() as holding:
                holding.enter_context(held_by_a_thread(location))
                async with anyio.create_task_group() as tg:

                    async def small() -> None:
                        done["append"] = await w.append(NewEvent(payload=payload(1), task_id="t"))

                    async def own() -> None:
                        done["write"] = await writer_of(st).write(st.append, NewEvent(payload=payload(1), task_id="u"))

                    tg.start_soon(small)
                    tg.start_soon(own)
                    with anyio.fail_after(5):  # a loop blocked by a waiting commit never gets here in time
                        while ticks < 20:
                            ticks += 1
                            await anyio.sleep(0.01)  # a ticker, not a synchronisation
                    assert not done  # both still wait for the lock, off the loop
                    holding.close()  # released: both go through
        return ticks

    assert anyio.run(main) == 20
    assert sorted(done) == ["append", "write"]
    assert sorted(e.task_id for e in st.read_from(0) if e.task_id != "holder") == ["t", "u"]


# -- PostgreSQL: the server goes away ----------------------------------------------------------


def test_postgres_server_stopped_mid_use_gives_connection_lost(pg_server):
    """A private server (the session's ``pg_server`` only says PostgreSQL is there), stopped mid-use."""
    from tests.support import postgres

    with postgres.postgres_server() as url:
        secret_url = url.replace("postgresql://a2a@", "postgresql://a2a:s3cret-pw@")  # trust auth: any password

        st = PostgresStore(secret_url, pool_timeout=2.0)  # a call waits at most that long for a connection
        st.append(NewEvent(payload=payload(0), task_id="t"))
        _stop(url)
        with pytest.raises(ConnectionLost) as info:
            st.append(NewEvent(payload=payload(1), task_id="t"))
        message = str(info.value)
        assert "lost the connection to" in message and "127.0.0.1" in message
        assert "s3cret-pw" not in message and "\n" not in message
        with pytest.raises(ConnectionLost, match="lost the connection to"):  # the pool has none left to give
            list(st.read_from(0))


def _stop(url: str) -> None:
    """Stop the server behind ``url`` at once (as its owner when we are root)."""
    import psycopg

    from tests.support.postgres import _bin

    with psycopg.connect(url, autocommit=True) as conn:
        data = conn.execute("SHOW data_directory").fetchone()[0]  # type: ignore[index]
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run(
        [*as_user, _bin("pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"], check=True, capture_output=True
    )
