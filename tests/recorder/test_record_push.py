"""``record --push-receiver HOST:PORT`` (issue 33 item 1): record registers a webhook with its send, a2a-tape's
push receiver on that address, and each POST the agent makes to it is in the log, a push row of the task in the
record's run; ``--push-webhook URL`` delivers each one on to the client's webhook too. The installed CLI in a
subprocess (the first record, the one-line usage error; the other runs, whose result is what is checked, in
process: tests/support/in_process.py) against a real a2a-sdk 1.3.0 agent with push notifications on, one for the
module; the webhook a small Starlette app.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from a2a_tape import store
from a2a_tape.recorder.proxy.push_configs import PUSH_PATH
from tests.conftest import Agent, running_sdk_agent
from tests.recorder.proxy.test_push import Webhook
from tests.support.in_process import run_text_in_process
from tests.support.servers import serve_app

CLI = str(Path(sys.executable).with_name("a2a-tape"))


@pytest.fixture(scope="module")
def push_agent() -> Iterator[Agent]:
    """The a2a-sdk agent with push notifications on, for the module (each test's task and webhook its own)."""
    with running_sdk_agent(push=True) as agent:
        yield agent


def _record(url: str, db: Path, *extra: str, installed: bool = False) -> tuple[subprocess.CompletedProcess[str], dict]:
    argv = ["record", url, "hello", "--db", str(db), "--json", *extra]
    if installed:
        r = subprocess.run([CLI, *argv], capture_output=True, text=True, timeout=90)
    else:
        r = run_text_in_process(argv, timeout=90)
    assert r.returncode == 0, r.stderr
    return r, json.loads(r.stdout)


def _json(*args: str, code: int = 0) -> object:
    """What a read-only command reports (``--json``), run in this process; ``code``: its exit code."""
    r = run_text_in_process(list(args))
    assert r.returncode == code, r.stderr
    return json.loads(r.stdout)


def _rows(db: Path, task_id: str) -> tuple[list[store.Exchange], list[store.StoredEvent]]:
    st = store.open_store(db)
    try:
        return st.exchanges(task_id), st.read_task(task_id)
    finally:
        st.close()


def _state(body: bytes | None) -> str | None:
    doc = msgspec.json.decode(body or b"{}")
    return ((doc.get("statusUpdate") or doc.get("task") or {}).get("status") or {}).get("state")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
def test_record_stores_the_agents_pushes_in_its_run(push_agent, tmp_path, stream):
    db = tmp_path / "tape.db"
    extra = ("--push-receiver", "127.0.0.1:0", *([] if stream else ["--no-stream"]))
    r, out = _record(push_agent.url, db, *extra, installed=stream)  # the first case through the installed script
    assert out["state"] == "completed"
    rows, events = _rows(db, out["task_id"])
    pushes = [ex for ex in rows if ex.role == "push"]
    assert pushes and all(ex.outcome == "ok" and ex.status == 200 for ex in pushes)
    assert _state(pushes[-1].request_body) == "TASK_STATE_COMPLETED"  # record waited for the push of the end
    assert not [e for e in events if b"push-wait" in e.payload]
    send = next(ex for ex in rows if ex.role == "client" and ex.rpc_method in ("SendMessage", "SendStreamingMessage"))
    assert PUSH_PATH.encode() in (send.request_body or b"") and b'"token":"[redacted]"' in (send.request_body or b"")
    assert all(ex.request_headers.get("x-a2a-notification-token") == "[redacted]" for ex in pushes)
    show = _json("show", out["task_id"], "--db", str(db), "--json")
    assert isinstance(show, list) and any(row["origin"] == "push" for row in show)  # in the run record made
    runs = _json("tasks", "--db", str(db), "--runs", "--json")
    assert isinstance(runs, list) and any(run["task_id"] == out["task_id"] for run in runs)
    doctor = _json("doctor", out["task_id"], "--db", str(db), "--json")
    assert isinstance(doctor, dict) and [f for f in doctor["findings"] if f["code"].startswith("push-")] == []


def test_record_delivers_each_push_to_the_webhook_it_is_given(push_agent, tmp_path):
    db = tmp_path / "tape.db"
    hook = Webhook()
    with serve_app(hook.app()) as base:
        _, out = _record(push_agent.url, db, "--push-receiver", "127.0.0.1:0", "--push-webhook", base + "/hook")
        hook.wait_ended({out["task_id"]})
    rows, _ = _rows(db, out["task_id"])
    pushes = [ex for ex in rows if ex.role == "push"]
    assert [ex.request_body for ex in pushes] == [body for _, body in hook.got]  # as the webhook got them
    assert all(ex.url == base + "/hook" and ex.response_body == b'{"ok":true}' for ex in pushes)


def test_push_webhook_without_a_receiver_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run(
        [CLI, "record", "http://127.0.0.1:9", "hi", "--db", str(tmp_path / "t.db"), "--push-webhook", "http://a/h"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2 and "--push-webhook goes with --push-receiver" in r.stderr
    assert "Traceback" not in r.stderr


def test_an_agent_that_never_pushes_is_noted_and_doctor_names_it(tmp_path):
    """The a2a-sdk agent with push notifications off takes the config and never POSTs: record waits its
    --push-wait for the push of the end, notes that none came, and doctor names the end never pushed."""
    db = tmp_path / "tape.db"
    with running_sdk_agent(push=False) as agent:
        _, out = _record(agent.url, db, "--push-receiver", "127.0.0.1:0", "--push-wait", "0.5")
    rows, events = _rows(db, out["task_id"])
    assert out["state"] == "completed" and not [ex for ex in rows if ex.role == "push"]
    notes = [e.payload for e in events if e.origin == "local" and b"push-wait" in e.payload]
    assert len(notes) == 1 and b"no push of the task's end (completed) came within 0.5 s" in notes[0]
    doctor = _json("doctor", out["task_id"], "--db", str(db), "--json", code=1)  # an error found
    assert isinstance(doctor, dict)
    missed = [f for f in doctor["findings"] if f["code"] == "push-missed-state" and f["level"] == "error"]
    assert len(missed) == 1 and "completed" in missed[0]["message"]
