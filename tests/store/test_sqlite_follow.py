"""``wait_for_events`` on SQLite: woken by appends of other connections AND of the same store.

``PRAGMA data_version`` only changes for commits of *other* connections; an append made through
the very store object that waits (the group-commit writer's worker thread, say) must wake it too.
The waiter's first poll is made observable by wrapping the module's ``time`` (no sleeps as sync).
"""

from __future__ import annotations

import threading
import time as real_time

import pytest

import a2a_tape.store.sqlite as sqlite_mod
from a2a_tape import store
from a2a_tape.store import NewEvent


class _PollSignal:
    """``time`` for store.sqlite: the first ``sleep`` says 'the waiter has looked once'."""

    def __init__(self) -> None:
        self.polling = threading.Event()

    def sleep(self, s: float) -> None:
        self.polling.set()
        real_time.sleep(s)

    def __getattr__(self, name):
        return getattr(real_time, name)


@pytest.mark.parametrize("writer", ["same store", "other connection"])
def test_wait_for_events_wakes_on_an_append(tmp_path, monkeypatch, writer):
    signal = _PollSignal()
    monkeypatch.setattr(sqlite_mod, "time", signal)
    st = store.open_store(tmp_path / "f.db")
    st.append(NewEvent(payload=b"first", task_id="t"))
    other = st if writer == "same store" else store.open_store(tmp_path / "f.db")

    def append_once_polling() -> None:
        if signal.polling.wait(10):
            other.append(NewEvent(payload=b"second", task_id="t"))

    t = threading.Thread(target=append_once_polling)
    t.start()
    started = real_time.monotonic()
    woke = st.wait_for_events(1, timeout=10)
    t.join(10)
    assert woke is True
    assert real_time.monotonic() - started < 5  # woken by the append, not by the timeout
    assert st.last_position() == 2
    st.close()
    if other is not st:
        other.close()
