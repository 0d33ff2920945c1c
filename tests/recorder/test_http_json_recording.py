"""HTTP+JSON recorded by a2a-tape's own clients (issue 22, the recording side), against a real a2a-sdk
1.3.0 agent offering HTTP+JSON first (under ``/a2a/rest``) and JSON-RPC:

- ``RecordingTransport`` records every A2A request of the a2a-sdk client in HTTP+JSON (it recorded
  the card only before), and the recording answers the same client as the live agent did;
- ``record --binding http+json`` and ``--binding auto`` (which says on stderr what it picked) record
  over the card's HTTP+JSON interface; a binding the card does not offer is one line, exit 2;
- the recovery follows a task recorded over HTTP+JSON on HTTP+JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio

from a2a_tape import store
from a2a_tape.recorder.transport import RecordingTransport
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.server import create_app
from a2a_tape.replay.serve.transport import ReplayTransport
from a2a_tape.store.methods import HTTP_JSON, JSONRPC
from tests.conftest import running_sdk_agent
from tests.support.a2a_session import session
from tests.support.in_process import run_text_in_process
from tests.support.sdk_agents import two_binding_agent
from tests.support.servers import serve_app

CLI = str(Path(sys.executable).with_name("a2a-tape"))


def cli(*args: str, cwd: Path, installed: bool = True) -> subprocess.CompletedProcess[str]:
    """``a2a-tape ARGS`` by the installed script; ``installed=False``: the same command in this process
    (tests/support/in_process.py), for the runs whose result (what was recorded), not the process, is checked."""
    if not installed:
        return run_text_in_process(list(args), cwd)
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def exchanges(db: Path) -> list[store.Exchange]:
    st = store.open_store(db)
    try:
        return st.exchanges()
    finally:
        st.close()


def test_recording_transport_records_every_http_json_request_and_the_recording_answers_alike(tmp_path):
    db = tmp_path / "tape.db"
    with two_binding_agent() as agent:
        live = anyio.run(session, agent, "HTTP+JSON", RecordingTransport(db))
    rows = exchanges(db)
    calls = [ex for ex in rows if ex.rpc_method != "agent-card"]
    assert {ex.binding for ex in calls} == {HTTP_JSON}
    assert {ex.rpc_method for ex in calls} >= {"SendStreamingMessage", "SendMessage", "GetTask", "CancelTask"}
    assert all("/a2a/rest/" in ex.url for ex in calls)
    streamed = next(ex for ex in calls if ex.rpc_method == "SendStreamingMessage")
    assert streamed.streaming and streamed.task_id and streamed.outcome == "ok"
    lib = Library.open(str(db))
    try:
        replayed = anyio.run(session, "http://replay.test", "HTTP+JSON", ReplayTransport(engine=ReplayEngine(lib)))
    finally:
        lib.close()
    assert replayed == live


def test_record_binding_http_json_records_over_the_cards_http_json_interface(tmp_path):
    db = tmp_path / "tape.db"
    with two_binding_agent() as agent:
        r = cli(
            "record", agent, "hello", "--binding", "http+json", "--db", str(db), "--json", cwd=tmp_path, installed=False
        )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["state"] == "completed" and out["final_answer"] == "chunk-0 chunk-1 chunk-2 "
    calls = [ex for ex in exchanges(db) if ex.rpc_method != "agent-card"]
    assert calls[0].binding == HTTP_JSON and calls[0].http_method == "POST"
    assert calls[0].url.endswith("/a2a/rest/message:stream") and calls[0].dialect == "1.0"


def test_record_binding_auto_takes_the_cards_first_interface_and_says_which(tmp_path):
    """Said on stderr when the card lists more than one binding (a choice was made)."""
    with two_binding_agent() as agent:
        r = cli("record", agent, "hello", "--db", str(tmp_path / "a.db"), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "HTTP+JSON 1.0" in r.stderr
    assert [ex.binding for ex in exchanges(tmp_path / "a.db") if ex.rpc_method != "agent-card"][0] == HTTP_JSON
    with running_sdk_agent() as agent:  # JSON-RPC only: auto stays on it
        r = cli("record", agent.url, "hello", "--db", str(tmp_path / "b.db"), "--json", cwd=tmp_path, installed=False)
    assert r.returncode == 0, r.stderr
    assert "a2a-tape:" not in r.stderr  # one binding listed: no choice made, nothing said
    assert {ex.binding for ex in exchanges(tmp_path / "b.db") if ex.rpc_method != "agent-card"} == {JSONRPC}


def test_http_json_with_protocol_0_3_is_one_line_exit_2(tmp_path):
    with running_sdk_agent() as agent:
        r = cli(
            "record",
            agent.url,
            "hello",
            "--db",
            str(tmp_path / "t.db"),
            "--binding",
            "http+json",
            "--protocol",
            "0.3",
            cwd=tmp_path,
        )
    assert r.returncode == 2
    assert "does not go with --protocol 0.3" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_http_json_asked_for_by_name_is_tried_at_the_cards_url_when_the_card_does_not_list_it(tmp_path):
    """The user knows the agent: a card listing JSON-RPC only (``serve`` over a recording of the demo
    agent answers HTTP+JSON routes too) is tried in HTTP+JSON at its URL, and stderr says so; an
    agent without the routes answers 404: one line, exit 2."""
    demo = cli("demo", "--db", str(tmp_path / "demo.db"), cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    lib = Library.open(str(tmp_path / "demo.db"))
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            r = cli(
                "record",
                url,
                "What does a2a-tape record?",
                "--binding",
                "http+json",
                "--db",
                str(tmp_path / "rest.db"),
                "--json",
                cwd=tmp_path,
                installed=False,
            )
    finally:
        lib.close()
    assert r.returncode == 0, r.stderr
    assert "lists no HTTP+JSON 1.0 interface: tried at its URL" in r.stderr
    calls = [ex for ex in exchanges(tmp_path / "rest.db") if ex.rpc_method != "agent-card"]
    assert calls[0].binding == HTTP_JSON and calls[0].url.endswith("/message:stream")
    with running_sdk_agent() as agent:  # JSON-RPC only, no HTTP+JSON routes
        r = cli(
            "record",
            agent.url,
            "hello",
            "--binding",
            "http+json",
            "--db",
            str(tmp_path / "t.db"),
            cwd=tmp_path,
            installed=False,
        )
    assert r.returncode == 2 and "HTTP 404" in r.stderr and "Traceback" not in r.stderr


def test_recovery_follows_a_task_recorded_over_http_json_on_http_json(tmp_path):
    """A task a proxy left WORKING after an HTTP+JSON stream: ``recover`` asks the agent over
    HTTP+JSON (``GET .../tasks/{id}``), where the task was recorded (it asked JSON-RPC before)."""
    db = tmp_path / "tape.db"
    with two_binding_agent() as agent:
        st = store.open_store(db, create=True)
        try:
            ex = st.begin_exchange(
                store.Exchange(
                    started_at=1.0,
                    url=f"{agent}/a2a/rest/message:stream",
                    rpc_method="SendStreamingMessage",
                    dialect="1.0",
                    binding=HTTP_JSON,
                    outcome="dropped",
                    streaming=True,
                    role="proxy",
                    task_id="t-gone",
                )
            )
            st.append(
                store.NewEvent(
                    payload=b'{"task":{"id":"t-gone","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}',
                    task_id="t-gone",
                    exchange_id=ex,
                    received_at=1.0,
                )
            )
        finally:
            st.close()
        r = cli("recover", "--db", str(db), "--stall-timeout", "5", cwd=tmp_path, installed=False)
    assert r.returncode in (0, 1), r.stderr
    asked = [ex for ex in exchanges(db) if ex.role == "recovery" and ex.rpc_method == "GetTask"]
    assert asked, exchanges(db)
    assert asked[0].binding == HTTP_JSON and asked[0].http_method == "GET"
    assert asked[0].url.endswith("/a2a/rest/tasks/t-gone")


def test_probe_calls_an_http_json_first_agent_over_http_json(tmp_path):
    db = tmp_path / "tape.db"
    with two_binding_agent() as agent:
        r = cli("probe", agent, "--db", str(db), "--timeout", "5", cwd=tmp_path, installed=False)
    assert "Traceback" not in r.stderr
    calls = [ex for ex in exchanges(db) if ex.role == "probe" and ex.rpc_method != "agent-card"]
    assert calls and {ex.binding for ex in calls} == {HTTP_JSON}
    assert {ex.outcome for ex in calls} <= {"ok", "dropped", "closed", "error"}
    assert any(ex.http_method == "GET" and "/a2a/rest/tasks/" in ex.url for ex in calls)
