"""``record`` asks the agent for the task once after a stream ends (issue 22 item 4): the recording
holds the agent's own GetTask answer (a replay serves GetTask as that agent answers it: agents keep
history differently), on each binding, after a local note saying why; ``--no-get-task`` leaves it
out. The run's own view (state, answer) is what the stream said; its events are every row it put in the log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from a2a_tape import store
from tests.conftest import running_sdk_agent
from tests.support.sdk_agents import two_binding_agent

CLI = str(Path(sys.executable).with_name("a2a-tape"))


def _record(url: str, db: Path, *extra: str) -> dict:
    r = subprocess.run(
        [CLI, "record", url, "hello", "--db", str(db), "--json", *extra], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _calls(db: Path) -> list[store.Exchange]:
    st = store.open_store(db)
    try:
        return [ex for ex in st.exchanges() if ex.rpc_method != "agent-card"]
    finally:
        st.close()


@pytest.mark.parametrize("binding", ["jsonrpc", "http+json"])
def test_record_keeps_the_agents_get_task_answer_after_the_stream(tmp_path, binding):
    db = tmp_path / "tape.db"
    with two_binding_agent() as agent:
        out = _record(agent, db, "--binding", binding)
    assert out["state"] == "completed"
    rows = _calls(db)
    assert [ex.rpc_method for ex in rows] == ["SendStreamingMessage", "GetTask"]
    got = rows[1]
    assert got.task_id == out["task_id"] and got.outcome == "ok" and got.binding == rows[0].binding
    st = store.open_store(db)
    try:
        streamed = [e for e in st.read_exchange(rows[0].id) if e.origin == "upstream"]
        answer = [e for e in st.read_exchange(got.id) if e.origin == "upstream"]
        notes = [e for e in st.read_task(out["task_id"]) if e.origin == "local"]
    finally:
        st.close()
    # the run's count is every row the log holds for it (tasks, channels and the UI count so): the
    # stream, our note, and the GetTask answer kept beside the stream
    assert out["events"] == len(streamed) + len(notes) + len(answer)
    item = store.decode_item(answer[0].payload)
    assert item.kind == "task" and item.body.state == "completed"
    assert any(b"GetTask" in e.payload for e in notes)


def test_no_get_task_leaves_it_out(tmp_path):
    db = tmp_path / "tape.db"
    with running_sdk_agent() as agent:
        _record(agent.url, db, "--no-get-task")
    rows = _calls(db)
    assert [ex.rpc_method for ex in rows] == ["SendStreamingMessage"]
