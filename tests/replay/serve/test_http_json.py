"""The HTTP+JSON binding replayed (issue 22): a real a2a-sdk 1.3.0 agent offering HTTP+JSON (under
``/a2a/rest``, first in its card) and JSON-RPC, recorded by the proxy as the a2a-sdk client talks to
it, then answered by ``serve`` and the ``ReplayTransport`` to the same client: everything the client
sees equal to what the live agent answered (ids and times aside when the recording is another
one), in each binding, whichever binding the recording was made in.
"""

from __future__ import annotations

from typing import Any

import anyio
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
