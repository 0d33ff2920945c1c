"""Each fault, as a client over a real socket sees it (httpx + httpx-sse, and the a2a-sdk client)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx
import pytest
from a2a.types import GetTaskRequest, SubscribeToTaskRequest, TaskState
from httpx_sse import connect_sse

from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.server import create_app
from a2a_tape.store import TaskSnapshot, decode_item
from tests.replay._record import headers_for, request_body
from tests.replay.serve.test_client import make_client, user_message
from tests.support.servers import serve_app

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture
def library():
    lib = Library.open(DATA / "chunk-agent.jsonl")
    yield lib
    lib.close()


def stream(
    url: str,
    text: str,
    *,
    dialect: str = "1.0",
    headers: dict | None = None,
    path: str = "/",
    op: str = "stream",
    task_id: str | None = None,
    read_timeout: float = 10.0,
):
    """(events as (sse event, data bytes), how the stream ended: 'closed' or 'timeout')."""
    body = request_body(op, dialect, text=text if op == "stream" else None, task_id=task_id, rpc_id="c-1")
    got = []
    how = "closed"
    with httpx.Client(timeout=httpx.Timeout(10.0, read=read_timeout)) as c:
        with connect_sse(
            c, "POST", url + path, content=body, headers={**headers_for(dialect), **(headers or {})}
        ) as es:
            try:
                for sse in es.iter_sse():
                    got.append((sse.event, sse.data.encode()))
            except httpx.ReadTimeout:
                how = "timeout"
    return got, how


def kinds(events) -> list[str]:
    return [decode_item(d).kind for _, d in events]


def rpc(url: str, op: str, task_id: str, dialect: str = "1.0") -> bytes:
    body = request_body(op, dialect, task_id=task_id, rpc_id=7)
    return httpx.post(url + "/", content=body, headers=headers_for(dialect), timeout=10).content


def test_no_fault_serves_the_whole_recording(library):
    with serve_app(create_app(ReplayEngine(library))) as url:
        events, how = stream(url, "hello")
    assert how == "closed"
    assert kinds(events) == ["task", "status", "artifact", "artifact", "artifact", "status"]
    # the request's id, not the recorded one
    assert all(decode_item(d).rpc_id == "c-1" for _, d in events)


def test_drop_after_closes_while_the_task_goes_on(library):
    """drop-after=2: the stream ends after two items, the task is still WORKING for the client;
    a resubscribe gives a snapshot then the rest; GetTask afterwards says COMPLETED."""
    with serve_app(create_app(ReplayEngine(library))) as url:
        events, how = stream(url, "hello", headers={"X-A2A-Tape-Fault": "drop-after=2"})
        assert how == "closed" and kinds(events) == ["task", "status"]
        task_id = decode_item(events[0][1]).task_id
        rest, how2 = stream(url, "", op="subscribe", task_id=task_id)
        final = decode_item(rpc(url, "get", task_id))
    snap = decode_item(rest[0][1]).body
    assert isinstance(snap, TaskSnapshot) and snap.state == "working" and snap.artifacts == ()
    assert kinds(rest) == ["task", "artifact", "artifact", "artifact", "status"]
    texts = [decode_item(d).body.artifact.parts[0].text for _, d in rest[1:4]]
    assert texts == ["chunk-0 ", "chunk-1 ", "chunk-2 "]
    assert isinstance(final.body, TaskSnapshot) and final.body.state == "completed"
    assert "".join(a.text for a in final.body.artifacts) == "chunk-0 chunk-1 chunk-2 "


def test_drop_after_then_poll_gives_the_rest(library):
    with serve_app(create_app(ReplayEngine(library, faults="drop-after=3"))) as url:  # per server
        events, _ = stream(url, "hello")
        task_id = decode_item(events[0][1]).task_id
        polled = decode_item(rpc(url, "get", task_id)).body
        again = rpc(url, "subscribe", task_id)  # the task is over now: as a real agent, -32004
    assert kinds(events) == ["task", "status", "artifact"]
    assert polled.state == "completed" and "".join(a.text for a in polled.artifacts) == "chunk-0 chunk-1 chunk-2 "
    assert decode_item(again).body.code == -32004


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_drop_after_sdk_client_resubscribes_for_the_rest(library, dialect):
    """The a2a-sdk client's stream ends early; its subscribe() gets the snapshot and the rest."""
    engine = ReplayEngine(library)

    async def main():
        with serve_app(create_app(engine)) as url, anyio.fail_after(30):
            async with httpx.AsyncClient(timeout=10) as hc:
                client = await make_client(url, dialect, hc)
                hc.headers["X-A2A-Tape-Fault"] = "drop-after=2"  # this request only
                first = [ev async for ev in client.send_message(user_message("hello"))]
                del hc.headers["X-A2A-Tape-Fault"]
                task_id = first[0].task.id
                rest = [ev async for ev in client.subscribe(SubscribeToTaskRequest(id=task_id))]
                final = await client.get_task(GetTaskRequest(id=task_id))
                return first, rest, final

    first, rest, final = anyio.run(main)
    assert [e.WhichOneof("payload") for e in first] == ["task", "status_update"]
    assert [e.WhichOneof("payload") for e in rest] == [
        "task",
        "artifact_update",
        "artifact_update",
        "artifact_update",
        "status_update",
    ]
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert final.status.state == TaskState.TASK_STATE_COMPLETED


