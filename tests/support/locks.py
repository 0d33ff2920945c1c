"""Another process holding a SQLite log's write lock: what an import, a rebuild or another
recorder does to every other writer of the same file for as long as its transaction lasts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_HOLDER = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()  # until the test closes our stdin
conn.execute("ROLLBACK")
"""


@contextmanager
def write_lock_held(path: str | Path) -> Iterator[None]:
    """A second process (real sqlite3) in a write transaction on ``path`` until the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def wait_for_a_lock_waiter(timeout: float = 30) -> int:
    """Return once a thread of this process waits for a SQLite log's write lock (in
    ``store.write_lock.begin_immediate``, waiting): the moment a test sends the request that must
    not wait behind it. A poll of the threads' stacks, not a sleep standing in for the condition.
    Returns the waiting thread's ident (which thread waits is part of some promises)."""
    where = os.path.join("store", "write_lock.py")
    deadline = time.monotonic() + timeout
    while True:
        for ident, frame in sys._current_frames().items():
            f = frame
            while f is not None:
                code = f.f_code
                if code.co_name == "begin_immediate" and code.co_filename.endswith(where) and f.f_locals.get("wait"):
                    return ident
                f = f.f_back
        assert time.monotonic() < deadline, "no thread waited for the log's lock"
        time.sleep(0.005)
