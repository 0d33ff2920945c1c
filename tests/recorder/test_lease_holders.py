"""Every holder of a lease or marker in the log is judged by the one rule of store/leases.py:
the running proxy's mark (``recover`` waits for a live proxy) and a projection's rebuild marker
(``tasks`` waits for a live rebuild), with the same answer for the same holder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from a2a_tape import store
from a2a_tape.fold.projection import ProjectionBusy, Projector
from a2a_tape.recorder.recovery import PROXY_KEY, running_proxy
from a2a_tape.store.leases import new_owner, release_owner

HOST = socket.gethostname()


def _released() -> str:
    name = new_owner()
    release_owner(name)
    return name


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


HOLDERS: dict[str, tuple[Callable[..., str], bool]] = {
    "issued here": (lambda child: new_owner(), True),
    "released here": (lambda child: _released(), False),
    "our pid, an earlier process's": (lambda child: f"{HOST}:{os.getpid()}:0ld", False),
    "a live process": (lambda child: f"{HOST}:{child.pid}:n", True),
    "another host": (lambda child: "elsewhere.example:1:n", True),
}


def proxy_blocks(st: store.Store, name: str) -> bool:
    st.set_meta(PROXY_KEY, name)
    return running_proxy(st) is not None


def rebuild_blocks(st: store.Store, name: str) -> bool:
    Projector(st).catch_up()  # the version marker is in place: only the rebuild marker decides
    st.set_meta("projection:tasks:rebuilding", name)
    try:
        Projector(st).catch_up()
    except ProjectionBusy:
        return True
    assert st.get_meta("projection:tasks:rebuilding") == ""  # a dead holder's marker is cleared
    return False


@pytest.mark.parametrize("check", [proxy_blocks, rebuild_blocks], ids=["proxy mark", "rebuild marker"])
@pytest.mark.parametrize("holder", HOLDERS)
def test_a_holder_blocks_exactly_while_it_is_alive(db_path, child, check, holder):
    make, alive = HOLDERS[holder]
    with store.open_store(db_path) as st:
        assert check(st, make(child)) is alive


def test_the_recover_command_is_not_blocked_by_a_dead_proxy_that_had_our_pid(db_path):
    """The mark of a proxy that died in an earlier process given our pid (pids are reused)."""
    from typer.testing import CliRunner

    from a2a_tape.cli import app

    with store.open_store(db_path) as st:
        st.set_meta(PROXY_KEY, f"{HOST}:{os.getpid()}:0ld")
    r = CliRunner().invoke(app, ["recover", "--db", str(db_path), "--json"])
    assert r.exit_code == 0, r.stderr
