"""The capture core's HTTP side: how every recording path of ``recorder/`` talks upstream.

The core itself (begin -> head -> body bytes -> SSE items -> redaction -> append plan ->
outcome) is :mod:`store.capture`, re-exported here: it needs nothing above the store, so serve's
recording modes (``replay/serve/forward.py``) use the same one. This module adds what needs httpx:

- :class:`Timeouts`: connect, first byte (the response head) and read timeouts for every
  upstream call; :func:`send` enforces them, so an agent that accepts the connection and never
  answers cannot hang a caller past the timeouts it was given (httpx alone waits for the head
  with the read timeout, and streams are read with none);
- redirects are not followed: :func:`redirect_message` says where the agent points instead of
  blaming the host that answered;
- :func:`body_chunks`: the decoded body bytes of a response (the raw chunks when there is no
  content coding: the record hot path), a coding that does not decode raising
  :class:`replay.codings.DecodingError` with a readable reason;
- :func:`describe`: a transport error as one readable line, redacted;
- :func:`store_fault`: a driver error of the log (disk full, locked, read-only) as the
  :class:`store.StoreError` subclass that names it, so commands exit 2 with one line.

Usage, for a path that reads a stream::

    cap = Capture(redactor)
    ex_id = st.begin_exchange(cap.request(url=..., rpc_method=..., dialect=..., streaming=True, headers=h, body=b))
    cap.exchange_id = ex_id
    resp = await send(http, http.build_request("POST", url, headers=h, content=b), Timeouts(read=None))
    cap.head(resp.status_code, resp.headers.get("content-type"), resp.headers.multi_items())
    async for chunk in body_chunks(resp):
        items = cap.feed(chunk)             # exact bytes; item.raw is what to pass on
        new, decoded = cap.events(items)    # redacted rows, task ids learnt
        st.append_batch(new)                # the caller's append (one transaction, a writer, ...)
    new, decoded = cap.events(cap.close())  # a cut last item is kept, marked incomplete
    st.update_exchange(ex_id, **cap.end("ok"))
"""

from __future__ import annotations

import errno
import sqlite3

from a2a_tape.replay.codings import DecodingError
from a2a_tape.replay.http import (
    FirstByteTimeout,
    Timeouts,
    body_chunks,
    describe,
    redirect_message,
    send,
)
from a2a_tape.store.capture import CUT, OUTCOMES, Capture, Outcome, TaskContext, plan_events
from a2a_tape.store.errors import DatabaseLocked, DiskFull, ReadOnlyStore, StoreError

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
