"""Output that reads well in a pipe (issue 26 item 7), through the installed CLI with its stdout
captured (no terminal, no COLUMNS): a table row is one line, not wrapped over several to fit 80
columns nobody has; counts are said as people say them ("1 event"); a tool call is named by its tool
or its call id, never by the artifact that carried it; ``channels --ignored`` says when nothing was
ignored."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from a2a_tape import store
from a2a_tape.store import Exchange, NewEvent

from .test_contract import a2a_tape

_enc = msgspec.json.Encoder()
TASK = "7d0c1a52-pipe-0000-0000-000000000001"
LONG = "a tool output long enough to wrap a table of 80 columns " * 2  # under the 120 characters a cell shows


def _rpc(result: dict[str, Any]) -> bytes:
    return _enc.encode({"jsonrpc": "2.0", "id": 1, "result": result})


def _tool(part: str, data: dict[str, Any]) -> bytes:
    artifact = {"artifactId": f"{TASK}:stream:tool:{part}", "parts": [{"kind": "data", "data": data}]}
    return _rpc({"kind": "artifact-update", "taskId": TASK, "contextId": "ctx", "artifact": artifact})


def _log(path: Path, payloads: list[bytes]) -> Path:
    with store.open_store(path) as st:
        ex = st.begin_exchange(Exchange(started_at=100.0, url="http://agent/", task_id=TASK))
        st.append_batch(
            [NewEvent(payload=p, task_id=TASK, exchange_id=ex, received_at=100.0 + i) for i, p in enumerate(payloads)]
        )
    return path


@pytest.fixture
def tool_log(tmp_path) -> Path:
    """One task: two tool calls (one named, one with neither a tool nor a call id), then completed."""
    return _log(
        tmp_path / "tools.db",
        [
            _rpc({"kind": "task", "id": TASK, "contextId": "ctx", "status": {"state": "working"}}),
            _tool("p1", {"call_id": "call-1", "tool": "read", "status": "completed", "output": LONG}),
            _tool("p2", {"status": "running", "input": {"path": "/etc/hosts"}}),
            _rpc({"kind": "status-update", "taskId": TASK, "contextId": "ctx", "status": {"state": "completed"}}),
        ],
    )


@pytest.fixture
def one_event_log(tmp_path) -> Path:
    """One task of one event (a completed task snapshot, its answer in an artifact)."""
    artifacts = [{"artifactId": "a1", "parts": [{"kind": "text", "text": "the only answer"}]}]
    task = {"kind": "task", "id": TASK, "contextId": "ctx", "status": {"state": "completed"}, "artifacts": artifacts}
    return _log(tmp_path / "one.db", [_rpc(task)])


def _pipe_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return {**env, "TERM": "dumb"}


def _run(*args: Any, cwd: Path) -> str:
    import subprocess

    from .test_contract import SCRIPT

    r = subprocess.run([str(SCRIPT), *map(str, args)], cwd=cwd, env=_pipe_env(), capture_output=True, check=False)
    assert r.returncode in (0, 1), r.stderr
    return r.stdout.decode() + r.stderr.decode()


def test_a_table_row_is_one_line_in_a_pipe(tool_log, tmp_path):
    out = _run("channels", TASK, "--db", tool_log, cwd=tmp_path)
    read = [line for line in out.splitlines() if "read" in line.split()]
    assert len(read) == 1, out
    assert LONG.strip() in read[0] and "completed" in read[0], out  # the whole row, unwrapped
    assert not any(c in out for c in "┏┃━│─"), out  # no box drawn for a log


def test_a_tool_call_is_named_by_its_tool_or_call_id_never_its_artifact(tool_log, tmp_path):
    out = _run("channels", TASK, "--db", tool_log, cwd=tmp_path)
    assert ":stream:tool:" not in out, out
    rows = [line.split() for line in out.splitlines() if "running" in line.split()]
    assert rows and rows[0][0] == "-", out


def test_channels_ignored_says_when_nothing_was_ignored(tool_log, tmp_path):
    out = _run("channels", TASK, "--ignored", "--db", tool_log, cwd=tmp_path)
    assert "no ignored events" in out, out


@pytest.mark.parametrize(
    "argv, said",
    [
        (["channels", TASK], "1 event "),
        (["grep", "only"], "1 match for"),
        (["doctor"], "doctor: 1 task"),
    ],
    ids=["channels", "grep", "doctor"],
)
def test_one_is_said_in_the_singular(one_event_log, tmp_path, argv, said):
    out = _run(*argv, "--db", one_event_log, cwd=tmp_path)
    assert said in out, out
    assert "(s)" not in out and "(es)" not in out, out


def test_import_counts_in_the_singular(one_event_log, tmp_path):
    tape = tmp_path / "one.jsonl"
    assert a2a_tape("export", TASK, "-o", tape, "--db", one_event_log, cwd=tmp_path).code == 0
    r = a2a_tape("import", tape, "--db", tmp_path / "again.db", cwd=tmp_path)
    assert r.code == 0, r.stderr
    assert "imported 1 event, 1 exchange, 1 task" in r.stderr, r.stderr
