"""Issue 36, item 3: a client that reads slowly, or not at all, cannot grow the proxy's memory.

A stream's buffer is bounded (``--stream-buffer``): while a client is that far behind, the proxy
stops reading the agent (back-pressure through the sockets); past ``--slow-client-timeout`` the
client's stream is closed with a local note and the rest of the answer is read and recorded
(write-ahead as ever). The proxy is the installed ``a2a-tape`` in a subprocess, the agent a real
a2a-sdk one streaming large events as fast as it can (``big N SIZE``).

The client is a raw socket: it sends its request, reads the answer's head and then nothing, with
a small receive buffer. An HTTP client library would read on into buffers of its own (or stop the
connection), so "a client that stops reading" would not be what the proxy sees. The memory figures
are in benchmarks/bench_memory.py; here, the behaviour.
"""

from __future__ import annotations

import socket
import time

import pytest

from a2a_tape import store
from tests.conftest import running_sdk_agent
from tests.oracles.tape import running
from tests.recorder.proxy.conftest import send_body
from tests.support.slow_client import stalled_client

EVENTS = 24
SIZE = 1 << 20  # 1 MiB of text per event
BUFFER = 1 << 20


def _proxy(agent_url: str, db, log, *extra: str):
    return running(
        ["proxy", agent_url, "--listen", "127.0.0.1:0", "--db", str(db), "--no-recover", "--quiet", *extra], log
    )


def _settled(db, timeout: float = 120.0) -> tuple[store.Exchange, list[store.StoredEvent]]:
    """The stream's exchange once its row is final (the recording complete), and its events."""
    deadline = time.monotonic() + timeout
    while True:
        with store.open_store(db, readonly=True) as st:
            rows = [ex for ex in st.exchanges() if ex.streaming]
            if rows and rows[0].ended_at is not None:
                return rows[0], st.read_exchange(rows[0].id) + st.read_task(rows[0].task_id or "")
        assert time.monotonic() < deadline, "the stream's recording never ended"
        time.sleep(0.05)  # polling the log for a condition, not a pause standing in for one


def _read_rest(sock: socket.socket) -> bytes:
    out = bytearray()
    while chunk := sock.recv(1 << 16):
        out += chunk
    return bytes(out)


@pytest.mark.parametrize("idempotency", ["on", "off"], ids=["keyed", "unkeyed"])
def test_a_client_that_stops_reading_is_dropped_with_a_note_and_the_recording_completes(tmp_path, idempotency):
    db = tmp_path / "slow.db"
    body, headers = send_body(f"big {EVENTS} {SIZE}", message_id=f"m-slow-{idempotency}")
    with (
        running_sdk_agent() as agent,
        _proxy(
            agent.url,
            db,
            tmp_path / "proxy.log",
            "--stream-buffer",
            str(BUFFER),
            "--slow-client-timeout",
            "1",
            "--idempotency",
            idempotency,
        ) as p,
    ):
        sock, head = stalled_client(p.url, body, headers)
        with sock:
            assert head.startswith(b"HTTP/1.1 200")
            ex, events = _settled(db)  # the proxy read the agent to the end without the client
            rest = _read_rest(sock)  # the client reads again: what the sockets held, then the close
        said = p.stderr()
    assert ex.outcome == "closed", said
    chunks = [e for e in events if b"chunk-" in bytes(e.payload) and e.origin != "local"]
    assert len({e.position for e in chunks}) == EVENTS  # every event is in the log
    notes = [bytes(e.payload) for e in events if e.origin == "local"]
    assert any(b"client-too-slow" in n and b"--stream-buffer" in n for n in notes), notes
    assert rest.count(b"chunk-") < EVENTS  # its stream was closed part way ...
    assert not rest.endswith(b"0\r\n\r\n")  # ... cut, not ended as if the agent finished
    assert "Traceback" not in said, said


def test_a_client_that_reads_again_in_time_gets_every_event(tmp_path):
    db = tmp_path / "paused.db"
    body, headers = send_body(f"big {EVENTS} {SIZE}", message_id="m-paused")
    with (
        running_sdk_agent() as agent,
        _proxy(
            agent.url, db, tmp_path / "proxy.log", "--stream-buffer", str(BUFFER), "--slow-client-timeout", "600"
        ) as p,
    ):
        sock, _ = stalled_client(p.url, body, headers)
        with sock:
            deadline = time.monotonic() + 60
            while True:  # the stream is under way (and held back) before the client reads on
                with store.open_store(db, readonly=True) as st:
                    rows = [ex for ex in st.exchanges() if ex.streaming]
                    if rows and len(st.read_exchange(rows[0].id)) >= 3:
                        break
                assert time.monotonic() < deadline, "the stream never started"
                time.sleep(0.05)  # polling the log for a condition
            rest = _read_rest_until_end(sock)
        ex, events = _settled(db)
    assert ex.outcome == "closed"
    assert rest.count(b"chunk-") == EVENTS  # nothing dropped: back-pressure, not loss
    assert not any(e.origin == "local" and b"client-too-slow" in bytes(e.payload) for e in events)


def _read_rest_until_end(sock: socket.socket) -> bytes:
    """Read a chunked answer to its last chunk (the proxy keeps the connection open after it)."""
    out = bytearray()
    while not out.endswith(b"\r\n0\r\n\r\n"):
        chunk = sock.recv(1 << 16)
        assert chunk, "the proxy closed the stream before its end"
        out += chunk
    return bytes(out)
