"""At its exit, ``record`` moves what the process built out of the garbage collector's reach (``gc.freeze``),
so the interpreter's exit does not walk a long stream's heap: nothing is lost by it. Through the
installed CLI, against a real agent streaming thousands of chunks, stdout to a pipe: the whole
report is printed and every event is in the log, read by another process after the exit."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from a2a_tape.recorder.demo_agent import AgentHost, Chunk, HostedTask, Status
from tests.support.servers import serve_app

CLI = str(Path(sys.executable).with_name("a2a-tape"))
CHUNKS = 5_000


async def _script(host: AgentHost, task: HostedTask) -> None:
    host.emit(task, Status("working"))
    for i in range(CHUNKS):
        host.emit(task, Chunk("answer", f"chunk-{i} ", append=i > 0, last_chunk=i == CHUNKS - 1))
    host.emit(task, Status("completed"))


@pytest.fixture(scope="module")
def agent():
    with serve_app(AgentHost(_script, name="long-agent").app()) as url:
        yield url


ANSWER = "".join(f"chunk-{i} " for i in range(CHUNKS))


def _log_events(db: Path, task_id: str) -> list[bytes]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT payload FROM events WHERE task_id = ? ORDER BY seq", (task_id,))]
    finally:
        conn.close()


def test_a_long_record_json_prints_its_whole_report_and_logs_every_event(agent, tmp_path):
    db = tmp_path / "log.db"
    r = subprocess.run([CLI, "record", agent, "go", "--json", "--db", str(db)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # the whole document, to its last byte
    assert r.stdout.endswith(b"\n")
    assert doc["state"] == "completed" and doc["final_answer"] == ANSWER
    payloads = _log_events(db, doc["task_id"])
    assert len(payloads) >= CHUNKS + 2  # the task, working, the chunks, completed, GetTask's answer, a note
    assert doc["events"] == len(payloads)
    assert sum(b'"chunk-' in p for p in payloads) == CHUNKS + 1  # each chunk, and GetTask's task holds them


def test_a_long_record_to_a_pipe_prints_the_whole_answer(agent, tmp_path):
    db = tmp_path / "log.db"
    r = subprocess.run([CLI, "record", agent, "go", "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ANSWER.strip() in r.stdout
    assert "completed" in r.stderr.splitlines()[-1]
