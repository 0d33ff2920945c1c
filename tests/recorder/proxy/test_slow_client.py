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


def test_a_duplicate_arriving_after_the_first_items_left_memory_gets_the_whole_answer_with_its_own_id(tmp_path):
    """The first client stops reading (its relay held back, not dropped); once its stream passed the
    buffer a duplicate (same messageId, another JSON-RPC id) cannot read it from memory: it is answered
    from the log when the relay ends, every item with its own id."""
    import concurrent.futures

    import httpx
    import msgspec

    db = tmp_path / "late.db"
    body, headers = send_body(f"big {EVENTS} {SIZE}", message_id="m-late", rpc_id=1)
    again, _ = send_body(f"big {EVENTS} {SIZE}", message_id="m-late", rpc_id=2)
    with (
        running_sdk_agent() as agent,
        _proxy(
            agent.url, db, tmp_path / "proxy.log", "--stream-buffer", str(BUFFER), "--slow-client-timeout", "600"
        ) as p,
    ):
        sock, _ = stalled_client(p.url, body, headers)
        deadline = time.monotonic() + 60
        while True:  # the stream is past the buffer: its first items have left memory
            with store.open_store(db, readonly=True) as st:
                rows = [ex for ex in st.exchanges() if ex.streaming]
                if rows and sum(b"chunk-" in bytes(e.payload) for e in st.read_exchange(rows[0].id)) >= 3:
                    break
            assert time.monotonic() < deadline, "the stream never got past the buffer"
            time.sleep(0.05)  # polling the log for a condition

        def duplicate() -> bytes:
            with httpx.stream("POST", p.url, content=again, headers=headers, timeout=120) as r:
                return r.read()

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            late = pool.submit(duplicate)
            while len([ex for ex in _rows(db) if ex.streaming]) < 2:  # the duplicate is in
                assert time.monotonic() < deadline + 60, "the duplicate never arrived"
                time.sleep(0.05)  # polling the log for a condition
            sock.close()  # the first client goes: the relay reads on to the end
            got = late.result(timeout=120)
    items = [msgspec.json.decode(line[5:]) for line in got.splitlines() if line.startswith(b"data:")]
    assert sum("chunk-" in str(it) for it in items) == EVENTS  # the whole answer
    assert {it["id"] for it in items} == {2}  # each item answered to the duplicate's own id


def _rows(db) -> list[store.Exchange]:
    with store.open_store(db, readonly=True) as st:
        return st.exchanges()


def test_a_client_gone_before_its_answer_started_does_not_hold_the_relay_back(tmp_path):
    """A client that sends its request and closes before the answer's head: its place in the relay
    goes with its response, however early (the recording goes on at the agent's pace, no note; before, its place
    stayed and held the relay back until --slow-client-timeout)."""
    db = tmp_path / "gone.db"
    body, headers = send_body(f"big {EVENTS} {SIZE}", message_id="m-gone")
    with (
        running_sdk_agent() as agent,
        _proxy(
            agent.url, db, tmp_path / "proxy.log", "--stream-buffer", str(BUFFER), "--slow-client-timeout", "600"
        ) as p,
    ):
        port = int(p.url.rpartition(":")[2])
        with socket.create_connection(("127.0.0.1", port)) as sock:  # sends its request and goes, reading nothing
            head = f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n"
            head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            sock.sendall(head.encode() + b"\r\n" + body)
        ex, events = _settled(db, timeout=60)
    assert ex.outcome == "closed"
    assert len({e.position for e in events if b"chunk-" in bytes(e.payload) and e.origin != "local"}) == EVENTS
    assert not any(e.origin == "local" and b"client-too-slow" in bytes(e.payload) for e in events)
