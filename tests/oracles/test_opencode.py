"""The real opencode-a2a 1.4.0 (HTTP+JSON first in its card) as an oracle of the HTTP+JSON binding (issue 22).

opencode-a2a runs in a venv of its own (:mod:`tests.oracles.opencode`) in front of a fake OpenCode server
(:mod:`tests.oracles.fake_opencode`: OpenCode and its model cannot run here); the a2a-sdk 1.3.0 client talks
to it through ``a2a-tape proxy`` (the installed script), in each binding its card offers: a streamed
message (reasoning, a tool call, the answer in three chunks), a send, GetTask, cancel and subscribe of the
finished task, an unknown task, ListTasks (:func:`tests.support.a2a_session.session`). Then ``a2a-tape
serve`` and the ``ReplayTransport`` answer the same client over that recording: what it sees is what it
saw live, and a recording in one binding answers a client of the other as the live agent answered that one
(ids and times aside). Each binding's session is recorded from a fresh agent and fake upstream.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from a2a_tape.recorder.listen import serving
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.transport import ReplayTransport
from tests.oracles import opencode, tape
from tests.oracles.cache import Unavailable
from tests.oracles.fake_opencode import ANSWER, FakeOpenCode
from tests.support.a2a_session import normalised, session

pytestmark = pytest.mark.oracle

BINDINGS = ("HTTP+JSON", "JSONRPC")


@pytest.fixture(scope="module")
def script() -> Path:
    try:
        return opencode.ensure_installed()
    except Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def recorded(script, tmp_path_factory) -> dict[str, tuple[list[Any], Path]]:
    """Per binding: (what the client saw live through the proxy, the proxy's log); a fresh agent (and fake
    OpenCode) each, so that both sessions see the same agent."""
    out = {}
    for binding in BINDINGS:
        tmp = tmp_path_factory.mktemp(binding.replace("+", ""))
        db = tmp / "oc.db"
        with serving(FakeOpenCode().app(), "127.0.0.1", 0) as upstream:
            with (
                opencode.running_agent(script, upstream, tmp) as agent,
                tape.proxy(agent, db, tmp / "proxy.log") as proxy,
            ):
                out[binding] = (anyio.run(session, proxy.url, binding, None, opencode.AUTH), db)
    return out


def replayed(db: Path, binding: str, how: str, log: Path) -> list[Any]:
    if how == "serve":
        with tape.serve(db, log) as srv:
            return anyio.run(session, srv.url, binding, None, opencode.AUTH)
    lib = Library.open(db)
    try:
        transport = ReplayTransport(engine=ReplayEngine(lib))
        return anyio.run(session, "http://replay.test", binding, transport, opencode.AUTH)
    finally:
        lib.close()


def test_the_live_agent_streams_its_channels_over_http_json(recorded):
    live, db = recorded["HTTP+JSON"]
    stream = live[0]
    assert [next(iter(ev)) for ev in stream][0] == "task" and len(stream) >= 5
    text = "".join(
        p.get("text", "")
        for ev in stream
        if "artifactUpdate" in ev and ev["artifactUpdate"]["artifact"]["artifactId"].endswith(":stream:text")
        for p in ev["artifactUpdate"]["artifact"]["parts"]
    )
    assert text == "".join(ANSWER)
    task_id = stream[0]["task"]["id"]
    shown = subprocess.run(
        [str(tape.tape_script()), "show", task_id, "--db", str(db), "--json"], capture_output=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert len(json.loads(shown.stdout)) >= len(stream)


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("how", ["serve", "transport"])
def test_replay_answers_the_client_as_opencode_a2a_did(recorded, binding, how, tmp_path):
    live, db = recorded[binding]
    assert replayed(db, binding, how, tmp_path / "serve.log") == live


@pytest.mark.parametrize(("recorded_in", "asked_in"), [("JSONRPC", "HTTP+JSON"), ("HTTP+JSON", "JSONRPC")])
def test_a_recording_in_one_binding_answers_a_client_of_the_other(recorded, recorded_in, asked_in, tmp_path):
    live_other, _ = recorded[asked_in]
    _, db = recorded[recorded_in]
    assert normalised(replayed(db, asked_in, "transport", tmp_path / "serve.log")) == normalised(live_other)


@pytest.fixture(scope="module")
def recorded_in_process(script, tmp_path_factory) -> dict[str, tuple[list[Any], Path]]:
    """Per binding: what the a2a-sdk client saw with ``RecordingTransport`` under its httpx client (no
    proxy between), and the transport's log; a fresh agent each, as :func:`recorded`."""
    from a2a_tape.recorder.transport import RecordingTransport

    out = {}
    for binding in BINDINGS:
        tmp = tmp_path_factory.mktemp("rt-" + binding.replace("+", ""))
        db = tmp / "rt.db"
        with serving(FakeOpenCode().app(), "127.0.0.1", 0) as upstream:
            with opencode.running_agent(script, upstream, tmp) as agent:

                async def run(url: str = agent, binding: str = binding, db: Path = db) -> list[Any]:
                    transport = RecordingTransport(db)
                    try:
                        return await session(url, binding, transport, opencode.AUTH)
                    finally:
                        await transport.aclose()

                out[binding] = (anyio.run(run), db)
    return out


