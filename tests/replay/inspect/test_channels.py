"""``a2a-tape tasks`` and ``a2a-tape channels`` through CliRunner (and the installed script once)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from a2a_tape.cli import app
from a2a_tape.store import NewEvent, open_store
from tests.replay.builders import art03, blocks, oc, status03, task03

RECORDINGS = Path(__file__).resolve().parents[3] / "recordings"
runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def one_line_error(res):
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("a2a-tape: error:"), res.stderr
    return lines[0]


@pytest.fixture
def db(tmp_path):
    """Three tasks: t-old (completed, ctx-a), t-mid (working, ctx-b), t-new (failed, ctx-a)."""
    path = tmp_path / "tape.db"
    with open_store(path) as st:
        st.append_batch(
            [
                NewEvent(payload=task03("t-old", "submitted", user="hi"), task_id="t-old", received_at=1000.0),
                NewEvent(
                    payload=art03("t-old", "t-old:stream:reasoning", "because " * 20, meta=oc("reasoning")),
                    task_id="t-old",
                    received_at=1001.0,
                ),
                NewEvent(
                    payload=art03(
                        "t-old",
                        "t-old:stream:tool:c1",
                        data={
                            "call_id": "c1",
                            "tool": "grep_files",
                            "status": "completed",
                            "input": {"q": "x"},
                            "output": "3 hits",
                        },
                    ),
                    task_id="t-old",
                    received_at=1001.5,
                ),
                NewEvent(
                    payload=art03("t-old", "t-old:stream", "The answer.", meta=oc("final_answer")),
                    task_id="t-old",
                    received_at=1002.0,
                ),
                NewEvent(
                    payload=art03(
                        "t-old", "t-old:stream", "junk", append=True, meta=oc("final_answer", message_id=None)
                    ),
                    task_id="t-old",
                    received_at=1002.5,
                ),
                NewEvent(payload=status03("t-old", "completed"), task_id="t-old", received_at=1003.0),
                NewEvent(payload=status03("t-mid", "working"), task_id="t-mid", received_at=2000.0),
                NewEvent(payload=status03("t-new", "working"), task_id="t-new", received_at=3000.0),
                NewEvent(payload=status03("t-new", "failed", "out of tokens"), task_id="t-new", received_at=3001.0),
            ]
        )
    # t-mid and t-new have context "ctx"; give t-old its own by a snapshot context id
    return path


def tasks_json(*args):
    res = run("tasks", "--json", *args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_tasks_json_newest_first_with_the_documented_keys(db):
    rows = tasks_json("--db", db)
    assert [r["task_id"] for r in rows] == ["t-new", "t-mid", "t-old"]
    for r in rows:
        assert {"task_id", "context_id", "state", "events", "first_at", "last_at"} <= set(r)
    old = rows[-1]
    assert (old["state"], old["events"], old["first_at"], old["last_at"]) == ("completed", 6, 1000.0, 1003.0)


def test_tasks_filters(db):
    assert [r["task_id"] for r in tasks_json("--db", db, "--state", "failed")] == ["t-new"]
    assert [r["task_id"] for r in tasks_json("--db", db, "--state", "TASK_STATE_COMPLETED,working")] == [
        "t-mid",
        "t-old",
    ]
    assert [r["task_id"] for r in tasks_json("--db", db, "--state", "completed", "--state", "failed")] == [
        "t-new",
        "t-old",
    ]
    assert [r["task_id"] for r in tasks_json("--db", db, "--context", "ctx", "--state", "working")] == ["t-mid"]
    assert tasks_json("--db", db, "--context", "nope") == []
    assert [r["task_id"] for r in tasks_json("--db", db, "--since", "1500")] == ["t-new", "t-mid"]
    assert [r["task_id"] for r in tasks_json("--db", db, "--since", "1970-01-01T00:40:00Z")] == ["t-new"]  # 2400 s
    assert [r["task_id"] for r in tasks_json("--db", db, "--since", "1970-01-01 00:40")] == ["t-new"]  # no zone: UTC
    assert [r["task_id"] for r in tasks_json("--db", db, "--limit", "2")] == ["t-new", "t-mid"]


def test_tasks_bad_filters_exit_2_with_one_line(db):
    assert "--since" in one_line_error(run("tasks", "--db", db, "--since", "last tuesday"))
    assert "--state" in one_line_error(run("tasks", "--db", db, "--state", "finished"))


def test_tasks_human(db):
    res = run("tasks", "--db", db)
    assert res.exit_code == 0
    for word in ("t-old", "t-mid", "t-new", "completed", "failed"):
        assert word in res.stdout
    assert res.stdout.index("t-new") < res.stdout.index("t-old")


def test_channels_json_shape(db):
    res = run("channels", "t-old", "--db", db, "--json")
    assert res.exit_code == 0
    v = json.loads(res.stdout)
    assert {"task_id", "state", "final_answer", "reasoning", "tool_calls", "artifacts", "ignored_events"} <= set(v)
    assert (v["final_answer"], v["state"], v["ignored_events"]) == ("The answer.", "completed", 1)
    assert v["reasoning"] == "because " * 20
    assert [(t["tool"], t["output"]) for t in v["tool_calls"]] == [("grep_files", "3 hits")]
    for a in v["artifacts"]:
        assert {"artifact_id", "channel", "text"} <= set(a)


def test_channels_human_answer_main_reasoning_collapsed_tools_table(db):
    res = run("channels", "t-old", "--db", db)
    assert res.exit_code == 0
    text = res.stdout
    assert "final answer" in text and "The answer." in text
    assert "because because because because because because" not in text  # collapsed
    assert "--reasoning" in text
    assert "grep_files" in text and "3 hits" in text
    assert "junk" not in text
    assert "1 ignored event (--ignored" in text
    full = run("channels", "t-old", "--db", db, "--reasoning").stdout
    assert "because because because because because because" in full.replace("\n", " ").replace("  ", " ")


def test_channels_ignored_lists_the_ignored_events(db):
    res = run("channels", "t-old", "--db", db, "--ignored")
    assert "no message_id" in res.stdout and "ignored events (1)" in res.stdout


def test_channels_failed_task_shows_state_and_reason(db):
    res = run("channels", "t-new", "--db", db)
    assert res.exit_code == 0
    assert "failed" in res.stdout and "out of tokens" in res.stdout


def test_channels_accepts_a_unique_prefix(db):
    assert json.loads(run("channels", "t-o", "--db", db, "--json").stdout)["task_id"] == "t-old"


def test_channels_unknown_task_and_missing_db_exit_2(db, tmp_path):
    assert "unknown task" in one_line_error(run("channels", "nope", "--db", db))
    assert "no database" in one_line_error(run("channels", "t-old", "--db", tmp_path / "missing.db"))
    assert "no database" in one_line_error(run("tasks", "--db", tmp_path / "missing.db"))
    assert not (tmp_path / "missing.db").exists()


def test_commands_catch_up_with_new_events(db):
    assert json.loads(run("channels", "t-mid", "--db", db, "--json").stdout)["state"] == "working"
    with open_store(db) as st:
        st.append(
            NewEvent(payload=art03("t-mid", "t-mid:stream", "ha", meta=blocks("text", event_id="e1")), task_id="t-mid")
        )
        st.append(NewEvent(payload=status03("t-mid", "completed"), task_id="t-mid", received_at=2001.0))
    v = json.loads(run("channels", "t-mid", "--db", db, "--json").stdout)
    assert (v["state"], v["final_answer"], v["profile"]) == ("completed", "ha", "opencode-blocks")
    assert [r["state"] for r in tasks_json("--db", db) if r["task_id"] == "t-mid"] == ["completed"]


def test_installed_script_prints_only_json_on_stdout(tmp_path):
    db = tmp_path / "g.db"
    exe = Path(sys.executable).parent / "a2a-tape"
    assert run("import", RECORDINGS / "opencode-final-snapshot.jsonl", "--db", db).exit_code == 0  # in process
    proc = subprocess.run([exe, "tasks", "--json", "--db", db], capture_output=True, check=True)
    rows = json.loads(proc.stdout)
    assert sorted(r["task_id"] for r in rows) == ["oc-snap-1", "oc-snap-2"]
    proc = subprocess.run([exe, "channels", "oc-snap-2", "--json", "--db", db], capture_output=True, check=True)
    assert json.loads(proc.stdout)["final_answer"] == "Hello world!"
