"""Round trip: record a live a2a-sdk agent with ``a2a-tape record``, serve it, record the replay
again with ``a2a-tape record``: the projections are equal and the data payloads are byte-identical
apart from the JSON-RPC ids. Plus the record modes against a live upstream."""

from __future__ import annotations

import concurrent.futures
import shutil
from pathlib import Path

import httpx
import msgspec
import pytest
from typer.testing import CliRunner

from a2a_tape import store
from a2a_tape.cli import app
from a2a_tape.fold.projection import encode_view, fold_events
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.server import create_app
from a2a_tape.replay.serve.transport import ReplayTransport
from a2a_tape.store import decode_item
from a2a_tape.wire.sse_frames import rewrite_id
from tests.conftest import running_sdk_agent
from tests.replay._record import headers_for, request_body
from tests.support.locks import wait_for_a_lock_waiter, write_lock_held
from tests.support.servers import serve_app

runner = CliRunner()
TAPE = Path(__file__).parents[1] / "data" / "chunk-agent.jsonl"
SESSIONS = [("hello", "1.0"), ("please ask me", "1.0"), ("hello in the old dialect", "0.3"), ("many 5", "0.3")]


def record_all(url: str, db: Path) -> None:
    for text, protocol in SESSIONS:
        res = runner.invoke(app, ["record", url, text, "--db", str(db), "--protocol", protocol, "--json"])
        assert res.exit_code in (0, 1), res.output  # 1: the task ended interrupted/failed, still recorded


def upstream_payloads(db: Path) -> list[bytes]:
    with store.open_store(db) as st:
        return [rewrite_id(ev.payload, 0) for ev in st.read_from(0) if ev.origin == "upstream"]


def views(db: Path) -> dict[str, bytes]:
    """The projection of every task, arrival wall-clock times aside (they are when we recorded)."""
    with store.open_store(db) as st:
        return {
            t: encode_view(msgspec.structs.replace(v, first_at=0.0, last_at=0.0))
            for t, v in fold_events(st.read_from(0)).items()
        }


def test_round_trip_record_serve_record(tmp_path):
    live, replayed = tmp_path / "live.db", tmp_path / "replayed.db"
    with running_sdk_agent() as agent:
        record_all(agent.url, live)
    lib = Library.open(live)
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            record_all(url, replayed)
    finally:
        lib.close()
    a, b = upstream_payloads(live), upstream_payloads(replayed)
    assert len(a) >= 4 * 3 + 5
    assert a == b  # byte for byte, ids aside
    va, vb = views(live), views(replayed)
    assert len(va) == 4 and va == vb


def test_new_episodes_records_unmatched_requests_and_replays_them_after(tmp_path):
    tape = tmp_path / "x.jsonl"
    shutil.copy(TAPE, tape)
    before = tape.read_bytes().count(b"\n")
    with running_sdk_agent() as agent:
        with httpx.Client(transport=ReplayTransport(tape, record_mode="new_episodes", upstream=agent.url)) as c:
            first = c.post(
                "http://replay.test/", content=request_body("stream", "1.0", text="many 2"), headers=headers_for("1.0")
            )
            second = c.post(
                "http://replay.test/",
                content=request_body("stream", "1.0", text="many 2", rpc_id=2),
                headers=headers_for("1.0"),
            )
            old = c.post(
                "http://replay.test/", content=request_body("stream", "1.0", text="hello"), headers=headers_for("1.0")
            )
        assert agent.executor.executions == 1  # the second one and 'hello' came from the recording
    for r in (first, second, old):
        assert r.headers["content-type"].startswith("text/event-stream")
    assert first.content.count(b"chunk-") == 2 and second.content.count(b"chunk-") == 2
    assert second.content.replace(b'"id": 2', b'"id": 1') == first.content
    # written back to the tape: replayable offline now
    assert tape.read_bytes().count(b"\n") > before
    with httpx.Client(transport=ReplayTransport(tape)) as c:
        again = c.post(
            "http://replay.test/", content=request_body("stream", "1.0", text="many 2"), headers=headers_for("1.0")
        )
    assert again.content == first.content


