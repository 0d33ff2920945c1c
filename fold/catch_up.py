"""What the log's derived indexes share (the search index, doctor's findings): a digest of the
code whose rules decide their rows, and the retry around a catch-up that another process may race.

Kept apart from :mod:`fold.projection` so a command that only searches does not import the fold.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType

from a2a_tape.store.errors import A2ATapeError, ReadOnlyStore


class ProjectionMoved(A2ATapeError):
    """Another process moved the projection's cursor while we folded."""


def code_digest(seed: bytes, modules: Iterable[ModuleType]) -> str:
    """A short digest of ``modules``' source files: rows made by other rules are made again."""
    h = hashlib.sha256(seed)
    for mod in modules:
        assert mod.__file__ is not None  # our own modules, loaded from their source files
        h.update(Path(mod.__file__).read_bytes())
    return h.hexdigest()[:16]


def catch_up_retrying(name: str, step: Callable[[], int]) -> int | None:
    """Run ``step`` (one catch-up from the cursor); when another process moved the cursor
    meanwhile, again from where it is now (five tries). None: the store cannot be written (a
    read-only file), the caller reads the log instead."""
    for _ in range(5):
        try:
            return step()
        except ProjectionMoved:
            continue  # another process indexed meanwhile: go on from its cursor
        except (sqlite3.OperationalError, ReadOnlyStore) as exc:
            if isinstance(exc, ReadOnlyStore) or "readonly" in str(exc) or "read-only" in str(exc):
                return None
            raise
    raise ProjectionMoved(f"projection '{name}' keeps moving (another process is writing it)")
