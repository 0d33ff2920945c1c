"""Waiting for the log's write lock, or not: the one place both backends take it from.

``Store.without_waiting`` sets a flag for one thread (:class:`NoWait`) that both backends read where
a write transaction begins: SQLite tries ``BEGIN IMMEDIATE`` once instead of waiting for the lock,
PostgreSQL gives its transaction a 1 ms ``lock_timeout`` and takes a pooled connection only if one
is free; either raises :class:`WouldWait` before writing anything.

When SQLite does wait (:func:`begin_immediate`), the wait is ours, in short sleeps, not SQLite's
busy handler: a Ctrl-C (or any signal) is handled within one sleep, where a wait inside SQLite's C
code held it off for the whole busy timeout; asyncio's Ctrl-C, which only cancels the main task,
ends it too (:func:`stop_if_cancelled`). The store's own lock is let go while it sleeps, so this
process's other threads (an event loop's reads) go on.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from a2a_tape.store.driver_errors import translate
from a2a_tape.store.errors import DatabaseLocked, WouldWait

MAX_PAUSE = 0.05  # seconds: the longest sleep between two tries for another writer's lock


class NoWait:
    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def on(self) -> bool:
        """Set in this thread (by :meth:`block`)?"""
        return bool(getattr(self._local, "on", False))

    @contextmanager
    def block(self) -> Iterator[None]:
        """The flag set in this thread until the block ends (nested blocks keep it set)."""
        before = self.on
        self._local.on = True
        try:
            yield
        finally:
            self._local.on = before


def begin_immediate(
    conn: sqlite3.Connection, lock: threading.RLock, location: str, busy_timeout: float | None, *, wait: bool
) -> None:
    """``BEGIN IMMEDIATE`` on ``conn``, called holding ``lock`` (the store's): waits for another
    connection's write lock up to ``busy_timeout`` (DatabaseLocked after it), or not at all
    (``wait=False``: WouldWait), letting ``lock`` go while it sleeps."""
    deadline = time.monotonic() + (busy_timeout or 0)
    pause = 0.001
    while True:
        busy = _try_begin(conn, location, busy_timeout)
        if busy is None:
            return
        if not wait:
            raise WouldWait(f"{location} is being written by another connection")
        left = deadline - time.monotonic()
        if left <= 0:
            raise translate(busy, location, busy_timeout) or busy
        lock.release()
        try:
            time.sleep(min(pause, left))
            stop_if_cancelled()
        finally:
            lock.acquire()
        pause = min(pause * 2, MAX_PAUSE)


def _try_begin(conn: sqlite3.Connection, location: str, busy_timeout: float | None) -> sqlite3.OperationalError | None:
    """One ``BEGIN IMMEDIATE`` with no busy wait; the error when another connection writes."""
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if isinstance(translate(exc, location, 0), DatabaseLocked):
            return exc
        raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {round((busy_timeout or 0) * 1000)}")
    return None


def stop_if_cancelled() -> None:
    """Leave a wait for the lock when the asyncio task it blocks was cancelled meanwhile: asyncio's
    Ctrl-C handler (``asyncio.run``) cancels the main task from the signal handler, which runs
    between two of our sleeps, and expects the task to stop at its next await; a loop blocked in
    this wait has none, so the cancellation is raised here. On a worker thread of anyio's (a
    commit sent off the loop, ``record --durability full``), the task that counts is the loop's
    root task: the one Ctrl-C cancels; the task waiting for the thread cannot stop before the
    thread does. Without a running loop a Ctrl-C is a KeyboardInterrupt already."""
    aio = sys.modules.get("asyncio")
    if aio is None:
        return
    try:
        task = aio.current_task()
    except RuntimeError:  # no loop in this thread: a worker thread's loop's root task, if any
        task = getattr(threading.current_thread(), "root_task", None)
    if task is not None and task.cancelling():
        raise aio.CancelledError("cancelled while waiting for the log's write lock")
