"""The pytest plugin's hooks as a user meets them (a pytester subprocess, a real a2a-sdk agent):
``before_record_request`` / ``before_record_answer`` on the marker shape what ``record_mode="once"``
writes to the tape (redaction after them), ``match_on`` from the ``a2a_tape_config`` fixture
(pytest-recording's ``vcr_config``) decides the replay, and a hook that raises fails its test
with one line; a marker's keyword wins over the config's."""

from __future__ import annotations

import re

from tests.conftest import running_sdk_agent

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest


def first_word(request, recorded):
    return request.text.split()[:1] == recorded.text.split()[:1]


@pytest.fixture
def a2a_tape_config():
    return {"match": "order", "match_on": first_word}
"""

USER_MODULE = """
import dataclasses
import json
import os

import httpx
import pytest


def body(text):
    message = {"kind": "message", "messageId": "m-1", "role": "user", "parts": [{"kind": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}})


def no_working(answer):
    result = answer.json().get("result", {})
    if result.get("kind") == "status-update" and result["status"]["state"] == "working":
        return None
    return answer


def with_a_secret(request):
    return dataclasses.replace(request, headers=(*request.headers, ("x-api-key", "PLUGIN-SEKRET")))


@pytest.mark.a2a_tape(
    "recordings/hooks.jsonl", record_mode="once", before_record_request=with_a_secret, before_record_answer=no_working
)
def test_record_then_replay(a2a_tape):
    with httpx.Client(transport=a2a_tape.transport) as c:
        with c.stream("POST", "http://agent/", content=body(os.environ["TEXT"])) as r:
            datas = [line for line in r.iter_lines() if line.startswith("data:")]
    assert "completed" in datas[-1]


@pytest.mark.a2a_tape("recordings/hooks.jsonl", match_on=None)
def test_the_marker_wins_over_the_config(a2a_tape):
    # the config's matcher would refuse "beta" (first word); the marker drops it: order alone answers
    with httpx.Client(transport=a2a_tape.transport) as c:
        with c.stream("POST", "http://agent/", content=body("beta 9")) as r:
            datas = [line for line in r.iter_lines() if line.startswith("data:")]
    assert "completed" in datas[-1]


def explode(request):
    raise ValueError("no recording today")


@pytest.mark.a2a_tape("recordings/hooks.jsonl", before_record_request=explode)
def test_a_hook_that_raises(a2a_tape):
    with httpx.Client(transport=a2a_tape.transport) as c:
        c.post("http://agent/", content=body("alpha 3"))  # the client may ignore the error: the plugin does not
"""

LINE = "a2a-tape: before_record_request raised ValueError: no recording today"


def test_marker_hooks_record_config_matcher_replays_and_a_raising_hook_fails_in_one_line(pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_user=USER_MODULE)
    (pytester.path / "recordings").mkdir()
    monkeypatch.setenv("TEXT", "alpha 1")
    with running_sdk_agent() as agent:
        monkeypatch.setenv("A2A_TAPE_UPSTREAM", agent.url)
        first = pytester.runpytest_subprocess("-p", "no:cacheprovider")
        first.assert_outcomes(passed=2, failed=1)
        assert agent.executor.executions == 1
    first.stdout.fnmatch_lines([f"*{LINE}*"])
    assert "Traceback" not in first.stdout.str()
    tape = (pytester.path / "recordings" / "hooks.jsonl").read_text()
    assert "x-api-key" in tape and "PLUGIN-SEKRET" not in tape  # redaction ran after the hook
    assert "chunk-2" in tape and not re.search(r'\\"state\\":\s*\\"working\\"', tape)  # the answer hook's drop

    # offline: "alpha 2" was never recorded; the config's matcher (first word, in order) answers it
    monkeypatch.delenv("A2A_TAPE_UPSTREAM")
    monkeypatch.setenv("TEXT", "alpha 2")
    again = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--a2a-tape-record-mode=none")
    again.assert_outcomes(passed=2, failed=1)
    again.stdout.fnmatch_lines([f"*{LINE}*"])
