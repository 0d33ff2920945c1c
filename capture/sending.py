"""What the recorder's paths import to talk upstream, in one place, and the log's faults as errors.

The capture core (begin -> head -> body bytes -> SSE items -> redaction -> append plan ->
outcome) is :mod:`capture.exchange`; its HTTP side (timeouts on connect, first byte and reads,
redirects named and never followed, decoded body bytes, transport errors as one line) is
:mod:`wire.http_client`, where serve's recording modes reach it too; the recorded-upstream client
made of them is :mod:`capture.upstream_call`. This module re-exports them for ``recorder/`` and
adds :func:`store_fault`: a driver error of the log (disk full, locked, read-only) as the
:class:`store.StoreError` subclass that names it, so commands exit 2 with one line.
"""

from __future__ import annotations

import errno
import sqlite3

from a2a_tape.capture.exchange import CUT, OUTCOMES, Capture, Outcome, TaskContext, plan_events
from a2a_tape.store.errors import DatabaseLocked, DiskFull, ReadOnlyStore, StoreError
from a2a_tape.wire.codings import DecodingError
from a2a_tape.wire.http_client import (
    FirstByteTimeout,
    Timeouts,
    body_chunks,
    describe,
    redirect_message,
    send,
)

__all__ = [
    "CUT",
    "OUTCOMES",
    "Capture",
    "DecodingError",
    "FirstByteTimeout",
    "Outcome",
    "TaskContext",
    "Timeouts",
    "body_chunks",
    "describe",
    "plan_events",
    "redirect_message",
    "send",
    "store_fault",
]


def store_fault(exc: BaseException) -> StoreError | None:
    """The log cannot be written: the :class:`store.StoreError` naming why (None: not a fault
    of the log). Our own store errors pass as they are; driver errors are classified."""
    if isinstance(exc, StoreError):
        return exc
    msg = str(exc).lower()
    if isinstance(exc, sqlite3.Error):
        if "full" in msg:
            return DiskFull(f"the log cannot be written: the disk is full ({exc})")
        if "locked" in msg or "busy" in msg:
            return DatabaseLocked(f"the log is locked by another process ({exc})")
        if "readonly" in msg or "read-only" in msg:
            return ReadOnlyStore(f"the log is on read-only storage ({exc})")
        return StoreError(f"the log cannot be written: {type(exc).__name__}: {exc}")
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"the log cannot be written: the disk is full ({exc.strerror})")
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return ReadOnlyStore(f"the log is on read-only storage ({exc.strerror})")
    return None
