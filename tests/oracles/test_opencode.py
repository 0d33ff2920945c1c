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
