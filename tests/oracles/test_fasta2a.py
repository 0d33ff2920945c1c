"""fasta2a 2.1.1 (pydantic's A2A server, with pydantic-ai's offline ``FunctionModel``) and its own client,
live and replayed (issue 22).

fasta2a answers ``message/send`` with a ``submitted`` task and works on it in the background; its client
polls ``tasks/get``. Its wire is its own (``message/send`` answered with a ``{"task": ...}`` wrapper, v0.3
state words, no ``kind``): what its client reads is what it recorded, so the replay must serve the agent's
own answers, not a task folded and re-spelt. Each flow runs live through ``a2a-tape proxy`` (the installed
script), then against ``a2a-tape serve`` and the ``ReplayTransport`` over that recording: the client sees
what it saw live, every byte it reads (the recording's ids and times are the live ones).

- polling: the send, then one recorded answer per poll (submitted, working, ..., completed) and the
  walk ends where the agent ended; a cancel afterwards is answered as the agent answered it;
- streaming: ``message/stream`` as the agent streamed it;
- ``a2a-tape record --no-stream`` against the agent, then against ``serve`` over that recording: the
  replayed task walks to ``completed`` (it used to answer ``working`` for ever, and record stalled).

The model waits for the client to have seen the task working before it answers (a threading event,
no sleep), so every run has the same states.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fasta2a.client import A2AClient
from fasta2a.pydantic_ai import agent_to_a2a
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from a2a_tape.recorder.listen import serving
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.transport import ReplayTransport
from tests.oracles import tape
from tests.support.servers import closed_port as free_port

pytestmark = pytest.mark.oracle

TERMINAL = ("completed", "failed", "canceled", "rejected")
MAX_POLLS = 2000  # the client's bound: a poll answers at once, the model answers once working was seen


class GatedModel:
    """pydantic-ai's FunctionModel answering once ``release`` is set (by a client that saw the task working)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    async def think(self, messages: list[Any], info: AgentInfo) -> ModelResponse:
        await anyio.to_thread.run_sync(self.release.wait, 30)
        return ModelResponse(parts=[TextPart("the answer is 42")])


@contextlib.contextmanager
def fasta2a_agent():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    model = GatedModel()
    app = agent_to_a2a(Agent(FunctionModel(model.think), name="fa"), name="fa", url=url)
    with serving(app, "127.0.0.1", port, lifespan="on"):
        yield url, model


def _message(text: str) -> Any:
    return {
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        "kind": "message",
        "message_id": str(uuid.uuid4()),
    }


def _task(result: Any) -> Any:
    return result.get("task", result) if isinstance(result, dict) else result


async def polling_session(url: str, release: threading.Event | None, transport=None) -> list[Any]:
    """What fasta2a's client reads: the send's answer, every poll's, then a cancel's."""
    async with httpx.AsyncClient(transport=transport, timeout=30) as hc:
        client = A2AClient(url, http_client=hc)
        sent = await client.send_message(_message("what is the answer?"))
        seen: list[Any] = [sent["result"]]
        task_id = _task(sent["result"])["id"]
        for _ in range(MAX_POLLS):
            got = await client.get_task(task_id)
            seen.append(got.get("result", got.get("error")))
            state = _task(seen[-1])["status"]["state"]
            if state == "working" and release is not None:
                release.set()
            if state in TERMINAL:
                break
        cancel = await hc.post(
            "/", json={"jsonrpc": "2.0", "id": 7, "method": "tasks/cancel", "params": {"id": task_id}}
        )
        seen.append(cancel.json())
        return seen


async def streaming_session(url: str, release: threading.Event | None, transport=None) -> list[Any]:
    async with httpx.AsyncClient(transport=transport, timeout=30) as hc:
        client = A2AClient(url, http_client=hc)
        if release is not None:
            release.set()
        return [ev.get("result") async for ev in client.stream_message(_message("stream the answer"))]


def _states(seen: list[Any]) -> list[str]:
    return [_task(s)["status"]["state"] for s in seen if isinstance(s, dict) and "status" in _task(s)]


