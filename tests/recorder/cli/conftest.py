"""Helpers for CLI tests: run ``cli.app`` in-process, and a small recorded log."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from a2a_tape import store
from a2a_tape.store import Exchange, NewEvent


@dataclass
class Run:
    code: int
    stdout: bytes
    stderr: str


def run_cli(*args: str) -> Run:
    """Run the real CLI in-process (stdout kept as bytes: ``show --raw`` writes raw bytes)."""
    from a2a_tape.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return Run(result.exit_code, result.stdout_bytes, result.stderr)


def assert_bad_input(r: Run, *needles: str) -> str:
    """Exit 2, one line on stderr starting with 'a2a-tape: error:', no traceback, nothing on stdout."""
    lines = r.stderr.splitlines()
    assert r.code == 2, (r.code, r.stderr)
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("a2a-tape: error: "), lines[0]
    assert "Traceback" not in r.stderr
    assert r.stdout == b""
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


_enc = msgspec.json.Encoder()
TASK = "eae94752-8d54-4221-873c-d1ce09cd1df2"


def v1(result: dict) -> bytes:
    return _enc.encode({"result": result, "id": 1, "jsonrpc": "2.0"})


PAYLOADS = [
    v1({"task": {"id": TASK, "contextId": "c1", "status": {"state": "TASK_STATE_SUBMITTED"}}}),
    v1({"statusUpdate": {"taskId": TASK, "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}}),
    v1(
        {
            "artifactUpdate": {
                "taskId": TASK,
                "contextId": "c1",
                "artifact": {"artifactId": "art-1", "parts": [{"text": "chunk-0 "}]},
            }
        }
    ),
    b"\xff\xfe not json \x00\r\n",
    v1(
        {
            "artifactUpdate": {
                "taskId": TASK,
                "contextId": "c1",
                "artifact": {"artifactId": "art-1", "parts": [{"text": "chunk-1"}]},
                "append": True,
            }
        }
    )
    + b"\r\n",
    v1({"statusUpdate": {"taskId": TASK, "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}}),
]


def make_log(path: Path) -> None:
    with store.open_store(path) as st:
        ex = st.begin_exchange(
            Exchange(started_at=100.0, url="http://agent/", rpc_method="SendStreamingMessage", task_id=TASK)
        )
        other = st.begin_exchange(Exchange(started_at=101.0, url="http://agent/", task_id="other-task"))
        st.append_batch(
            [
                NewEvent(payload=p, task_id=TASK, exchange_id=ex, received_at=100.0 + i / 10)
                for i, p in enumerate(PAYLOADS)
            ]
            + [
                NewEvent(
                    payload=PAYLOADS[1].replace(TASK.encode(), b"other-task"),
                    task_id="other-task",
                    exchange_id=other,
                    received_at=101.5,
                )
            ]
        )
        st.append(
            NewEvent(
                payload=store.local_note("stalled", "no progress", TASK),
                task_id=TASK,
                origin="local",
                received_at=102.0,
            )
        )


def count_events(path: Path) -> int:
    with store.open_store(path, create=False) as st:
        return st.count_events()


@pytest.fixture
def log_db(tmp_path) -> Path:
    """A database holding two tasks (8 events, one payload not JSON, one local note)."""
    path = tmp_path / "log.db"
    make_log(path)
    return path
