"""One task, one context: a tape cannot graft events of another context onto a task the log holds.
Before, importing such a tape (the same task id, another context, later sequence numbers) merged
the foreign events silently: the task's final answer was replaced, its context kept. The installed
CLI in a subprocess for a refusal (exit 2, the task named, the log as it was) and a merge; what prepares
the log and reads it back runs the same command in process (``installed=False``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from a2a_tape import store
from tests.support.in_process import run_in_process, without_our_variables

CLI = str(Path(sys.executable).with_name("a2a-tape"))
TAPE = Path(__file__).resolve().parents[2] / "recordings" / "sdk-v10-stream.jsonl"
TASK = "eae94752-8d54-4221-873c-d1ce09cd1df2"
CONTEXT = "09e45a74-bef4-4b1b-8f3b-c8ce5ee9ddfb"


def _cli(args: list[str], cwd: Path, *, installed: bool = True) -> subprocess.CompletedProcess[bytes]:
    if not installed:
        return run_in_process(args, cwd, without_our_variables())
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")}
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, timeout=60, env=env)


def _graft(tmp_path: Path, context: str | None, *, lead_without_context: bool = False) -> Path:
    """A tape with later events for TASK: an artifact holding another answer, then COMPLETED."""
    ctx = {"contextId": context} if context else {}
    events = [
        {
            "result": {
                "artifactUpdate": {
                    "taskId": TASK,
                    **ctx,
                    "artifact": {"artifactId": "evil", "parts": [{"text": "GRAFTED"}]},
                }
            }
        },
        {"result": {"statusUpdate": {"taskId": TASK, **ctx, "status": {"state": "TASK_STATE_COMPLETED"}}}},
    ]
    if lead_without_context:  # the first grafted event names no context: the next one does
        events.insert(0, {"result": {"statusUpdate": {"taskId": TASK, "status": {"state": "TASK_STATE_WORKING"}}}})
    lines = [{"type": "header", "a2a_tape": 1}, {"type": "exchange", "id": 1, "url": "http://x/", "task_id": TASK}]
    for n, payload in enumerate(events, 7):
        lines.append(
            {
                "type": "event",
                "position": n,
                "seq": n,
                "task_id": TASK,
                "exchange_id": 1,
                "payload": json.dumps(payload),
            }
        )
    path = tmp_path / "graft.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.mark.parametrize("lead_without_context", [False, True])
def test_events_of_another_context_are_refused_naming_the_task(tmp_path, lead_without_context):
    db = tmp_path / "log.db"
    assert _cli(["import", str(TAPE), "--db", str(db)], tmp_path, installed=False).returncode == 0
    before = _cli(["channels", TASK, "--json", "--db", str(db)], tmp_path, installed=False).stdout
    r = _cli(
        ["import", str(_graft(tmp_path, "ctx-foreign", lead_without_context=lead_without_context)), "--db", str(db)],
        tmp_path,
        installed=not lead_without_context,  # the same refusal, later in the tape: in process
    )
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"task {TASK} is in the log with context {CONTEXT}" in err and "ctx-foreign" in err
    assert _cli(["channels", TASK, "--json", "--db", str(db)], tmp_path, installed=False).stdout == before
    with store.open_store(db) as st:
        assert st.count_events() == 6


def test_later_events_of_the_same_context_are_imported(tmp_path):
    """A longer recording of the same task (the tape written back after more was recorded) merges."""
    db = tmp_path / "log.db"
    assert _cli(["import", str(TAPE), "--db", str(db)], tmp_path, installed=False).returncode == 0
    r = _cli(["import", str(_graft(tmp_path, CONTEXT)), "--db", str(db)], tmp_path)
    assert r.returncode == 0, r.stderr
    with store.open_store(db) as st:
        assert st.count_events() == 8