def replayed(db: Path, session, log: Path, how: str, timing: str = "instant") -> list[Any]:
    if how == "serve":
        with tape.serve(db, log, "--timing", timing) as srv:
            return anyio.run(session, srv.url, None)
    lib = Library.open(db)
    try:
        return anyio.run(session, "http://replay.test", None, ReplayTransport(engine=ReplayEngine(lib, timing=timing)))
    finally:
        lib.close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, tuple[list[Any], Path]]:
    """(what the client saw live, the proxy's log) per flow."""
    out: dict[str, tuple[list[Any], Path]] = {}
    for name, session in (("polling", polling_session), ("streaming", streaming_session)):
        tmp = tmp_path_factory.mktemp(name)
        db = tmp / "fa.db"
        with fasta2a_agent() as (url, model), tape.proxy(url, db, tmp / "proxy.log") as proxy:
            out[name] = (anyio.run(session, proxy.url, model.release), db)
    return out


@pytest.mark.parametrize("how", ["serve", "transport"])
def test_a_polled_task_walks_its_recorded_states_and_ends_where_the_agent_ended(recorded, how, tmp_path):
    live, db = recorded["polling"]
    states = _states(live)
    assert states[0] == "submitted" and "working" in states and states[-1] == "completed"
    got = replayed(db, polling_session, tmp_path / "serve.log", how)
    assert got == live


@pytest.mark.parametrize("how", ["serve", "transport"])
def test_a_stream_replays_as_the_agent_streamed_it(recorded, how, tmp_path):
    live, db = recorded["streaming"]
    assert live and _task(live[-1]).get("status", {}).get("state") in (None, *TERMINAL)
    assert replayed(db, streaming_session, tmp_path / "serve.log", how) == live


def _record(url: str, db: Path) -> dict[str, Any]:
    res = subprocess.run(
        [str(tape.tape_script()), "record", url, "what is the answer?", "--no-stream", "--db", str(db), "--json"],
        capture_output=True,
        timeout=120,
        env=tape.clean_env(),
    )
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    return json.loads(res.stdout)


def test_record_no_stream_against_the_replay_of_a_polled_recording_completes(tmp_path):
    db = tmp_path / "fa.db"
    with fasta2a_agent() as (url, model):
        model.release.set()  # record polls with its own backoff: the task may be seen working or not
        live = _record(url, db)
    assert live["state"] == "completed" and live["final_answer"] == "the answer is 42"
    with tape.serve(db, tmp_path / "serve.log") as srv:
        again = _record(srv.url, tmp_path / "again.db")
    assert (again["state"], again["final_answer"]) == ("completed", "the answer is 42")


def test_a_poll_of_another_shape_walks_too_and_ends_on_the_agents_own_answer(tmp_path):
    """Polls that no recorded request matches as they are (here ``historyLength``, which record's polls
    did not send) walk the recorded answers as well, and the last one is the agent's: its history as
    fasta2a keeps it (the agent's messages), not rebuilt."""
    db = tmp_path / "fa.db"
    with fasta2a_agent() as (url, model):
        model.release.set()
        live = _record(url, db)
    from a2a_tape.store import open_store

    with open_store(db) as st:
        gets = [ex for ex in st.exchanges() if ex.rpc_method == "GetTask"]
        last = json.loads(bytes(st.read_exchange(gets[-1].id or 0)[-1].payload))["result"]
    headers = {"A2A-Version": "1.0"}
    send = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "what is the answer?"}]}}
    with tape.serve(db, tmp_path / "serve.log") as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        sent = c.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send}, headers=headers)
        task_id = sent.json()["result"]["task"]["id"]
        states = []
        for _ in range(len(gets) + 2):
            got = c.post(
                "/",
                json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id, "historyLength": 10}},
                headers=headers,
            ).json()["result"]
            states.append(got["status"]["state"])
    assert live["state"] == "completed" and task_id == last["id"]
    assert states[0] != "TASK_STATE_COMPLETED" or len(gets) == 1  # it walks: the first poll is not the end
    assert states[-1] == "TASK_STATE_COMPLETED" and got["history"] == last["history"][-10:]
