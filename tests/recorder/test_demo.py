"""``a2a-tape demo`` as a user runs it (the installed script, a subprocess), and the demo agent's
channels as ``a2a-tape channels`` rebuilds them from what ``record`` stored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from a2a_tape import store
from a2a_tape.recorder.demo_agent import ANSWER, REASONING, make_demo_app
from tests.recorder.conftest import run_cli
from tests.support.servers import serve_app

SCRIPT = Path(sys.executable).parent / "a2a-tape"


def test_demo_subprocess_records_one_session_and_says_what_next(tmp_path):
    db = tmp_path / "demo.db"
    env = {k: v for k, v in os.environ.items() if k != "A2A_TAPE_DB"}
    proc = subprocess.run(
        [str(SCRIPT), "demo", "--db", str(db)], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    flat = " ".join(proc.stdout.split())
    assert "a2a-tape channels" in flat and "what to try next" in flat
    assert "a2a-tape ui" in flat  # the next step people take: the log in a browser
    with store.open_store(db) as st:
        (task,) = st.task_events()
        # task, working, 3 reasoning, tool call, 3 answer chunks, final snapshot, completed; then
        # the note and the agent's answer to the GetTask record asks once after the stream
        assert task.events == 13
    ch = run_cli("channels", task.task_id, "--db", str(db), "--json")
    assert ch.code == 0, ch.stderr
    doc = ch.json
    assert doc["state"] == "completed"
    # the final snapshot (append: true with the full text) replaced the answer, never doubled it
    assert doc["final_answer"] == "".join(ANSWER)
    assert doc["reasoning"] == "".join(REASONING)
    assert len(doc["tool_calls"]) == 1


def test_demo_uses_default_db_from_env(tmp_path, monkeypatch):
    """Without --db the demo records into $A2A_TAPE_DB (else ./a2a-tape.db)."""
    db = tmp_path / "from-env.db"
    monkeypatch.setenv("A2A_TAPE_DB", str(db))
    run = run_cli("demo")
    assert run.code == 0, run.stderr
    with store.open_store(db) as st:
        assert len(st.task_events()) == 1


def test_recorded_channels_match_in_both_dialects(db_path):
    """A session of the demo agent recorded in 1.0 and in 0.3 rebuilds the same channels."""
    with serve_app(make_demo_app(delay=0)) as url:
        answers = []
        for proto in ("1.0", "0.3"):
            run = run_cli("record", url, "hi", "--protocol", proto, "--db", str(db_path), "--json")
            assert run.code == 0, run.stderr
            ch = run_cli("channels", run.json["task_id"], "--db", str(db_path), "--json").json
            assert ch["final_answer"] == run.json["final_answer"] == "".join(ANSWER)
            answers.append((ch["final_answer"], ch["reasoning"], len(ch["tool_calls"]), ch["ignored_events"]))
    assert answers[0] == answers[1]


def test_the_a2a_sdk_client_understands_the_demo_agent():
    """Our starlette demo agent speaks A2A as a2a-sdk 1.3.0 reads it (v1.0, streaming)."""
    import anyio
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

    async def main(url: str) -> list:
        async with httpx.AsyncClient() as http:
            client = await create_client(url, ClientConfig(httpx_client=http))
            req = SendMessageRequest(
                message=Message(message_id="m-demo-1", role=Role.ROLE_USER, parts=[Part(text="hi")])
            )
            return [ev async for ev in client.send_message(req)]

    with serve_app(make_demo_app(delay=0)) as url:
        events = anyio.run(main, url)
    assert len(events) == 11
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