@pytest.mark.parametrize("binding", BINDINGS)
def test_recording_transport_records_what_the_client_saw_of_opencode_a2a(
    recorded, recorded_in_process, binding, tmp_path
):
    """The client sees through RecordingTransport what it sees through the proxy (ids and times aside), and
    the transport's recording replays to it as it saw it live, in either binding (issue 22: the transport
    recorded JSON-RPC and cards only, so an HTTP+JSON session left 'no tasks recorded yet')."""
    live, db = recorded_in_process[binding]
    assert normalised(live) == normalised(recorded[binding][0])
    assert replayed(db, binding, "transport", tmp_path / "serve.log") == live


@pytest.mark.parametrize("binding", ["http+json", "jsonrpc", "auto"])
def test_record_follows_opencode_a2a_in_each_binding(script, binding, tmp_path):
    """``a2a-tape record --binding B`` against the real agent: the answer, the binding recorded (auto takes the
    card's first interface: HTTP+JSON), and a replay of it answers the a2a-sdk client's stream as recorded."""
    db = tmp_path / "rec.db"
    auth = f"Authorization: {opencode.AUTH['Authorization']}"
    with (
        serving(FakeOpenCode().app(), "127.0.0.1", 0) as upstream,
        opencode.running_agent(script, upstream, tmp_path) as agent,
    ):
        r = subprocess.run(
            [
                str(tape.tape_script()),
                "record",
                agent,
                "hello",
                "--binding",
                binding,
                "-H",
                auth,
                "--db",
                str(db),
                "--json",
            ],
            capture_output=True,
            timeout=120,
        )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["state"] == "completed" and result["final_answer"] == "".join(ANSWER)
    listed = subprocess.run(
        [str(tape.tape_script()), "tasks", "--db", str(db), "--json"], capture_output=True, timeout=60, check=True
    )
    (task,) = json.loads(listed.stdout)
    expected = "jsonrpc" if binding == "jsonrpc" else "http+json"
    assert expected in task["bindings"], task
    # record asked GetTask after the stream (its default): the agent's stored copy is evidence and never
    # rewrites the channels, which are what the stream said, as record --json said it (issue 30 item 2)
    channels = subprocess.run(
        [str(tape.tape_script()), "channels", task["task_id"], "--db", str(db), "--json"],
        capture_output=True,
        timeout=60,
        check=True,
    )
    folded = json.loads(channels.stdout)
    assert folded["final_answer"] == result["final_answer"] == "".join(ANSWER), folded
    assert folded["state"] == "completed"
    doctor = subprocess.run(
        [str(tape.tape_script()), "doctor", task["task_id"], "--db", str(db), "--json"], capture_output=True, timeout=60
    )
    assert doctor.returncode == 0 and json.loads(doctor.stdout)["findings"] == [], (
        doctor.stdout
    )  # opencode stores it right