@pytest.mark.parametrize("mode, executions", [("all", 2), ("once", 1), ("none", 0)])
def test_record_modes_on_an_empty_database(db_path, mode, executions):
    store.open_store(db_path).close()
    with running_sdk_agent() as agent:
        lib = Library.open(db_path)
        try:
            engine = ReplayEngine(lib, record_mode=mode, upstream=agent.url)
            with httpx.Client(transport=ReplayTransport(engine=engine)) as c:
                replies = [
                    decode_item(
                        c.post(
                            "http://r.test/",
                            content=request_body("send", "1.0", text="hello"),
                            headers=headers_for("1.0"),
                        ).content
                    )
                    for _ in range(2)
                ]
        finally:
            lib.close()
        assert agent.executor.executions == executions
    if mode == "none":
        assert all(r.kind == "error" and r.body.code == -32099 for r in replies)
    else:
        assert all(r.kind == "task" and r.body.state == "completed" for r in replies)
        if mode == "once":  # recorded once, then replayed: the same task
            assert replies[0].task_id == replies[1].task_id


# A hand-written upstream (a real agent cannot be made to demand a token of our choosing and
# send bytes that are not UTF-8 on demand): a stream, only with the right bearer token.
UP_TOKEN = "Bearer up-s3cret-991"
ODD = b'{"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": {"taskId": "t-odd", "status": {"state": "TASK_STATE_WORKING"}}}} \xff\xfe'
DONE = (
    b'{"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t-odd","status":{"state":"TASK_STATE_COMPLETED"}}}}'
)


def _strict_upstream():
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    seen: list[dict[str, str]] = []

    async def rpc(request):
        seen.append(dict(request.headers))
        if request.headers.get("authorization") != UP_TOKEN:
            return JSONResponse({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "unauthorized"}}, 401)

        async def frames():
            yield b"data: " + ODD + b"\r\n\r\n"
            yield b": ping - keep-alive\r\n\r\n"
            yield b"data: " + DONE + b"\r\n\r\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(routes=[Route("/", rpc, methods=["POST"])]), seen


def test_recording_mode_forwards_credentials_and_keeps_exact_bytes(db_path):
    """The client's Authorization reaches the upstream (not our fault header), the log keeps it
    redacted, and each item's bytes are recorded exactly (invalid UTF-8 included)."""
    from a2a_tape.replay.serve.faults import FAULT_HEADER
    from a2a_tape.store.redact import REDACTED

    store.open_store(db_path).close()
    upstream, seen = _strict_upstream()
    with serve_app(upstream) as up_url:
        lib = Library.open(db_path)
        try:
            engine = ReplayEngine(lib, record_mode="all", upstream=up_url)
            with httpx.Client(transport=ReplayTransport(engine=engine)) as c:
                r = c.post(
                    "http://r.test/",
                    content=request_body("stream", "1.0", text="odd"),
                    headers={**headers_for("1.0"), "Authorization": UP_TOKEN, FAULT_HEADER: "delay=0"},
                )
                body = r.read()
        finally:
            lib.close()
    assert r.status_code == 200 and b"COMPLETED" in body and b": ping" in body
    assert seen and seen[0].get("authorization") == UP_TOKEN and FAULT_HEADER.lower() not in seen[0]
    with store.open_store(db_path) as st:
        assert [e.payload for e in st.read_from(0)] == [ODD, DONE]
        (ex,) = st.exchanges()
        assert ex.request_headers["authorization"] == REDACTED
    raw = b"".join(Path(str(db_path) + s).read_bytes() for s in ("", "-wal") if Path(str(db_path) + s).exists())
    assert b"up-s3cret-991" not in raw


def test_a_request_recorded_into_a_locked_log_does_not_stall_a_replayed_one(db_path):
    """``serve`` recording new episodes while another process holds the log's write lock: the new
    request's exchange row waits for it, off the server's event loop, so meanwhile a request the
    recordings answer is replayed at once; once the lock is gone the new one is recorded too."""
    store.open_store(db_path).close()
    with running_sdk_agent() as agent:
        lib = Library.open(db_path)
        try:
            engine = ReplayEngine(lib, record_mode="new_episodes", upstream=agent.url)
            with serve_app(create_app(engine)) as url:

                def send(text: str, timeout: float) -> httpx.Response:
                    body = request_body("send", "1.0", text=text)
                    return httpx.post(url + "/", content=body, headers=headers_for("1.0"), timeout=timeout)

                first = decode_item(send("hello", 30).content)  # recorded
                with concurrent.futures.ThreadPoolExecutor(1) as pool, write_lock_held(db_path):
                    waiting = pool.submit(send, "something new", 60)
                    wait_for_a_lock_waiter()  # its exchange row waits for the lock
                    replayed = decode_item(send("hello", 5).content)  # the loop is free: answered from the log
                    assert not waiting.done()
                new = decode_item(waiting.result(timeout=30).content)
        finally:
            lib.close()
        assert agent.executor.executions == 2
    assert first.kind == replayed.kind == new.kind == "task"
    assert replayed.task_id == first.task_id and new.task_id != first.task_id
