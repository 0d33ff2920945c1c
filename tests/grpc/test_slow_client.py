"""Issue 36, item 3, the gRPC side: a client that stops reading cannot grow the gRPC proxy's memory.

The gRPC relay holds a call's messages as the HTTP relay holds a stream's items
(``--stream-buffer``): while the client is that far behind the proxy stops reading the agent, and
past ``--slow-client-timeout`` the call ends RESOURCE_EXHAUSTED with a local note while the rest of
the answer is recorded. The proxy is the installed ``a2a-tape proxy --grpc-listen``, the agent a real
a2a-sdk one streaming 1 MiB messages as fast as it can, the client grpc.aio: it stops reading after
its first message (its event loop held in ``after_each``: gRPC's flow control stops the proxy's
writes) until the recording has ended, then reads what is left.
"""

from __future__ import annotations

import time

import pytest

from a2a_tape import store
from tests.grpc.clients import raw_call, send_request
from tests.grpc.test_cli import SCRIPT
from tests.grpc.test_isolation import _grpc_proxy

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")
EVENTS = 24


def _recording_ended(db, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with store.open_store(db, readonly=True) as st:
            if any(ex.streaming and ex.ended_at is not None for ex in st.exchanges()):
                return
        assert time.monotonic() < deadline, "the call's recording never ended"
        time.sleep(0.05)  # polling the log for a condition


def test_a_grpc_client_that_stops_reading_is_ended_with_a_note_and_the_recording_completes(grpc_agent, tmp_path):
    db = tmp_path / "slow.db"
    req = send_request(f"big {EVENTS} {1 << 20}", "m-slow-grpc")
    extra = ("--stream-buffer", str(1 << 20), "--slow-client-timeout", "1")
    with _grpc_proxy(grpc_agent.url, db, *extra) as target:

        def stop_reading(k: int) -> None:
            if k == 1:  # the client's loop is held: it reads nothing until the recording is done
                _recording_ended(db)

        got = raw_call(
            target,
            "SendStreamingMessage",
            req,
            streaming=True,
            metadata=(("a2a-version", "1.0"),),
            timeout=120,
            after_each=stop_reading,
        )
    assert got.code == "RESOURCE_EXHAUSTED", (got.code, got.details)
    assert "--slow-client-timeout" in got.details
    assert len(got.messages) < EVENTS  # its call was ended part way
    with store.open_store(db, readonly=True) as st:
        (ex,) = [e for e in st.exchanges() if e.streaming]
        events = st.read_exchange(ex.id)
    assert ex.outcome == "closed"
    assert sum(b"chunk-" in bytes(e.payload) for e in events if e.origin != "local") == EVENTS  # all recorded
    assert any(e.origin == "local" and b"client-too-slow" in bytes(e.payload) for e in events)
