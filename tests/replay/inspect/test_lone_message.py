"""A send answered by a lone Message that names no task: ``tasks`` lists it (as a message
exchange), ``show`` reaches it by message id or context id, and ``record --json`` does not claim
a task state for a task that never existed."""

from __future__ import annotations

import json

import pytest

from tests.replay.inspect.conftest import cli


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
def test_a_lone_message_reply_is_listed_shown_and_reported_truly(sdk_agent, db_path, protocol):
    run = cli("record", sdk_agent.url, "reply alone", "--protocol", protocol, "--db", db_path, "--json")
    assert run.code == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["task_id"] is None
    assert doc["kind"] == "message"
    assert doc["state"] is None  # no task, so no task state (never "completed")
    assert doc["final_answer"] == "direct reply"
    assert doc["message_id"]

    rows = cli("tasks", "--db", db_path, "--json").json()
    [row] = [r for r in rows if r["kind"] == "message"]
    assert row["task_id"] is None and row["state"] is None
    assert row["message_id"] == doc["message_id"]
    assert row["final_answer"] == "direct reply"

    for key in (row["message_id"], row["context_id"]):
        shown = cli("show", key, "--db", db_path, "--json")
        assert shown.code == 0, shown.stderr
        kinds = [r["kind"] for r in shown.json()]
        assert "message" in kinds

    human = cli("tasks", "--db", db_path)
    assert human.code == 0 and "message" in human.stdout
