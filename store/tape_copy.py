"""A tape read as a log: its recordings imported into a private temporary database.

Everything that reads a log (the inspection commands, the replay server's library) reads a JSONL
tape (docs/tape-format.md) the same way: :class:`TapeCopy` imports it into an SQLite database of
its own, in a new owner-only temporary directory, and removes that directory when it is closed.
The tape itself is only read; what a reader caches (projections) or records goes into the copy,
and reaches the tape only when a writer asks for it (``replay.serve.write_back``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from a2a_tape.store.sqlite import SqliteStore
from a2a_tape.store.tape import import_tape

TAPE_SUFFIXES = (".jsonl", ".tape")


def is_tape(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a tape rather than a database: by its suffix, or (a file of another
    name) by its first byte, ``{`` (a database file starts ``SQLite format 3``)."""
    path = Path(path)
    if path.suffix in TAPE_SUFFIXES:
        return True
    try:
        with path.open("rb") as fh:
            return fh.read(1) == b"{"
    except OSError:
        return False


class TapeCopy(SqliteStore):
    """The recordings of the tape at ``tape`` (none: an empty log, for a tape still to be
    written) in a temporary database; :meth:`close` removes it. A bad tape raises
    :class:`~a2a_tape.store.tape.TapeError` and leaves nothing behind.

    ``location`` is the copy's (a process that opens it again, a parallel rebuild's worker,
    finds the same log); :attr:`tape` is where it came from.
    """

    def __init__(self, tape: str | os.PathLike[str] | None) -> None:
        self.tape = None if tape is None else Path(tape)
        self._tempdir: str | None = tempfile.mkdtemp(prefix="a2a-tape-")  # owner-only (mkdtemp)
        try:
            super().__init__(Path(self._tempdir) / "tape.db", durability="normal")
        except BaseException:
            self._remove()
            raise
        if self.tape is None:
            return
        try:
            with self.tape.open("rb") as fh:
                import_tape(self, fh)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._remove()

    def _remove(self) -> None:
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None
