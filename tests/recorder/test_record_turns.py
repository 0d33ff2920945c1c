"""``record --continue TASK`` (the next turn of a conversation), ``--file PATH`` and ``--data JSON``
(issue 37 item 9), through the CLI (the installed script for the runs a process carries, the others in
process: tests/support/in_process.py) against a real a2a-sdk 1.3.0 agent
(:func:`tests.support.sdk_agents.serve_executor`) that says what it was sent.

A2A's rules (recorder/turns.py): a task that waits for input is continued by a message naming
it (same task, a new run of it in the log); a finished task cannot be restarted, so the next
turn is a new task in its context that names it in ``referenceTaskIds``. Before: no such options
(a user copied the ids by hand, and could send no file or data part at all)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict

from tests.support.in_process import run_text_in_process
from tests.support.sdk_agents import serve_executor

CLI = str(Path(sys.executable).with_name("a2a-tape"))


class Conversation(AgentExecutor):
    """Asks for more input when told ``ask``; otherwise answers with what it was sent (the parts,
    the tasks the message refers to), as JSON, and completes."""

    async def execute(self, ctx: RequestContext, q: EventQueue) -> None:
        msg = ctx.message
        assert msg is not None
        await q.enqueue_event(
            ctx.current_task
            or Task(
                id=ctx.task_id,
                context_id=ctx.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[msg],
            )
        )
        up = TaskUpdater(q, ctx.task_id, ctx.context_id)
        await up.start_work()
        if ctx.get_user_input() == "ask":
            await up.requires_input(up.new_agent_message([Part(text="which one?")]))
            return
        said = {
            "continued": ctx.current_task is not None,
            "references": list(msg.reference_task_ids),
            "parts": [MessageToDict(p) for p in msg.parts],
        }
        await up.add_artifact([Part(text=json.dumps(said))], artifact_id="answer", last_chunk=True)
        await up.complete()

    async def cancel(self, ctx: RequestContext, q: EventQueue) -> None:  # pragma: no cover - never asked
        await TaskUpdater(q, ctx.task_id, ctx.context_id).cancel()


@pytest.fixture(scope="module")
def conversation() -> Iterator[str]:
    """The conversation agent, one for the module: it keeps nothing between tasks, each test's tasks its own."""
    with serve_executor(
        Conversation(), name="conversation", description="says what it got", interfaces=[("JSONRPC", "1.0", "/")]
    ) as url:
        yield url


@pytest.fixture(params=["1.0", "0.3"])
def agent(conversation: str, request: pytest.FixtureRequest) -> tuple[str, str]:
    """The conversation agent, and the dialect record speaks to it."""
    return conversation, request.param


def record(
    agent: tuple[str, str], db: Path, text: str, *extra: object, installed: bool = False
) -> tuple[subprocess.CompletedProcess, dict]:
    """``record --json`` in this process (tests/support/in_process.py: what is checked is what it recorded
    and answered); ``installed``: by the installed script, for the runs that carry a promise of the process."""
    url, dialect = agent
    argv = ["record", url, text, "--db", str(db), "--protocol", dialect, "--json", *map(str, extra)]
    if installed:
        r = subprocess.run([CLI, *argv], capture_output=True, text=True, timeout=60)
    else:
        r = run_text_in_process(argv)
    return r, (json.loads(r.stdout) if r.stdout.strip() else {})


def cli_json(*args: object) -> object:
    """What a read-only command reports (``--json``), run in this process."""
    r = run_text_in_process([str(a) for a in args])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_next_turn_of_a_waiting_task_is_the_same_task_a_new_run(agent, tmp_path):
    db = tmp_path / "c.db"
    r, first = record(agent, db, "ask", installed=True)  # record --json through the installed script
    assert r.returncode == 0, r.stderr
    assert first["state"] == "input-required"
    r, second = record(agent, db, "the blue one", "--continue", first["task_id"][:8])  # a prefix names it
    assert r.returncode == 0, r.stderr
    assert (second["task_id"], second["context_id"]) == (first["task_id"], first["context_id"])
    assert second["state"] == "completed"
    assert json.loads(second["final_answer"])["continued"] is True
    runs = cli_json("tasks", "--runs", "--db", db, "--json")  # a run per turn
    assert isinstance(runs, list) and [r["state"] for r in runs] == ["input-required", "completed"]
    [row] = cli_json("tasks", "--json", "--db", db)  # type: ignore[misc]
    assert row["runs"] == 2
    # the first turn waited for input and the second followed it up: no interrupted-no-follow-up
    # (doctor examines each run alone; it said so of the first before)
    for target in (first["task_id"], first["task_id"] + "@1"):
        doc = cli_json("doctor", target, "--db", db, "--json")
        assert isinstance(doc, dict) and doc["findings"] == [], doc
    assert row["faults"] == 0 and all(r["faults"] == 0 for r in runs)


