"""Issue 36, item 6: every server of ours (serve, proxy, ui) drops a client that sends half a
request head and stalls, after ``--head-timeout`` seconds (recorder/listen.py), so a local process
cannot hold its file descriptors for ever; meanwhile the server answers others.

uvicorn bounds a head's size, not its time, and its keep-alive timer stops at a connection's first
byte: before, each such socket stayed open as long as the client wanted. The servers are the
installed ``a2a-tape`` in a subprocess; the waits are on each socket's EOF, with a deadline.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import h11
import httpx
import pytest

from tests.conftest import running_sdk_agent

SCRIPT = Path(sys.executable).with_name("a2a-tape")
TAPE = Path(__file__).parents[2] / "recordings" / "sdk-v10-stream.jsonl"
BOUND = 1.0  # --head-timeout in these tests
SLACK = 10.0  # what a loaded machine may add to it before the close is seen
STALLED = 24  # clients that send half a head, then nothing
HALF_HEAD = b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: "
_URL = re.compile(r"http://127\.0\.0\.1:\d+")


@contextlib.contextmanager
def started(kind: str, db: Path) -> Iterator[str]:
    """``a2a-tape KIND ... --head-timeout BOUND`` on 127.0.0.1:0; yields its base URL."""
    with contextlib.ExitStack() as stack:
        common = ["--listen", "127.0.0.1:0", "--head-timeout", str(BOUND), "--db", str(db)]
        if kind == "proxy":
            agent = stack.enter_context(running_sdk_agent())
            args = ["proxy", agent.url, "--no-recover", *common]
        elif kind == "ui":
            args = ["ui", "--no-open", *common]
        else:
            args = ["serve", *common]
        proc = subprocess.Popen([str(SCRIPT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stack.callback(proc.wait, 20)
        stack.callback(proc.terminate)
        stream = proc.stdout if kind == "ui" else proc.stderr  # the ui prints its address on stdout
        assert stream is not None
        line = stream.readline()
        found = _URL.search(line)
        assert found, f"a2a-tape {kind} did not start: {line!r}"
        yield found.group(0)


def _address(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("http://").rpartition(":")
    return host, int(port)


def _closed_by(sock: socket.socket, deadline: float) -> bool:
    """True when the server closes ``sock`` (EOF) before ``deadline`` (time.monotonic)."""
    sock.settimeout(max(deadline - time.monotonic(), 0.01))
    try:
        while sock.recv(4096):  # an answer (none is expected) is read past, up to the EOF
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def _answered_then_half(address: tuple[str, int]) -> socket.socket:
    """A keep-alive connection that got a whole answer, then sent half of its next head."""
    sock = socket.create_connection(address, timeout=SLACK)
    conn = h11.Connection(h11.CLIENT)
    head = h11.Request(method="GET", target="/.well-known/agent-card.json", headers=[("Host", "127.0.0.1")])
    sock.sendall(conn.send(head) + conn.send(h11.EndOfMessage()))
    while not isinstance(event := conn.next_event(), h11.EndOfMessage):
        if event is h11.NEED_DATA:
            conn.receive_data(sock.recv(65536))
    sock.sendall(HALF_HEAD)
    return sock


@pytest.fixture(scope="module")
def tape_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("heads") / "tape.db"
    r = subprocess.run([str(SCRIPT), "import", str(TAPE), "--db", str(db)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return db


@pytest.mark.parametrize("kind", ["serve", "proxy", "ui"])
def test_a_half_sent_request_head_is_dropped_within_the_bound(kind, tape_db, tmp_path):
    db = tmp_path / "proxy.db" if kind == "proxy" else tape_db
    with started(kind, db) as url, contextlib.ExitStack() as sockets:
        address = _address(url)
        stalled = []
        for _ in range(STALLED):
            sock = sockets.enter_context(socket.create_connection(address, timeout=SLACK))
            sock.sendall(HALF_HEAD)
            stalled.append(sock)
        stalled.append(sockets.enter_context(_answered_then_half(address)))
        silent = sockets.enter_context(socket.create_connection(address, timeout=SLACK))  # connects, sends nothing
        stalled.append(silent)
        # the stalled ones hold no worker: the server answers at once (the ui answers 404 outside its
        # random path prefix: an answer all the same)
        answered = (404,) if kind == "ui" else (200, 401)
        assert httpx.get(url + "/.well-known/agent-card.json", timeout=SLACK).status_code in answered
        deadline = time.monotonic() + BOUND + SLACK
        kept = [n for n, sock in enumerate(stalled) if not _closed_by(sock, deadline)]
        assert not kept, f"{len(kept)} of {len(stalled)} stalled connections still open after {BOUND + SLACK:g} s"
        # and it still answers once they are gone
        assert httpx.get(url + "/.well-known/agent-card.json", timeout=SLACK).status_code in answered


def test_the_head_timeout_is_checked_before_anything_starts(tape_db):
    r = subprocess.run(
        [str(SCRIPT), "serve", "--db", str(tape_db), "--head-timeout", "0"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "--head-timeout" in r.stderr
