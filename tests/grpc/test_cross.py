"""A gRPC recording answers a JSON-RPC client as the agent answered it over JSON-RPC (ids aside)."""

from __future__ import annotations

import anyio
import httpx

from tests.grpc.clients import sdk_send
from tests.grpc.conftest import running_grpc_proxy, running_serve
from tests.grpc.test_proxy import _strip_ids


def _jsonrpc_send(url: str, text: str, message_id: str) -> list[dict]:
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, SendMessageRequest
    from google.protobuf import json_format

    async def main() -> list[dict]:
        async with httpx.AsyncClient(timeout=30) as http:
            config = ClientConfig(httpx_client=http, supported_protocol_bindings=["JSONRPC"])
            client = await ClientFactory(config).create_from_url(url)
            msg = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])
            return [json_format.MessageToDict(ev) async for ev in client.send_message(SendMessageRequest(message=msg))]

    return anyio.run(main)


def test_a_grpc_recording_answers_a_jsonrpc_client(grpc_agent, db_path):
    live_jsonrpc = _jsonrpc_send(grpc_agent.url, "hello", "m-live")
    with running_grpc_proxy(grpc_agent.url, grpc_agent.target, db_path) as proxy:
        sdk_send(proxy.url, "hello", message_id="m-g")
    with running_serve(db_path) as serve:
        replayed = _jsonrpc_send(serve.url, "hello", "m-g")
    assert _strip_ids(replayed) == _strip_ids(live_jsonrpc)