def test_the_next_turn_of_a_finished_task_is_a_new_task_in_its_context(agent, tmp_path):
    db = tmp_path / "c.db"
    r, first = record(agent, db, "hello")
    assert r.returncode == 0 and first["state"] == "completed", r.stderr
    r, second = record(agent, db, "and then?", "--continue", first["task_id"])
    assert r.returncode == 0, r.stderr
    assert second["task_id"] != first["task_id"] and second["context_id"] == first["context_id"]
    said = json.loads(second["final_answer"])
    assert said["continued"] is False and said["references"] == [first["task_id"]]
    human = subprocess.run(
        [CLI, "record", agent[0], "more", "--db", str(db), "--continue", second["task_id"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert human.returncode == 0, human.stderr
    assert f"task {second['task_id']} is finished: a new task in its context" in human.stderr
    rows = cli_json("tasks", "--json", "--db", db)
    assert isinstance(rows, list) and len(rows) == 3 and {r["context_id"] for r in rows} == {first["context_id"]}


def test_continue_names_a_task_of_the_log(agent, tmp_path):
    db = tmp_path / "c.db"
    r, first = record(agent, db, "hello")
    assert r.returncode == 0, r.stderr
    for args, said in [
        (("--continue", "nope"), "unknown task"),
        (("--continue", first["task_id"], "--context-id", "another"), "give one"),
    ]:
        r, _ = record(agent, db, "again", *args)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r, _ = record(agent, tmp_path / "none.db", "again", "--continue", first["task_id"])
    assert r.returncode == 2 and "no database at" in r.stderr, r.stderr
    assert not (tmp_path / "none.db").exists()


def test_file_and_data_parts_reach_the_agent_as_sent(agent, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_bytes(b"# notes\n\xe2\x9c\x93 done\n")
    blob = tmp_path / "blob.unknownext"
    blob.write_bytes(bytes(range(256)))
    db = tmp_path / "p.db"
    r, doc = record(agent, db, "look", "--file", notes, "--file", blob, "--data", '{"k": [1, 2]}', "--data", "[3]")
    assert r.returncode == 0, r.stderr
    parts = json.loads(doc["final_answer"])["parts"]
    assert parts[0] == {"text": "look"}
    assert parts[1]["filename"] == "notes.md" and parts[1]["mediaType"] == "text/markdown"
    assert base64.b64decode(parts[1]["raw"]) == notes.read_bytes()
    assert parts[2]["mediaType"] == "application/octet-stream" and base64.b64decode(parts[2]["raw"]) == bytes(
        range(256)
    )
    assert parts[3]["data"] == {"k": [1, 2]}
    assert parts[4]["data"] == [3]  # a value that is not an object: as sent (v0.3 carries it flagged)
    # the request as recorded holds the parts too (what a replay matches and serves)
    shown = run_text_in_process(["export", doc["task_id"], "--format", "har", "--db", str(db)])
    assert shown.returncode == 0 and "notes.md" in shown.stdout, shown.stderr


@pytest.mark.parametrize(
    "args, said",
    [
        (("--data", "{not json"), "--data is not JSON"),
        (("--data", ""), "--data is not JSON"),
        (("--file", "/nonexistent/file.txt"), "--file /nonexistent/file.txt"),
        (("--file", "."), "--file ."),
    ],
)
def test_bad_parts_are_one_line_exit_2_and_nothing_recorded(agent, tmp_path, args, said):
    r, _ = record(agent, tmp_path / "bad.db", "x", *args, installed=args == ("--data", "{not json"))  # the first row
    assert r.returncode == 2, r.stderr
    assert said in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "bad.db").exists()
