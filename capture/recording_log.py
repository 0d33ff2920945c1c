"""The log and the redaction an in-process recorder (``RecordingTransport``, ``RecordingInterceptor``)
records with: one rule for what ``db`` and ``redact`` mean, whichever binding records."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import NamedTuple

from a2a_tape import store
from a2a_tape.store.redact import Redactor, build_redactor


class RecordingLog(NamedTuple):
    store: store.Store
    owned: bool  # opened here from a path: the recorder closes it
    redactor: Redactor


def recording_log(
    db: str | os.PathLike[str] | store.Store,
    *,
    durability: store.Durability,
    redactor: Redactor | None,
    redact: Iterable[str],
    who: str,
) -> RecordingLog:
    """``db``: a path (opened here; ``durability`` "normal" by default: WAL, no fsync per commit, so
    every event survives a crash of this process, "full" a power loss too) or an open store (the
    caller's). ``redact``: header names and JSON paths as ``--redact`` takes them, beside the
    project's ``[tool.a2a-tape]``; or a ``redactor`` already built, not both."""
    extra = list(redact)
    if redactor is not None and extra:
        raise TypeError(f"{who} takes redactor= or redact=, not both")
    redactor = redactor or build_redactor(extra)
    if isinstance(db, (str, os.PathLike)):
        return RecordingLog(store.open_store(db, durability=durability), True, redactor)
    return RecordingLog(db, False, redactor)
