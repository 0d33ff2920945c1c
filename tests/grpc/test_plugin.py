"""The pytest plugin's gRPC address: a user's test drives the a2a-sdk client over gRPC against a
recording (made over JSON-RPC) with no agent and no network beyond loopback."""

from __future__ import annotations

import shutil
from pathlib import Path

pytest_plugins = ["pytester"]

TAPE = Path(__file__).parents[1] / "replay" / "data" / "chunk-agent.jsonl"
NO_CARD = Path(__file__).parents[2] / "recordings" / "sdk-v10-stream.jsonl"  # no card recorded: one made up

USER_MODULE = """
import anyio
import grpc
import pytest


def _send(url, interfaces=None):
    from a2a.client import ClientConfig
    from a2a.client.client_factory import create_client
    from a2a.types import Message, Part, Role, SendMessageRequest

    async def main():
        config = ClientConfig(
            grpc_channel_factory=lambda u: grpc.aio.insecure_channel(u), supported_protocol_bindings=["GRPC"]
        )
        client = await create_client(url, client_config=config)
        req = SendMessageRequest(message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="hello")]))
        try:
            return [ev async for ev in client.send_message(req)]
        finally:
            await client.close()

    return anyio.run(main)


@pytest.mark.a2a_tape("recordings/chunk.jsonl")
def test_grpc_target_answers_a_raw_stub(a2a_tape):
    from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, TaskState
    from a2a.types.a2a_pb2_grpc import A2AServiceStub

    async def main():
        async with grpc.aio.insecure_channel(a2a_tape.grpc_target) as channel:
            req = SendMessageRequest(message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="hello")]))
            stream = A2AServiceStub(channel).SendStreamingMessage(req, metadata=(("a2a-version", "1.0"),))
            return [r async for r in stream]

    got = anyio.run(main)
    assert len(got) == 6 and got[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.a2a_tape("recordings/no-card.jsonl")
def test_a_made_up_card_names_the_grpc_target(a2a_tape):
    from a2a.types import TaskState

    a2a_tape.grpc_target  # started: the card made up for a recording without one names it too
    got = _send(a2a_tape.url)
    assert got[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.a2a_tape("recordings/chunk.jsonl", faults="drop-after=2")
def test_faults_reach_the_grpc_client(a2a_tape):
    from a2a.client.errors import A2AClientError

    a2a_tape.grpc_target  # started: the card served at a2a_tape.url now names it
    with pytest.raises(A2AClientError, match="UNAVAILABLE"):
        _send(a2a_tape.url)
"""


def test_the_plugin_serves_grpc(pytester):
    (pytester.path / "recordings").mkdir()
    shutil.copy(TAPE, pytester.path / "recordings" / "chunk.jsonl")
    shutil.copy(NO_CARD, pytester.path / "recordings" / "no-card.jsonl")
    pytester.makepyfile(test_user=USER_MODULE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
