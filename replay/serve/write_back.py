"""Writing what a replay recorded back into its tape, when several writers share the tape.

A tape (a JSONL file) opened by ``serve``, a ``ReplayTransport`` or the pytest plugin in a record
mode is imported into a private database; what the run records goes there, and at the end it is
written back. Several such writers may share one tape (pytest-xdist workers, two transports, two
``serve`` processes): each one's write-back must keep what the others wrote meanwhile. So the
write-back

1. takes an exclusive lock (``flock`` on the directory that holds the tape: the tape file itself
   is replaced, so it cannot carry the lock; the lock goes with the process if it dies);
2. reads the tape *as it is now* into a fresh database and imports into it only what this run
   recorded (the exchanges and events after the mark taken when the tape was read), so the others'
   recordings are kept and nothing of this run is written twice. An exchange of this run the tape
   refuses (its task id is in the tape under another context: one task, one context) is left out
   alone, the others kept; :func:`write_back` returns one line per exchange left out, for the
   caller to say;
3. writes the merged tape to a unique temporary file beside it (the file's own mode kept, owner-only
   for a new tape), flushes it to disk and renames it over the tape: a reader sees the old tape or
   the new one, never half of one. A symlinked tape stays a symlink: its target is what is replaced.

``verify --update`` of a tape writes the tape whole instead (:func:`write_whole`): its live runs are
runs of the tape's own tasks, named by the live agent's ids, which a merge would refuse (one task,
one context). It holds the same lock, writes the same way, and writes only over the tape it read:
a tape another writer changed meanwhile is left as it is (:class:`TapeChanged`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec

from a2a_tape.store import Recordings, RecordingStore, open_store
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.records import Exchange, StoredEvent
from a2a_tape.store.tape import TapeError, TapeHeader, event_line, exchange_line, import_tape, write_tape


class Mark(msgspec.Struct, frozen=True):
    """Where a run's own recordings begin in its private database: after the tape as it was read."""

    position: int
    exchange_id: int


def mark_of(store: Recordings) -> Mark:
    return Mark(store.last_position(), max((ex.id or 0 for ex in store.exchanges()), default=0))


def write_back(recorded: Recordings, target: Path, since: Mark) -> list[str]:
    """Merge what ``recorded`` holds after ``since`` into the tape at ``target`` (see the module);
    the lines naming what the tape refused (nothing: an empty list)."""
    real = Path(os.path.realpath(target))
    real.parent.mkdir(parents=True, exist_ok=True)
    with _locked(real.parent):
        work = tempfile.mkdtemp(prefix="a2a-tape-merge-")
        try:
            merged = open_store(Path(work) / "merged.db", durability="normal")
            try:
                if real.exists():
                    with real.open("rb") as fh:
                        import_tape(merged, fh)
                else:  # gone meanwhile: what this run read of it is written again, with the rest
                    since = Mark(0, 0)
                refused = _import_since(merged, recorded, since)
                _replace(real, merged)
            finally:
                merged.close()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return refused


def _import_since(merged: RecordingStore, recorded: Recordings, since: Mark) -> list[str]:
    """Import this run's recordings into ``merged``: at once, or, when the tape refuses some,
    one exchange at a time (each import is atomic), leaving out the ones refused."""
    try:
        import_tape(merged, _lines_since(recorded, since))
        return []
    except TapeError:
        pass
    refused: list[str] = []
    for group in _groups_since(recorded, since):
        try:
            import_tape(merged, _tape_lines(*group))
        except TapeError as exc:
            exchange = group[0][0] if group[0] else None
            what = f"exchange {exchange.id} ({exchange.rpc_method})" if exchange is not None else "events"
            refused.append(f"{what} not written back: {exc}")
    return refused


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the descriptor closes (the process dies too)
        yield
    finally:
        os.close(fd)


def _since(store: Recordings, since: Mark) -> tuple[list[Exchange], list[StoredEvent]]:
    """What was recorded after ``since``: its exchanges (and any earlier exchange one of its
    events arrived on: the import finds it again rather than adding it twice), and its events."""
    events = list(store.read_from(since.position))
    wanted = {ev.exchange_id for ev in events if ev.exchange_id is not None}
    exchanges = [ex for ex in store.exchanges() if (ex.id or 0) > since.exchange_id or ex.id in wanted]
    return exchanges, events


def _lines_since(store: Recordings, since: Mark) -> Iterator[bytes]:
    """A tape of what was recorded after ``since``."""
    return _tape_lines(*_since(store, since))


def _groups_since(store: Recordings, since: Mark) -> Iterator[tuple[list[Exchange], list[StoredEvent]]]:
    """What was recorded after ``since``, an exchange with its events at a time (events on no
    exchange last, together)."""
    exchanges, events = _since(store, since)
    by_exchange: dict[int | None, list[StoredEvent]] = {}
    for ev in events:
        by_exchange.setdefault(ev.exchange_id, []).append(ev)
    for ex in exchanges:
        yield [ex], by_exchange.pop(ex.id, [])
    loose = [ev for evs in by_exchange.values() for ev in evs]
    if loose:
        yield [], loose


def _tape_lines(exchanges: list[Exchange], events: list[StoredEvent]) -> Iterator[bytes]:
    encode = msgspec.json.encode
    yield encode(TapeHeader(a2a_tape=1, exchanges=len(exchanges), events=len(events))) + b"\n"
    for ex in exchanges:
        yield encode(exchange_line(ex)) + b"\n"
    for ev in events:
        yield encode(event_line(ev)) + b"\n"


class TapeStamp(msgspec.Struct, frozen=True):
    """Which version of a tape file was read: a rewrite goes only over that one."""

    inode: int
    size: int
    mtime_ns: int


class TapeChanged(A2ATapeError):
    """The tape is no longer the one that was read (another writer replaced or changed it)."""


def stamp_of(target: Path) -> TapeStamp:
    st = Path(os.path.realpath(target)).stat()
    return TapeStamp(st.st_ino, st.st_size, st.st_mtime_ns)


def write_whole(copy: Recordings, target: Path, read: TapeStamp, *, source: str) -> None:
    """Write ``copy`` (the tape as it was read, and what was recorded into it since) over the tape
    at ``target``, whole, atomically (see the module), if the tape is still the one ``read`` stamps;
    :class:`TapeChanged`, the tape left as it is, when it is not."""
    real = Path(os.path.realpath(target))
    with _locked(real.parent):
        try:
            now = stamp_of(real)
        except FileNotFoundError:
            raise TapeChanged(f"{target} was removed while it was read: not written") from None
        if now != read:
            raise TapeChanged(f"{target} was changed by another writer while it was read: not written")
        _replace(real, copy, source=source)


def _replace(real: Path, merged: Recordings, *, source: str = "a2a-tape replay") -> None:
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")  # 0600, unique
    try:
        with contextlib.suppress(FileNotFoundError):
            os.fchmod(fd, stat.S_IMODE(real.stat().st_mode))  # the tape's own mode, kept
        with os.fdopen(fd, "wb") as fh:
            write_tape(merged, fh, source=source)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
