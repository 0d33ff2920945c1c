"""The stream is what the client saw; the agent's stored copy is evidence (issue 30 item 2).

``record`` asks GetTask once after a stream that ended the task. That answer is the agent's stored
task: replay answers GetTask with it, but it never rewrites the channels the stream built, and
doctor names how it differs (``stored-copy-differs``). The agent here is a real a2a-sdk 1.3.0 agent
streaming the opencode contracts, whose SDK task store folds them naively
(tests/support/contract_agents.py); the plain a2a-sdk agent stores what it streamed.
Through the CLI, with its defaults: the first case's ``record`` by the installed script, the other runs in
process (tests/support/in_process.py), where what is checked (what was recorded, what is read of it) is the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import running_sdk_agent
from tests.support.contract_agents import ANSWER, ECHO_ANSWER, contract_agent
from tests.support.in_process import run_text_in_process

CLI = str(Path(sys.executable).with_name("a2a-tape"))

CASES = {
    # contract: (the answer the stream gives, what doctor says of the stored copy, or None)
    "channels": ("".join(ANSWER), None),
    "blocks": ("".join(ANSWER), "holds the streamed text twice"),
    "echo-user": (ECHO_ANSWER, "holds the user's own text before the answer"),
}


def _cli(*args: str, installed: bool = False) -> subprocess.CompletedProcess[str]:
    if installed:
        return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60)
    return run_text_in_process(list(args))


def _record_and_read(
    url: str, text: str, db: Path, *, installed: bool = False
) -> tuple[dict, dict, subprocess.CompletedProcess[str]]:
    r = _cli("record", url, text, "--db", str(db), "--json", installed=installed)
    assert r.returncode == 0, r.stderr
    recorded = json.loads(r.stdout)
    c = _cli("channels", recorded["task_id"], "--db", str(db), "--json")
    assert c.returncode == 0, c.stderr
    return recorded, json.loads(c.stdout), _cli("doctor", "--db", str(db), "--json")


@pytest.fixture(scope="module")
def agent():
    with contract_agent() as url:
        yield url


@pytest.mark.parametrize("contract", sorted(CASES))
def test_channels_after_record_are_the_stream_not_the_stored_copy(agent, tmp_path, contract):
    answer, finding = CASES[contract]
    db = tmp_path / "tape.db"
    recorded, channels, doctor = _record_and_read(agent, f"hello {contract}", db, installed=contract == min(CASES))
    assert recorded["final_answer"] == answer
    assert channels["final_answer"] == answer == recorded["final_answer"]  # record --json and channels agree
    assert channels["state"] == "completed"
    stored = [f for f in json.loads(doctor.stdout)["findings"] if f["code"] == "stored-copy-differs"]
    if finding is None:
        assert stored == []
        return
    assert len(stored) == 1 and finding in stored[0]["message"], stored
    assert stored[0]["level"] == "warning" and len(stored[0]["positions"]) == 2  # the stream's end, the copy
    # the stored copy is kept: replay answers GetTask with it, as the agent did
    shown = _cli("show", recorded["task_id"], "--db", str(db), "--json")
    assert shown.returncode == 0 and "GetTask" in shown.stdout


def test_a_store_that_keeps_what_it_streamed_has_no_finding(tmp_path):
    db = tmp_path / "tape.db"
    with running_sdk_agent() as sdk:
        recorded, channels, doctor = _record_and_read(sdk.url, "hello", db)
    assert channels["final_answer"] == recorded["final_answer"] == "chunk-0 chunk-1 chunk-2 "
    assert doctor.returncode == 0, doctor.stdout
    assert [f for f in json.loads(doctor.stdout)["findings"] if f["code"] == "stored-copy-differs"] == []
