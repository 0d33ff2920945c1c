"""The official helloworld agent's shape: the agent answers a send with a Message and no task
(no task id, no context id). Through the installed ``a2a-tape``: ``record`` does not call it
completed, and ``channels``, ``export`` (every format) and ``show`` reach it as ``tasks`` lists it. Each
command runs installed on the first protocol; on the second, and where it only prepares a log, the same
command runs in process (``installed=False``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.in_process import run_text_in_process

SCRIPT = Path(sys.executable).with_name("a2a-tape")


def _run(*args: object, installed: bool = True) -> subprocess.CompletedProcess[str]:
    if not installed:
        return run_text_in_process([str(a) for a in args], timeout=120)
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120, check=False)


HOWS = [("--protocol", "0.3", "--no-stream"), ("--protocol", "1.0")]


@pytest.mark.parametrize("how", HOWS)
def test_a_lone_message_reply_is_reached_by_every_view(sdk_agent, db_path, how):
    def run(*args: object) -> subprocess.CompletedProcess[str]:  # installed on the first protocol
        return _run(*args, installed=how == HOWS[0])

    rec = _run("record", sdk_agent.url, "reply bare", *how, "--db", db_path)  # the subject: installed on both
    assert rec.returncode == 0, rec.stderr
    assert "completed" not in rec.stdout + rec.stderr  # no task, so no task state
    assert "a lone message, no task" in rec.stdout
    assert "direct reply" in rec.stdout

    [row] = json.loads(run("tasks", "--db", db_path, "--json").stdout)
    assert row["kind"] == "message" and row["context_id"] is None
    key = row["message_id"]

    channels = run("channels", key, "--db", db_path)
    assert channels.returncode == 0, channels.stderr
    assert "a lone message, no task" in channels.stdout and "direct reply" in channels.stdout
    doc = json.loads(run("channels", key[:8], "--db", db_path, "--json").stdout)  # a prefix, as for a task
    assert doc["kind"] == "message" and doc["task_id"] is None and doc["state"] is None
    assert doc["final_answer"] == "direct reply" and doc["message_id"] == key

    shown = run("show", key, "--db", db_path, "--json")
    assert shown.returncode == 0, shown.stderr
    assert [r["kind"] for r in json.loads(shown.stdout)] == ["message"]

    tape = run("export", key, "--db", db_path)
    assert tape.returncode == 0, tape.stderr
    lines = [json.loads(line) for line in tape.stdout.splitlines()]
    assert [x["type"] for x in lines] == ["header", "exchange", "event"]
    assert "direct reply" in lines[-1]["payload"]
    har = run("export", key, "--format", "har", "--db", db_path)
    assert har.returncode == 0, har.stderr
    [entry] = json.loads(har.stdout)["log"]["entries"]
    assert "direct reply" in entry["response"]["content"]["text"]
    mermaid = run("export", key, "--format", "mermaid", "--db", db_path)
    assert mermaid.returncode == 0 and f"message {key} (no task)" in mermaid.stdout
    html = run("export", key, "--format", "html", "--db", db_path)
    assert html.returncode == 0, html.stderr
    assert "A lone Message reply" in html.stdout and "direct reply" in html.stdout

    # the exported tape imports as the same lone message
    copy = db_path.with_name("copy.db")
    (db_path.parent / "one.jsonl").write_text(tape.stdout)
    assert _run("import", db_path.parent / "one.jsonl", "--db", copy, installed=False).returncode == 0
    channels = _run("channels", key, "--db", copy, "--json", installed=False)
    assert json.loads(channels.stdout)["final_answer"] == "direct reply"


def test_an_unknown_key_is_still_one_line(db_path, sdk_agent):
    assert _run("record", sdk_agent.url, "reply bare", "--db", db_path, installed=False).returncode == 0
    for command in ("channels", "export"):
        r = _run(command, "no-such-thing", "--db", db_path)
        assert r.returncode == 2
        assert r.stderr.strip().splitlines() == ["a2a-tape: error: unknown task: no-such-thing (see 'a2a-tape tasks')"]
