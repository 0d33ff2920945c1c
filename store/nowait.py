"""The flag behind ``Store.without_waiting``: set for one thread, for the writes it begins in a block.

Both backends keep one (:class:`NoWait`) and read ``on`` where a write transaction begins: SQLite
tries ``BEGIN IMMEDIATE`` once instead of waiting for the lock, PostgreSQL gives its transaction a
1 ms ``lock_timeout`` and takes a pooled connection only if one is free.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


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
