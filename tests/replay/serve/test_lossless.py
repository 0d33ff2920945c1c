"""What ``serve`` answers from a recording keeps every field the agent sent, in both dialects.

A recording (hand-built with the inspection builders, in the wire shapes of the captures) is
served by the replay engine: a GetTask in the recorded dialect and in the other one, and each
stream item converted to the other dialect. Timestamps, metadata on every item and part
metadata survive; what the other dialect cannot carry is only what docs/replay.md lists.
"""

from __future__ import annotations

import anyio
import msgspec
import pytest

from a2a_tape.replay.serve.convert import encode_item
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from tests.replay.inspect.builders import Tape, items

STAMP = "2026-11-30T02:08:56.971579Z"
V1 = {"content-type": "application/json", "A2A-Version": "1.0"}
V03 = {"content-type": "application/json"}


def _recording(path, dialect: str):
    it = items(dialect, "task-lossless")
    art = it.artifact_obj("art-1", "hello", metadata={"lane": "answer"})
    art["parts"][0]["metadata"] = {"part": "meta"}
    art["name"] = "out"
    art["description"] = "the answer"
    status = msgspec.json.decode(it.status("working", "working on it"))
    key = "statusUpdate" if dialect == "1.0" else None
    upd = status["result"][key] if key else status["result"]
    upd["metadata"] = {"step": "one"}
    wrapped = {"artifactUpdate": {"taskId": it.task_id, "contextId": it.context_id, "artifact": art}}
    art_payload = (
        wrapped
        if dialect == "1.0"
        else {
            "kind": "artifact-update",
            "taskId": it.task_id,
            "contextId": it.context_id,
            "artifact": art,
            "append": False,
            "lastChunk": True,
        }
    )
    payloads = [
        it.task("submitted", "hi"),
        msgspec.json.encode(status),
        msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "result": art_payload}),
        it.status("completed"),
    ]
    tape = Tape(path)
    tape.stream(it, payloads)
    tape.close()
    return it.task_id, payloads


def _get(engine: ReplayEngine, task_id: str, dialect: str) -> dict:
    method = "GetTask" if dialect == "1.0" else "tasks/get"
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"id": task_id}})
    reply = anyio.run(engine.handle, "POST", "/", "", V1 if dialect == "1.0" else V03, body, "http://127.0.0.1:1")
    return msgspec.json.decode(reply.body)["result"]


@pytest.mark.parametrize("recorded", ["1.0", "0.3"])
@pytest.mark.parametrize("asked", ["1.0", "0.3"])
def test_get_task_keeps_timestamp_metadata_and_history_in_both_dialects(tmp_path, recorded, asked):
    task_id, _ = _recording(tmp_path / "r.db", recorded)
    lib = Library.open(tmp_path / "r.db")
    try:
        task = _get(ReplayEngine(lib), task_id, asked)
    finally:
        lib.close()
    assert task["status"]["timestamp"] == STAMP
    assert task["status"]["state"] == ("TASK_STATE_COMPLETED" if asked == "1.0" else "completed")
    assert task["metadata"] == {"step": "one"}  # the status update's metadata, merged into the task's
    # the status message the agent replaced moved into the history, as a live agent keeps it
    assert [m["messageId"] for m in task["history"]] == [f"m-user-{task_id}", f"m-agent-{task_id}"]
    art = task["artifacts"][0]
    assert art["metadata"] == {"lane": "answer"}
    assert art["name"] == "out" and art["description"] == "the answer"
    assert art["parts"][0]["metadata"] == {"part": "meta"}
    if asked == "0.3":
        assert task["kind"] == "task" and art["parts"][0]["kind"] == "text"
    else:
        assert "kind" not in task and "kind" not in art["parts"][0]


@pytest.mark.parametrize("recorded,asked", [("1.0", "0.3"), ("0.3", "1.0")])
def test_stream_items_converted_keep_timestamps_and_metadata(tmp_path, recorded, asked):
    _, payloads = _recording(tmp_path / "r.db", recorded)
    status = msgspec.json.decode(encode_item(payloads[1], asked, 3))["result"]
    if asked == "1.0":
        status = status["statusUpdate"]
    else:
        assert status["kind"] == "status-update" and status["final"] is False
    assert status["metadata"] == {"step": "one"}
    assert status["status"]["timestamp"] == STAMP
    assert status["status"]["message"]["parts"][0]["text"] == "working on it"
    art = msgspec.json.decode(encode_item(payloads[2], asked, 3))["result"]
    art = art["artifactUpdate"] if asked == "1.0" else art
    assert art["artifact"]["parts"][0]["metadata"] == {"part": "meta"}
    assert art["artifact"]["metadata"] == {"lane": "answer"}
    task = msgspec.json.decode(encode_item(payloads[0], asked, 3))["result"]
    task = task["task"] if asked == "1.0" else task
    assert task["history"][0]["role"] == ("ROLE_USER" if asked == "1.0" else "user")
