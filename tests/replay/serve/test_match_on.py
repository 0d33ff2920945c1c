"""``match_on``: a user's matcher deciding which recorded send answers a replayed request
(vcrpy's ``match_on``), on ``ReplayTransport``; the pytest plugin's is tests/replay/test_plugin_hooks.py.

The recording is made by a real a2a-sdk agent through ``RecordingTransport``: two sends,
"alpha 1" and "beta 2", each its own task.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_tape import A2ARequest, RecordingTransport, ReplayTransport
from tests.conftest import running_sdk_agent


def _body(text: str, mid: str) -> bytes:
    message = {"kind": "message", "messageId": mid, "role": "user", "parts": [{"kind": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": "r1", "method": "message/send", "params": {"message": message}}).encode()


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("match_on") / "two.db"
    with running_sdk_agent() as agent, httpx.Client(transport=RecordingTransport(db), timeout=30) as http:
        for text, mid in (("alpha 1", "m-a"), ("beta 2", "m-b")):
            assert http.post(agent.url + "/", content=_body(text, mid)).status_code == 200
    return db


def _send(transport: ReplayTransport, text: str) -> dict[str, Any]:
    with httpx.Client(transport=transport) as http:
        return http.post("http://replay/", content=_body(text, "m-new")).json()


def _history_text(answer: dict[str, Any]) -> str:
    return answer["result"]["history"][0]["parts"][0]["text"]


def first_word(request: A2ARequest, recorded: A2ARequest) -> bool:
    return request.text.split()[:1] == recorded.text.split()[:1]


@pytest.mark.parametrize("match", ["method-text", "order"])
def test_a_matcher_answers_what_the_mode_alone_would_miss(recording, match):
    """With ``order`` the matcher alone decides; with ``method-text`` it narrows: the text differs,
    so the mode offers nothing and the request misses, as it would without a matcher."""
    with ReplayTransport(recording, match=match, match_on=first_word) as replay:
        answer = _send(replay, "beta 99")
    if match == "order":
        assert _history_text(answer) == "beta 2"  # not the first recorded (alpha): the matcher chose
    else:
        assert answer["error"]["code"] and "no recording matches" in answer["error"]["message"]


def test_several_matchers_all_must_agree_and_an_assertion_says_why(recording):
    def same_method(request: A2ARequest, recorded: A2ARequest) -> None:
        assert request.method == recorded.method, "another method"

    def never_beta(request: A2ARequest, recorded: A2ARequest) -> None:
        assert "beta" not in recorded.text, f"recorded {recorded.text!r} is off limits"

    with ReplayTransport(recording, match="order", match_on=[same_method, first_word, never_beta]) as replay:
        assert _history_text(_send(replay, "alpha 7")) == "alpha 1"
        missed = _send(replay, "beta 2")
        assert replay.hook_errors == []
    line = missed["error"]["message"]
    assert "no recording matches" in line and "\n" not in line
    assert "match_on: " in line  # the closest recording, and why a matcher turned it down


def test_the_matcher_sees_both_requests_as_recorded(recording):
    seen: list[tuple[A2ARequest, A2ARequest]] = []

    def spy(request: A2ARequest, recorded: A2ARequest) -> bool:
        seen.append((request, recorded))
        return True

    with ReplayTransport(recording, match="order", match_on=spy) as replay:
        _send(replay, "alpha 1")
    request, recorded = seen[0]
    assert request.method == recorded.method == "message/send"
    assert request.url == "http://replay/" and recorded.url.startswith("http://127.0.0.1:")
    assert request.json()["params"]["message"]["messageId"] == "m-new"
    assert recorded.text == "alpha 1" and recorded.http_method == "POST"


def test_a_matcher_that_raises_is_one_line(recording):
    def broken(request: A2ARequest, recorded: A2ARequest) -> bool:
        raise KeyError("no such field")

    with ReplayTransport(recording, match="order", match_on=broken) as replay:
        answer = _send(replay, "alpha 1")
        lines = replay.hook_errors
    message = answer["error"]["message"]
    assert message == "a2a-tape: match_on matcher broken raised KeyError: 'no such field'"
    assert lines == [message]


def test_the_record_hook_shapes_a_replayed_request_before_it_is_matched(recording):
    """vcrpy's rule: ``before_record_request`` is applied to a replayed request too, so a
    request recorded through a hook is found again (the digits dropped on both sides)."""

    def no_digits(request: A2ARequest) -> A2ARequest:
        body = request.body
        for digit in b"0123456789":
            body = body.replace(b" " + bytes([digit]), b"")
        return dataclasses.replace(request, body=body)

    def strip_recorded(request: A2ARequest, recorded: A2ARequest) -> bool:
        return request.text == no_digits(recorded).text

    with ReplayTransport(recording, match="order", before_record_request=no_digits, match_on=strip_recorded) as replay:
        assert _history_text(_send(replay, "beta 5")) == "beta 2"
