"""Files we create are owner-only: a log, a tape or an export holds recorded payloads.

Each file a2a-tape creates (an SQLite database, whose ``-wal`` and ``-shm`` files SQLite gives the
database's own mode; a tape written back; an export) is created with mode ``0600``; the user's
umask still applies, so a stricter one wins. A file that already exists keeps the mode its owner
gave it.
"""

from __future__ import annotations

import os
from typing import IO

PRIVATE = 0o600


def create_private(path: str | os.PathLike[str]) -> bool:
    """Create ``path`` empty and owner-only unless it exists; True when this call created it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), PRIVATE)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def open_private(path: str | os.PathLike[str]) -> IO[bytes]:
    """``open(path, "wb")``, the file created owner-only when it is new."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), PRIVATE)
    return os.fdopen(fd, "wb")


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """``Path(path).write_bytes(data)``, the file created owner-only when it is new."""
    with open_private(path) as fh:
        fh.write(data)