def test_stall_after_keeps_the_connection_and_sends_nothing(library):
    with serve_app(create_app(ReplayEngine(library))) as url:
        events, how = stream(url, "hello", headers={"X-A2A-Tape-Fault": "stall-after=3"}, read_timeout=0.5)
    assert how == "timeout"  # not closed: the client waited on an open connection
    assert kinds(events) == ["task", "status", "artifact"]


def test_duplicate_sends_one_item_twice(library):
    with serve_app(create_app(ReplayEngine(library))) as url:
        events, _ = stream(url, "hello", path="/?fault=duplicate=3")
    assert kinds(events) == ["task", "status", "artifact", "artifact", "artifact", "artifact", "status"]
    assert events[2] == events[3]
    assert [decode_item(d).body.artifact.parts[0].text for _, d in events[2:6]] == [
        "chunk-0 ",
        "chunk-0 ",
        "chunk-1 ",
        "chunk-2 ",
    ]


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_error_after_sends_an_error_event(library, dialect):
    with serve_app(create_app(ReplayEngine(library))) as url:
        events, how = stream(url, "hello", dialect=dialect, headers={"X-A2A-Tape-Fault": "error-after=2"})
    assert how == "closed"
    assert [e for e, _ in events] == ["message", "message", "error"]
    err = decode_item(events[-1][1])
    assert err.kind == "error" and err.body.code == -32603 and err.rpc_id == "c-1"


def test_delay_spaces_the_items(library):
    with serve_app(create_app(ReplayEngine(library))) as url:
        t0 = time.monotonic()
        events, _ = stream(url, "hello", headers={"X-A2A-Tape-Fault": "delay=40"})
        took = time.monotonic() - t0
    assert len(events) == 6
    assert took >= 6 * 0.04


def test_recorded_error_event_is_served_as_recorded(library):
    """The agent raised mid-stream when recorded ('boom'): v1.0 event: error, v0.3 a plain data error."""
    with serve_app(create_app(ReplayEngine(library))) as url:
        v1, _ = stream(url, "boom", dialect="1.0")
        v03, _ = stream(url, "boom", dialect="0.3")
    assert v1[-1][0] == "error" and decode_item(v1[-1][1]).body.message == "agent exploded mid-stream"
    assert v03[-1][0] == "message" and decode_item(v03[-1][1]).kind == "error"


def test_real_and_factor_timing_follow_the_recorded_gaps(library):
    """'slow please' was recorded with chunks 0.3 s apart: a factor of 3 spreads them over >= 0.27 s,
    real timing over >= 0.85 s; instant does not wait (compared with real timing's 0.85 s, not with
    the factor's 0.27 s, which a loaded machine can spend on six events)."""
    slow = [ep for ep in library.episodes if ep.text == "slow please"][0]
    recorded = sum(s.gap for s in slow.served)
    assert recorded >= 0.85
    for timing, factor in (("3", 3.0), ("real", 1.0)):
        with serve_app(create_app(ReplayEngine(library, timing=timing))) as url:
            t0 = time.monotonic()
            events, _ = stream(url, "slow please")
            took = time.monotonic() - t0
        assert len(events) == 6 and took >= recorded / factor * 0.95, timing
    with serve_app(create_app(ReplayEngine(library, timing="instant"))) as url:
        t0 = time.monotonic()
        events, _ = stream(url, "slow please")
        assert time.monotonic() - t0 < recorded * 0.95


