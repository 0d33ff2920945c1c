"""``ReplayTransport``: the same answers as the server, in process, sync and async, no sockets."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, TaskState
from httpx_sse import aconnect_sse, connect_sse

from a2a_tape.replay.serve.transport import ReplayTransport
from a2a_tape.store import decode_item
from tests.replay._record import headers_for, request_body
from tests.replay.serve.test_client import collect

TAPE = Path(__file__).parents[1] / "data" / "chunk-agent.jsonl"


@pytest.fixture
def transport():
    t = ReplayTransport(TAPE)
    yield t
    t.close()


@pytest.fixture
def no_sockets(monkeypatch):
    """Any network socket opened fails the test: the transport must not need one
    (the event loop's own AF_UNIX self-pipe is allowed)."""
    real = socket.socket

    class Guard(real):  # type: ignore[misc,valid-type]
        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if fileno is None and family in (-1, socket.AF_INET, socket.AF_INET6):
                raise AssertionError("ReplayTransport opened a network socket")
            super().__init__(family, type, proto, fileno)

    monkeypatch.setattr(socket, "socket", Guard)


def test_sync_client_streams_the_recording(transport, no_sockets):
    with httpx.Client(transport=transport, base_url="http://agent.test") as c:
        card = c.get("/.well-known/agent-card.json").json()
        with connect_sse(
            c, "POST", "/", content=request_body("stream", "1.0", text="hello", rpc_id=5), headers=headers_for("1.0")
        ) as es:
            assert es.response.headers["content-type"].startswith("text/event-stream")
            items = [decode_item(s.data) for s in es.iter_sse()]
    assert card["supportedInterfaces"][0]["url"] == "http://agent.test/"
    assert [i.kind for i in items] == ["task", "status", "artifact", "artifact", "artifact", "status"]
    assert {i.rpc_id for i in items} == {5}


def test_async_client_and_v03_conversion(transport, no_sockets):
    async def main():
        async with httpx.AsyncClient(transport=transport, base_url="http://agent.test") as c:
            async with aconnect_sse(
                c, "POST", "/", content=request_body("stream", "0.3", text="please ask me"), headers=headers_for("0.3")
            ) as es:
                return [s.data async for s in es.aiter_sse()]

    datas = anyio.run(main)
    items = [decode_item(d) for d in datas]
    # recorded in v1.0, asked in v0.3: converted, as a v0.3 agent would say it
    assert {i.dialect for i in items} == {"0.3"}
    assert '"kind":"status-update"' in datas[-1] and '"state":"input-required"' in datas[-1]
    assert items[-1].body.state == "input-required"
    assert items[-1].body.message.text == "need more input"


def test_sdk_client_through_the_transport(transport, no_sockets):
    async def main():
        async with httpx.AsyncClient(transport=transport, timeout=10) as hc:
            client = await ClientFactory(ClientConfig(httpx_client=hc)).create_from_url("http://agent.test")
            arts, state, task_id, _ = await collect(client, "hello")
            task = await client.get_task(GetTaskRequest(id=task_id))
            return arts, state, task

    arts, state, task = anyio.run(main)
    assert arts == {"art-1": "chunk-0 chunk-1 chunk-2 "}
    assert state == TaskState.TASK_STATE_COMPLETED == task.status.state


def test_stall_ends_in_a_read_timeout_sync_and_async(transport):
    body = request_body("stream", "1.0", text="hello")
    hdrs = {**headers_for("1.0"), "X-A2A-Tape-Fault": "stall-after=2"}
    got = []
    with httpx.Client(transport=transport, timeout=httpx.Timeout(5.0, read=0.3)) as c:
        with pytest.raises(httpx.ReadTimeout):
            with connect_sse(c, "POST", "http://agent.test/", content=body, headers=hdrs) as es:
                for s in es.iter_sse():
                    got.append(s.data)
    assert len(got) == 2

    async def main():
        seen = []
        async with httpx.AsyncClient(transport=ReplayTransport(TAPE), timeout=httpx.Timeout(5.0, read=0.3)) as c:
            with pytest.raises(httpx.ReadTimeout):
                async with aconnect_sse(c, "POST", "http://agent.test/", content=body, headers=hdrs) as es:
                    async for s in es.aiter_sse():
                        seen.append(s.data)
        return seen

    assert len(anyio.run(main)) == 2


def test_transport_drop_then_get_task(transport):
    with httpx.Client(transport=transport, base_url="http://agent.test") as c:
        with connect_sse(
            c,
            "POST",
            "/?fault=drop-after=1",
            content=request_body("stream", "1.0", text="hello"),
            headers=headers_for("1.0"),
        ) as es:
            items = [decode_item(s.data) for s in es.iter_sse()]
        task_id = items[0].task_id
        got = decode_item(
            c.post("/", content=request_body("get", "1.0", task_id=task_id), headers=headers_for("1.0")).content
        )
    assert [i.kind for i in items] == ["task"]
    assert got.body.state == "completed" and len(got.body.artifacts) == 1


def test_transport_needs_a_recording():
    with pytest.raises(ValueError, match="needs a recording"):
        ReplayTransport()
