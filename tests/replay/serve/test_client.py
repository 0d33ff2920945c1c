"""The a2a-sdk 1.3.0 client (a real client nobody here wrote) against ``a2a-tape serve``, both dialects.

The recording ``data/chunk-agent.jsonl`` was made from the real a2a-sdk agent of
tests/support/sdk_agents.py (both dialects, input-required, a lone message, a mid-stream error).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.server import create_app
from tests.support.servers import serve_app

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture
def library():
    lib = Library.open(DATA / "chunk-agent.jsonl")
    yield lib
    lib.close()


async def make_client(url: str, dialect: str, hc: httpx.AsyncClient, *, streaming: bool = True):
    factory = ClientFactory(ClientConfig(httpx_client=hc, streaming=streaming))
    if dialect == "1.0":
        return await factory.create_from_url(url)  # reads our agent card, picks 1.0
    card = AgentCard(
        name="replay",
        description="",
        version="1",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", protocol_version="0.3", url=url + "/")],
    )
    return factory.create(card)


def user_message(text: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text=text)]))


async def collect(client, text: str):
    """(artifact text per id, last state, task id, kinds) as the client saw the stream."""
    arts: dict[str, str] = {}
    state = None
    task_id = None
    kinds: list[str] = []
    async for ev in client.send_message(user_message(text)):
        kind = ev.WhichOneof("payload")
        kinds.append(kind)
        if kind == "task":
            task_id, state = ev.task.id, ev.task.status.state
        elif kind == "status_update":
            state = ev.status_update.status.state
        elif kind == "artifact_update":
            au = ev.artifact_update
            text_ = "".join(p.text for p in au.artifact.parts)
            arts[au.artifact.artifact_id] = (arts.get(au.artifact.artifact_id, "") if au.append else "") + text_
    return arts, state, task_id, kinds


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_sdk_client_gets_recorded_artifacts_and_final_state(library, dialect):
    """Both recordings of 'hello' (one per dialect) are served to a client of each dialect,
    converted when the dialects differ: the client sees the chunks and COMPLETED both times."""
    engine = ReplayEngine(library)

    async def main():
        with serve_app(create_app(engine)) as url, anyio.fail_after(30):
            async with httpx.AsyncClient(timeout=10) as hc:
                client = await make_client(url, dialect, hc)
                seen = []
                for _ in range(2):  # first the 1.0 recording, then the 0.3 one (unused first)
                    arts, state, task_id, kinds = await collect(client, "hello")
                    seen.append((arts, state, task_id, kinds))
                got = await client.get_task(GetTaskRequest(id=seen[0][2]))
                return seen, got

    seen, got = anyio.run(main)
    ids = set()
    for arts, state, task_id, kinds in seen:
        assert arts == {"art-1": "chunk-0 chunk-1 chunk-2 "}
        assert state == TaskState.TASK_STATE_COMPLETED
        assert kinds[0] == "task" and kinds.count("artifact_update") == 3
        ids.add(task_id)
    assert len(ids) == 2  # two different recordings answered, in recorded order
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert "".join(p.text for a in got.artifacts for p in a.parts) == "chunk-0 chunk-1 chunk-2 "


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_sdk_client_input_required_and_lone_message(library, dialect):
    engine = ReplayEngine(library)

    async def main():
        with serve_app(create_app(engine)) as url:
            async with httpx.AsyncClient(timeout=10) as hc:
                client = await make_client(url, dialect, hc)
                asked = await collect(client, "please ask me")
                replies = [
                    ev
                    async for ev in (await make_client(url, dialect, hc, streaming=False)).send_message(
                        user_message("reply please")
                    )
                ]
                return asked, replies

    asked, replies = anyio.run(main)
    assert asked[1] == TaskState.TASK_STATE_INPUT_REQUIRED
    assert replies[-1].WhichOneof("payload") == "message"
    assert replies[-1].message.parts[0].text == "direct reply"


def test_sdk_client_lists_recorded_tasks(library):
    engine = ReplayEngine(library)

    async def main():
        with serve_app(create_app(engine)) as url:
            async with httpx.AsyncClient(timeout=10) as hc:
                client = await make_client(url, "1.0", hc)
                return await client.list_tasks(ListTasksRequest())

    page = anyio.run(main)
    states = {t.id: t.status.state for t in page.tasks}
    assert len(states) == len(library.task_ids()) >= 7
    assert TaskState.TASK_STATE_INPUT_REQUIRED in states.values()
    assert TaskState.TASK_STATE_COMPLETED in states.values()
