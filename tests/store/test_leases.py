"""Whether the holder of a lease or a marker still runs: one rule (store/leases.py).

``fold.projection`` and ``recorder.recovery`` each had one, and they disagreed about our own
pid: the projection took any name with our pid for a dead holder (a live rebuild in another
thread of this process was reset under its feet), recovery took it for a live one (the mark of a
proxy that died in an earlier process given the same pid, a container's pid 1 say, blocked
``a2a-tape recover`` for ever). A name is alive while the process that issued it holds it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from a2a_tape.store.leases import new_owner, owner_alive, release_owner

HOST = socket.gethostname()


def test_a_name_of_ours_is_alive_until_released():
    name = new_owner()
    assert name.startswith(f"{HOST}:{os.getpid()}:")
    assert owner_alive(name)
    release_owner(name)
    assert not owner_alive(name)


def test_a_name_with_our_pid_that_we_never_issued_was_left_by_an_earlier_process():
    assert not owner_alive(f"{HOST}:{os.getpid()}:deadbeef")  # the earlier holder of our pid
    assert not owner_alive(f"{HOST}:{os.getpid()}")  # the projection's former shape, too


def test_another_process_is_alive_while_it_runs():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert owner_alive(f"{HOST}:{child.pid}:n")
    finally:
        child.kill()
        child.wait()
    assert not owner_alive(f"{HOST}:{child.pid}:n")


@pytest.mark.parametrize(
    "name, alive",
    [
        ("another-host.example:1:x", True),  # nothing here can tell: the lease's expiry frees it
        (f"{HOST}:not-a-pid:x", True),  # a name we cannot read: never taken over early
        (f"{HOST}::x", True),
        (f"{HOST}:0:x", False),  # no process has pid 0
        (f"{HOST}:{2**70}:x", False),  # nor a pid past the largest (os.kill raised OverflowError)
    ],
)
def test_names_we_cannot_check(name, alive):
    assert owner_alive(name) is alive
