"""The HTTP+JSON binding replayed (issue 22): a real a2a-sdk 1.3.0 agent offering HTTP+JSON (under
``/a2a/rest``, first in its card) and JSON-RPC, recorded by the proxy as the a2a-sdk client talks to
it, then answered by ``serve`` and the ``ReplayTransport`` to the same client: everything the client
sees equal to what the live agent answered (ids and times aside when the recording is another
one), in each binding, whichever binding the recording was made in.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.server import create_app
from a2a_tape.replay.serve.transport import ReplayTransport
from tests.recorder.proxy.conftest import running_proxy
from tests.support.a2a_session import normalised as _normalised
from tests.support.a2a_session import session
from tests.support.sdk_agents import two_binding_agent
from tests.support.servers import serve_app

BINDINGS = ("HTTP+JSON", "JSONRPC")


def record_session(tmp_path, binding: str) -> tuple[Any, str]:
    """(what the client saw live, the log) of one session through the proxy in ``binding``."""
    db = tmp_path / f"{binding.replace('+', '')}.db"
    with two_binding_agent() as agent, running_proxy(agent, db) as proxy:
        live = anyio.run(session, proxy.url, binding)
    return live, str(db)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """One session per binding, recorded through the proxy."""
    return {b: record_session(tmp_path_factory.mktemp(b.replace("+", "")), b) for b in BINDINGS}


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("how", ["serve", "transport"])
def test_replay_answers_the_client_as_the_live_agent_did(recordings, binding, how):
    live, db = recordings[binding]
    assert live[2]["id"] and live[4].get("error") and live[6].get("error")  # the session has errors to replay
    got = replayed(db, binding, how)
    assert got == live


@pytest.mark.parametrize(("recorded", "asked"), [("JSONRPC", "HTTP+JSON"), ("HTTP+JSON", "JSONRPC")])
def test_a_recording_in_one_binding_answers_a_client_of_the_other(recordings, recorded, asked):
    live_other, _ = recordings[asked]
    _, db = recordings[recorded]
    got = replayed(db, asked, "transport")
    assert _normalised(got) == _normalised(live_other)


def replayed(db: str, binding: str, how: str) -> list[Any]:
    lib = Library.open(db)
    try:
        engine = ReplayEngine(lib)
        if how == "transport":
            return anyio.run(session, "http://replay.test", binding, ReplayTransport(engine=engine))
        with serve_app(create_app(engine)) as url:
            return anyio.run(session, url, binding)
    finally:
        lib.close()


def test_the_card_names_the_replay_server_for_each_interface(recordings):
    """The recorded card's interfaces (HTTP+JSON at /a2a/rest, JSON-RPC at /) point at the replay server,
    each path kept; a recording with no card gets one offering both bindings at the replay server."""
    _, db = recordings["HTTP+JSON"]
    lib = Library.open(db)
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            card = httpx.get(url + "/.well-known/agent-card.json").json()
    finally:
        lib.close()
    assert [(i["protocolBinding"], i["url"]) for i in card["supportedInterfaces"]] == [
        ("HTTP+JSON", url + "/a2a/rest"),
        ("JSONRPC", url + "/"),
    ]


def test_a_recording_without_a_card_offers_both_bindings(tmp_path):
    from a2a_tape.store import open_store

    open_store(tmp_path / "empty.db").close()
    lib = Library.open(tmp_path / "empty.db")
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            card = httpx.get(url + "/.well-known/agent-card.json").json()
            unknown = httpx.get(url + "/tasks/nope", headers={"A2A-Version": "1.0"})
    finally:
        lib.close()
    assert {(i["protocolBinding"], i["url"].rstrip("/")) for i in card["supportedInterfaces"]} >= {
        ("HTTP+JSON", url),
        ("JSONRPC", url),
    }
    assert unknown.status_code == 404 and unknown.json()["error"]["status"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("binding", "name", "label"), [("HTTP+JSON", "http+json", "HTTP+JSON 1.0"), ("JSONRPC", "jsonrpc", "JSONRPC 1.0")]
)
def test_show_tasks_and_the_exports_name_the_binding(recordings, binding, name, label):
    from typer.testing import CliRunner

    from a2a_tape.cli import app

    live, db = recordings[binding]
    task_id = live[0][0]["task"]["id"]
    run = CliRunner().invoke
    shown = json.loads(run(app, ["show", task_id, "--db", db, "--json"]).stdout)
    assert {(r["binding"], r["version"]) for r in shown} == {(name, "1.0")}
    assert label in run(app, ["show", task_id, "--db", db], env={"COLUMNS": "200"}).stdout
    tasks = json.loads(run(app, ["tasks", "--db", db, "--json"]).stdout)
    assert {t["task_id"]: t["bindings"] for t in tasks}[task_id] == [name]
    har = json.loads(run(app, ["export", task_id, "--format", "har", "--db", db]).stdout)
    assert all(e["comment"].startswith(label) for e in har["log"]["entries"] if e["request"]["method"] == "POST")