def test_drop_after_with_timing_the_task_goes_on_along_the_recorded_gaps(library):
    """Timing 0.5x on 'slow please' (chunks 0.3 s apart when recorded, so the task ends ~1.8 s after
    the drop): right after the drop the task is still WORKING; a resubscribe gets the snapshot and
    the chunks as they come due. (At 2x, ~0.45 s, a machine under a load of 9 resubscribed too late.)"""
    with serve_app(create_app(ReplayEngine(library, timing="0.5"))) as url:
        events, _ = stream(url, "slow please", headers={"X-A2A-Tape-Fault": "drop-after=2"})
        task_id = decode_item(events[0][1]).task_id
        t0 = time.monotonic()
        rest, _ = stream(url, "", op="subscribe", task_id=task_id)
        took = time.monotonic() - t0
        final = decode_item(rpc(url, "get", task_id)).body
    assert kinds(events) == ["task", "status"]
    snap = decode_item(rest[0][1]).body
    assert snap.state == "working"
    assert kinds(rest)[-1] == "status" and decode_item(rest[-1][1]).body.state == "completed"
    in_snapshot = len(snap.artifacts[0].parts) if snap.artifacts else 0  # chunks already due when we came back
    assert kinds(rest) == ["task"] + ["artifact"] * (3 - in_snapshot) + ["status"]
    assert took >= 0.3 / 0.5  # at least the last recorded gap, scaled
    assert final.state == "completed"


def _send(url: str, fault: str | None, read_timeout: float = 10.0) -> httpx.Response:
    headers = {**headers_for("1.0"), **({"X-A2A-Tape-Fault": fault} if fault else {})}
    body = request_body("send", "1.0", text="hello", rpc_id="s-1")
    return httpx.post(url + "/", content=body, headers=headers, timeout=httpx.Timeout(10.0, read=read_timeout))


def test_faults_on_a_whole_body_answer(library):
    """message/send is one item: delay before it, an error instead of it, no body, or no answer."""
    with serve_app(create_app(ReplayEngine(library))) as url:
        plain = decode_item(_send(url, None).content)
        assert plain.kind == "task" and plain.rpc_id == "s-1"
        t0 = time.monotonic()
        late = _send(url, "delay=150")
        assert time.monotonic() - t0 >= 0.15 and decode_item(late.content).kind == "task"
        err = decode_item(_send(url, "error-after=0").content)
        assert err.kind == "error" and err.body.code == -32603 and err.rpc_id == "s-1"
        dropped = _send(url, "drop-after=0")
        assert dropped.status_code == 200 and dropped.content == b""
        with pytest.raises(httpx.ReadTimeout):
            _send(url, "stall-after=0", read_timeout=0.3)
        # faults counted past the one item, or a duplicate, leave it alone
        assert _send(url, "drop-after=1,duplicate,error-after=2").content == _send(url, None).content


def test_faults_on_a_whole_body_answer_in_process(library):
    """The same through ReplayTransport (no socket): the read timeout still ends a stalled send."""
    from a2a_tape.replay.serve.transport import ReplayTransport

    body = request_body("send", "1.0", text="hello", rpc_id="s-2")
    with httpx.Client(
        transport=ReplayTransport(engine=ReplayEngine(library)), timeout=httpx.Timeout(10.0, read=0.3)
    ) as c:
        ok = c.post("http://r.test/", content=body, headers=headers_for("1.0"))
        assert decode_item(ok.content).kind == "task"
        err = c.post(
            "http://r.test/", content=body, headers={**headers_for("1.0"), "X-A2A-Tape-Fault": "error-after=0"}
        )
        assert decode_item(err.content).body.code == -32603
        with pytest.raises(httpx.ReadTimeout):
            c.post("http://r.test/", content=body, headers={**headers_for("1.0"), "X-A2A-Tape-Fault": "stall-after=0"})


@pytest.mark.parametrize("spec", ["delay=1e309", "delay=inf", "delay=-inf", "delay=nan", "delay=1e300"])
@pytest.mark.parametrize("given", ["header", "query"])
def test_a_delay_that_never_ends_is_refused_per_request(library, spec, given):
    """Every duration refuses infinity as it refuses NaN: a request asking for ``delay=1e309`` got a
    stream that never answered; now it is refused at once (-32602), as a misspelled fault is."""
    engine = ReplayEngine(library)
    with serve_app(create_app(engine)) as url:
        body = request_body("stream", "1.0", text="hello", rpc_id="c-1")
        headers = {**headers_for("1.0"), **({"X-A2A-Tape-Fault": spec} if given == "header" else {})}
        query = f"?fault={spec}" if given == "query" else ""
        r = httpx.post(url + "/" + query, content=body, headers=headers, timeout=10.0)
    item = decode_item(r.content)
    assert item.kind == "error" and item.body.code == -32602, r.content
    assert "finite number of milliseconds" in item.body.message
