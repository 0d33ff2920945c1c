"""The log as it grows, for every open page: one follower, many listeners.

One thread waits on the log with the store's own wait (``show --follow``'s: LISTEN/NOTIFY on
PostgreSQL, SQLite's data version with a short back-off), brings the task projection up to date,
and wakes every page's event stream with the position its reads may go up to. A hundred open
pages cost one waiting thread, not a hundred; a page's stream reads only what is new for it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from a2a_tape.store import Following, StoreError

WAIT = 0.5
"""Seconds one wait on the log lasts before the follower checks whether it should stop."""


class Follower:
    """Follows the log for the app's streams. ``keep()`` brings what the pages read up to date
    (the task projection) and returns the position it covers; without it, the log's last position."""

    def __init__(self, store: Following, keep: Callable[[], int] | None = None) -> None:
        self.store = store
        self.keep = keep
        self.position = store.last_position() if keep is None else keep()
        self.problem: str | None = None  # why the log could not be read, the last time it could not
        self.closing = False  # the server is stopping: every stream ends
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._thread = threading.Thread(target=self._run, name="a2a-tape-ui-follower", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=WAIT * 4)

    def _run(self) -> None:
        seen = self.position
        while not self._stop.is_set():
            try:
                if not self.store.wait_for_events(seen, WAIT):
                    continue
                position = self.keep() if self.keep is not None else self.store.last_position()
                self.problem = None
            except StoreError as exc:  # the log is busy or gone for a moment: say so, try again
                self.problem = str(exc)
                self._stop.wait(WAIT)
                continue
            if position > seen:
                seen = position
                assert self._loop is not None
                try:
                    self._loop.call_soon_threadsafe(self._publish, position)
                except RuntimeError:  # the loop closed: the server is stopping
                    return

    def close_streams(self) -> None:
        """End every stream (the server is stopping: it would otherwise wait for them). Safe to
        call from any thread, a signal handler's included."""
        self.closing = True
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._publish, self.position)

    def _publish(self, position: int) -> None:
        self.position = max(self.position, position)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def past(self, after: int, keepalive: float) -> int:
        """The position the log's readers may go up to, once it is past ``after`` (or as it is
        after ``keepalive`` seconds: time for the stream to say it is alive)."""
        deadline = time.monotonic() + keepalive
        while self.position <= after and not self.closing:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                break
        return self.position


def sse(event: str, data: str, event_id: int | None = None) -> bytes:
    """One server-sent event: ``data`` on as many ``data:`` lines as it has lines."""
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines += [f"data: {line}" for line in data.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


KEEPALIVE = b": keep-alive\n\n"
"""A comment line: keeps proxies and the browser from timing a quiet stream out, and finds a closed one."""
