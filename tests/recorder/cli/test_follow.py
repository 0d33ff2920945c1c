"""``a2a-tape show TASK --follow``: a second process sees new events as they are committed,
and stops when the task ends (SQLite, and PostgreSQL through LISTEN/NOTIFY)."""

from __future__ import annotations

import json
import subprocess
import sys

from a2a_tape import store
from a2a_tape.store import NewEvent


def _status(task: str, state: str) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"statusUpdate": {"taskId": task, "contextId": "c", "status": {"state": state}}},
        }
    ).encode()


def _chunk(task: str, text: str) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "artifactUpdate": {
                    "taskId": task,
                    "contextId": "c",
                    "artifact": {"artifactId": "a", "parts": [{"text": text}]},
                    "append": True,
                }
            },
        }
    ).encode()


def _follow_while_writing(location: str) -> list[dict]:
    st = store.open_store(location)
    st.append(NewEvent(payload=_status("t1", "TASK_STATE_WORKING"), task_id="t1"))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "a2a_tape.cli",
            "show",
            "t1",
            "--follow",
            "--json",
            "--idle-timeout",
            "60",
            "--db",
            location,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())  # the event already there: the follower is running
    assert first["seq"] == 1
    st.append(NewEvent(payload=_chunk("other", "not mine"), task_id="other"))
    st.append(NewEvent(payload=_chunk("t1", "hello "), task_id="t1"))
    st.append(NewEvent(payload=_status("t1", "TASK_STATE_COMPLETED"), task_id="t1"))
    out, errs = proc.communicate(timeout=60)  # it stops by itself: the task reached a terminal state
    assert proc.returncode == 0, errs
    st.close()
    return [first] + [json.loads(line) for line in out.splitlines()]


def test_follow_sqlite(tmp_path):
    rows = _follow_while_writing(str(tmp_path / "f.db"))
    assert [r["seq"] for r in rows] == [1, 2, 3]
    assert [r["kind"] for r in rows] == ["status", "artifact", "status"]
    assert rows[1]["data"]["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"] == "hello "


def test_follow_postgres(pg_url):
    rows = _follow_while_writing(pg_url)
    assert [r["seq"] for r in rows] == [1, 2, 3]


def test_follow_idle_timeout_ends_quietly(tmp_path):
    from typer.testing import CliRunner

    from a2a_tape.cli import app

    db = tmp_path / "q.db"
    with store.open_store(db) as st:
        st.append(NewEvent(payload=_status("t1", "TASK_STATE_WORKING"), task_id="t1"))
    res = CliRunner().invoke(app, ["show", "t1", "--follow", "--idle-timeout", "0.3", "--db", str(db)])
    assert res.exit_code == 0
    assert "status" in res.stdout and "working" in res.stdout
