"""The HTTP+JSON binding through the proxy, with a real a2a-sdk 1.3.0 agent that offers it."""

from __future__ import annotations

import contextlib

import httpx
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface
from starlette.applications import Starlette

from a2a_tape import store
from tests.recorder.proxy.conftest import SettleWatch, read_sse, running_proxy
from tests.support.sdk_agents import ChunkAgent
from tests.support.servers import closed_port, serve_app


@contextlib.contextmanager
def rest_agent():
    port = closed_port()  # nothing listens there; bound later by the server
    url = f"http://127.0.0.1:{port}"
    executor = ChunkAgent()
    card = AgentCard(
        name="rest-agent",
        description="HTTP+JSON",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        supported_interfaces=[AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=url)],
    )
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=create_agent_card_routes(card) + create_rest_routes(handler))
    with serve_app(app, port=port):
        yield url, executor


BODY = b'{"message": {"messageId": "rest-%s", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}'
HEADERS = {"content-type": "application/json", "A2A-Version": "1.0"}


def test_rest_stream_recorded_and_repeat_served_from_the_log(db_path):
    with rest_agent() as (url, executor), running_proxy(url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        with httpx.stream("POST", proxy.url + "/message:stream", content=BODY % b"1", headers=HEADERS) as r:
            assert r.status_code == 200
            first = read_sse(r)
        watch.wait(1)
        assert len(first) == 6
        task_id = store.decode_item(first[0]).task_id
        assert [bytes(e.payload) for e in proxy.store.read_task(task_id)] == first
        ex = [e for e in proxy.store.exchanges() if e.rpc_method == "SendStreamingMessage"][0]
        assert (ex.binding, ex.dialect) == ("http+json", "1.0") and ex.outcome == "closed" and ex.message_id == "rest-1"

        with httpx.stream("POST", proxy.url + "/message:stream", content=BODY % b"1", headers=HEADERS) as r:
            again = read_sse(r)
        assert again == first and executor.executions == 1

        got = httpx.get(proxy.url + f"/tasks/{task_id}", headers=HEADERS)
        assert got.status_code == 200
        # a bare REST Task (no wrapper): store.decode_item does not type it yet, so check the bytes
        assert task_id.encode() in got.content and b"TASK_STATE_COMPLETED" in got.content
        watch.wait(2)
        rows = [e for e in proxy.store.exchanges() if e.http_method == "GET" and e.rpc_method == "GetTask"]
        assert rows and rows[0].status == 200 and (rows[0].binding, rows[0].dialect) == ("http+json", "1.0")
