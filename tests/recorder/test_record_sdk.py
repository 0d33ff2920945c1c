"""``a2a-tape record`` against real a2a-sdk 1.3.0 agents on loopback, both dialects."""

from __future__ import annotations

import anyio
import httpx
import pytest

from a2a_tape import store
from a2a_tape.recorder.record import RecordOptions, record
from a2a_tape.recorder.session import Session
from tests.conftest import running_sdk_agent

ANSWER = "chunk-0 chunk-1 chunk-2 "


def _kinds(st: store.SqliteStore, task_id: str) -> list[str]:
    return [store.decode_item(e.payload).kind for e in st.read_task(task_id)]


def test_v1_streaming_records_every_event_in_order(sdk_agent, record, db_path):
    run = record(sdk_agent.url, "hello")
    assert run.code == 0, run.stderr
    doc = run.json
    assert doc["state"] == "completed"
    assert doc["final_answer"] == ANSWER
    assert doc["events"] == 8 and doc["local_events"] == 1
    with store.open_store(db_path) as st:
        # the stream's six, then the note and the agent's answer to the GetTask asked once after it:
        # eight, as tasks, channels and show count them
        kinds = ["task", "status", "artifact", "artifact", "artifact", "status", "note", "task"]
        assert _kinds(st, doc["task_id"]) == kinds
        stream = [x for x in st.exchanges() if x.rpc_method == "SendStreamingMessage"]
        assert len(stream) == 1
        ex = stream[0]
        assert ex.dialect == "1.0" and ex.status == 200 and ex.outcome == "ok"
        assert ex.content_type.startswith("text/event-stream")
        assert ex.request_headers.get("a2a-version") == "1.0"
        # the exact bytes of each data: payload are kept
        agent = [e for e in st.read_task(doc["task_id"]) if e.origin == "upstream"]
        assert all(store.decode_item(e.payload).dialect == "1.0" for e in agent)


def test_v03_streaming(sdk_agent, record, db_path):
    run = record(sdk_agent.url, "hello", "--protocol", "0.3")
    assert run.code == 0, run.stderr
    doc = run.json
    assert (doc["state"], doc["final_answer"]) == ("completed", ANSWER)
    with store.open_store(db_path) as st:
        ex = [x for x in st.exchanges() if x.rpc_method == "message/stream"]
        assert len(ex) == 1 and ex[0].dialect == "0.3"
        assert "a2a-version" not in ex[0].request_headers
        agent = [e for e in st.read_task(doc["task_id"]) if e.origin == "upstream"]
        assert {store.decode_item(e.payload).dialect for e in agent} == {"0.3"}


def test_non_streaming_send(sdk_agent, record, db_path):
    run = record(sdk_agent.url, "hello", "--no-stream")
    assert run.code == 0, run.stderr
    doc = run.json
    assert (doc["state"], doc["final_answer"]) == ("completed", ANSWER)
    with store.open_store(db_path) as st:
        methods = [x.rpc_method for x in st.exchanges()]
        assert "SendMessage" in methods and "SendStreamingMessage" not in methods


def test_input_required_is_an_interruption_exit_0(sdk_agent, record):
    run = record(sdk_agent.url, "ask me")
    assert run.code == 0, run.stderr
    assert run.json["state"] == "input-required"
    assert run.json["recovered"] == []


def test_lone_message_reply(sdk_agent, record):
    run = record(sdk_agent.url, "reply please")
    assert run.code == 0, run.stderr
    assert run.json["final_answer"] == "direct reply"


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
def test_agent_raising_mid_stream_is_recorded_and_fails(sdk_agent, record, db_path, protocol):
    run = record(sdk_agent.url, "boom", "--protocol", protocol)
    assert run.code == 1
    assert "agent exploded mid-stream" in run.stderr
    assert "Traceback" not in run.stderr
    doc = run.json
    assert doc["state"] == "failed"
    with store.open_store(db_path) as st:
        events = st.read_task(doc["task_id"])
        errors = [e for e in events if store.decode_item(e.payload).kind == "error"]
        assert len(errors) == 1 and errors[0].origin == "upstream"
        # v1.0 names the SSE event "error"; v0.3 sends a plain data: line with {"error": ...}
        assert errors[0].sse_event == ("error" if protocol == "1.0" else None)
        # the chunk before the error is kept, and our verdict is a local event, not a fake upstream one
        assert any(store.decode_item(e.payload).kind == "artifact" for e in events)
        local = [store.decode_item(e.payload) for e in events if e.origin == "local"]
        assert [i.kind for i in local] == ["note", "status"]
        assert local[-1].body.state == "failed"


class _DropAfter(httpx.AsyncBaseTransport):
    """Cuts the first streaming response after ``n`` body chunks (a client-side drop)."""

    def __init__(self, n: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.n = n
        self.cut = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        if self.cut or "event-stream" not in resp.headers.get("content-type", ""):
            return resp
        self.cut = True
        inner_stream = resp.stream
        n = self.n

        class Cut(httpx.AsyncByteStream):
            async def __aiter__(self):
                i = 0
                async for chunk in inner_stream:  # type: ignore[union-attr]
                    yield chunk
                    i += 1
                    if i >= n:
                        raise httpx.ReadError("client dropped the stream (test)")

            async def aclose(self) -> None:
                await inner_stream.aclose()  # type: ignore[union-attr]

        return httpx.Response(resp.status_code, headers=resp.headers, stream=Cut(), extensions=resp.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
def test_resubscribe_after_the_client_drops(db_path, protocol):
    """A real agent, a dropped stream: GetTask, then SubscribeToTask / tasks/resubscribe whose
    snapshot replaces what was folded."""
    with running_sdk_agent(slow_delay=0.2) as agent, store.open_store(db_path) as st:
        session = Session(st)
        opts = RecordOptions(url=agent.url, text="slow", stall_timeout=10, protocol=protocol)
        result = anyio.run(lambda: record(session, opts, transport=_DropAfter(2)))
        assert result.state == "completed"
        assert result.final_answer == ANSWER  # whole, exactly once: the snapshot replaced, never appended
        assert "dropped" in result.recovered and "resubscribed" in result.recovered
        methods = [x.rpc_method for x in st.exchanges()]
        send, sub, get = (
            ("SendStreamingMessage", "SubscribeToTask", "GetTask")
            if protocol == "1.0"
            else ("message/stream", "tasks/resubscribe", "tasks/get")
        )
        assert methods.count(send) == 1 and sub in methods and get in methods
        notes = [store.decode_item(e.payload).body.action for e in st.read_task(result.task_id) if e.origin == "local"]
        assert notes[:2] == ["stream dropped", "resubscribed"]
        assert agent.executor.executions == 1  # recovery never re-ran the work
