"""Matching a request to a recording: method + text (default), strict, order; repeats."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.transport import ReplayTransport
from a2a_tape.store import decode_item
from tests.replay._record import headers_for, request_body

TAPE = Path(__file__).parents[1] / "data" / "chunk-agent.jsonl"


@pytest.fixture
def library():
    lib = Library.open(TAPE)
    yield lib
    lib.close()


def send(c: httpx.Client, body: bytes, dialect: str = "1.0"):
    r = c.post("http://agent.test/", content=body, headers=headers_for(dialect))
    first = r.content.split(b"\r\n\r\n")[0]
    return decode_item(first[6:] if first.startswith(b"data: ") else first)


def with_metadata(body: bytes, **params) -> bytes:
    """The same request with more params (as a client adding configuration would send)."""
    doc = json.loads(body)  # test-side only: build a variant of a request
    doc["params"].update(params)
    return json.dumps(doc).encode()


def test_strict_ignores_ids_and_dialect_spelling_but_not_the_rest(library):
    by_text = {ep.text: ep for ep in library.episodes}
    hello_v1 = by_text["please ask me"]
    with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(library, match="strict"))) as c:
        # other messageId, other JSON-RPC id, v0.3 spelling (role 'user', parts with kind): still the same request
        same = send(c, request_body("stream", "0.3", text="please ask me", rpc_id="other"), "0.3")
        # an extra configuration: not the recorded request any more
        other = send(
            c,
            with_metadata(
                request_body("stream", "1.0", text="please ask me"),
                configuration={"acceptedOutputModes": ["text/html"]},
            ),
        )
    assert same.task_id == hello_v1.task_id and same.rpc_id == "other"
    assert other.kind == "error" and other.body.code == -32099 and "match strict" in other.body.message
    with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(library))) as c:  # method-text: matches
        loose = send(
            c,
            with_metadata(
                request_body("stream", "1.0", text="please ask me"),
                configuration={"acceptedOutputModes": ["text/html"]},
            ),
        )
    assert loose.task_id == hello_v1.task_id


def test_order_plays_recorded_sends_in_order_whatever_they_say(library):
    with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(library, match="order"))) as c:
        got = [send(c, request_body("stream", "1.0", text=f"anything {i}")).task_id for i in range(3)]
    assert got == [ep.task_id for ep in library.episodes[:3]]


def test_a_repeated_request_replays_the_last_match_again(library):
    """Fresh recordings first; once every match was played, the last one answers again (a retry)."""
    expected = [ep.task_id for ep in library.episodes if ep.text == "hello"]
    assert len(expected) == 2
    with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(library))) as c:
        got = [send(c, request_body("stream", "1.0", text="hello")).task_id for _ in range(3)]
    assert got == [expected[0], expected[1], expected[1]]


def test_a_send_is_answered_from_a_streamed_recording(library):
    """Only a stream of 'please ask me' was recorded: message/send gets the task as it ended."""
    with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(library))) as c:
        r = c.post(
            "http://agent.test/", content=request_body("send", "0.3", text="please ask me"), headers=headers_for("0.3")
        )
    assert r.headers["content-type"].startswith("application/json")
    item = decode_item(r.content)
    assert item.dialect == "0.3" and item.kind == "task" and item.body.state == "input-required"


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_a_recorded_resubscribe_is_replayed_as_recorded(dialect):
    """sdk-resubscribe: the recorded stream closed after one item and the client resubscribed:
    the replay does the same, snapshot (WORKING, chunk-0) then the rest, in either dialect."""
    tape = Path(__file__).resolve().parents[3] / "recordings" / "sdk-resubscribe.jsonl"
    with httpx.Client(transport=ReplayTransport(tape)) as c:
        r = c.post(
            "http://agent.test/", content=request_body("stream", dialect, text="hello"), headers=headers_for(dialect)
        )
        first = [decode_item(f[6:]) for f in r.content.split(b"\r\n\r\n") if f]
        task_id = first[0].task_id
        r = c.post(
            "http://agent.test/",
            content=request_body("subscribe", dialect, task_id=task_id),
            headers=headers_for(dialect),
        )
        rest = [decode_item(f[6:]) for f in r.content.split(b"\r\n\r\n") if f]
        again = send(c, request_body("subscribe", dialect, task_id=task_id), dialect)  # v0.3: an SSE error item
    assert [i.kind for i in first] == ["task"]
    assert [i.kind for i in rest] == ["task", "artifact", "artifact", "status"]
    assert {i.dialect for i in rest} == {dialect}
    assert rest[0].body.state == "working" and [a.text for a in rest[0].body.artifacts] == ["chunk-0 "]
    assert rest[-1].body.state == "completed"
    assert again.kind == "error" and again.body.code == -32004  # over now, as a real agent says


# -- protocol defaults, text-less requests, the first differing field ---------------------------


def _variant(body: bytes, **params) -> bytes:
    doc = json.loads(body)  # test-side only: the same request as another client spells it
    doc["params"].update(params)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "dialect, extra",
    [
        ("1.0", {"configuration": {}}),  # what the JS SDK always sends in v1.0
        ("1.0", {"configuration": {"returnImmediately": False, "acceptedOutputModes": []}, "metadata": {}}),
        ("0.3", {"configuration": {"blocking": True, "acceptedOutputModes": []}}),  # the v0.3 defaults
        ("0.3", {"configuration": None, "metadata": None}),
    ],
)
def test_strict_matching_normalises_protocol_defaults(library, dialect, extra):
    expected = next(ep.task_id for ep in library.episodes if ep.text == "please ask me")
    with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(library, match="strict"))) as c:
        got = send(c, _variant(request_body("stream", dialect, text="please ask me"), **extra), dialect)
    assert got.kind == "task" and got.task_id == expected


def test_a_strict_miss_names_the_first_field_that_differs(library):
    with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(library, match="strict"))) as c:
        got = send(c, _variant(request_body("stream", "1.0", text="please ask me"), configuration={"historyLength": 3}))
        blocking = send(
            c, _variant(request_body("stream", "0.3", text="please ask me"), configuration={"blocking": False}), "0.3"
        )
    assert got.kind == "error" and got.body.code == -32099
    assert "'please ask me'" in got.body.message
    assert "first difference: params.configuration.historyLength: 3 != absent" in got.body.message
    assert "first difference: params.configuration.returnImmediately: true != absent" in blocking.body.message


def test_a_miss_on_another_text_names_the_text(library):
    """The nearest recording has another text: the message says so (it named a messageId before)."""
    with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(library))) as c:
        got = send(c, request_body("stream", "0.3", text="please ask me twice"), "0.3")
    assert got.kind == "error" and got.body.code == -32099
    assert 'first difference: the text: "please ask me twice" != "please ask me"' in got.body.message


@pytest.fixture
def text_less_recording(tmp_path, sdk_agent):
    """A live agent's recording holding one send with a data part only (no text): a completed task."""
    from a2a_tape.recorder.transport import RecordingTransport

    db = tmp_path / "tape.db"
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"data": {"n": 1}}]}},
        }
    ).encode()
    with httpx.Client(transport=RecordingTransport(db), timeout=10) as c:
        r = c.post(sdk_agent.url + "/", content=body, headers=headers_for("1.0"))
    assert decode_item(r.content).body.state == "completed"
    lib = Library.open(db)
    yield lib, body
    lib.close()


def test_requests_without_text_are_matched_by_their_whole_params(text_less_recording):
    """Never pooled: an invalid text-less send does not get the recorded data send's task; the
    same data send (another messageId) does; another data value is a miss naming the field."""
    lib, recorded = text_less_recording
    invalid = b'{"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {"message": {"kind": "message"}}}'
    with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(lib))) as c:
        refused = decode_item(c.post("http://a.test/", content=invalid, headers=headers_for("1.0")).content)
        same = decode_item(
            c.post("http://a.test/", content=recorded.replace(b'"m-1"', b'"m-2"'), headers=headers_for("1.0")).content
        )
        other = decode_item(
            c.post("http://a.test/", content=recorded.replace(b'"n": 1', b'"n": 2'), headers=headers_for("1.0")).content
        )
    assert refused.kind == "error" and refused.body.code == -32602 and refused.rpc_id == 5
    assert same.kind == "task" and same.body.state == "completed"
    assert other.kind == "error" and other.body.code == -32099
    assert "first difference: params.message.parts[0].data.n: 2 != 1" in other.body.message


def test_a_recorded_refusal_answers_only_the_request_it_refused(tmp_path, sdk_agent):
    """The recording holds the agent's refusal of a 'hello' without messageId: a valid 'hello' is
    not answered with it (nothing recorded answers it: -32099); the same refused request is."""
    from a2a_tape.recorder.transport import RecordingTransport

    db = tmp_path / "tape.db"
    refused = b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
    with httpx.Client(transport=RecordingTransport(db), timeout=10) as c:
        live = c.post(sdk_agent.url + "/", content=refused, headers=headers_for("1.0"))
    assert decode_item(live.content).body.code == -32602
    lib = Library.open(db)
    try:
        with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(lib))) as c:
            valid = send(c, request_body("send", "1.0", text="hello"))
            again = c.post("http://a.test/", content=refused, headers=headers_for("1.0"))
    finally:
        lib.close()
    assert valid.kind == "error" and valid.body.code == -32099
    assert again.content == live.content


# --- recordings made through the proxy (a real a2a-sdk 1.3.0 agent behind it) ---------------------


def _proxied_sends(db_path, sends: list[tuple[str, str]]) -> list[str]:
    """Send each (text, messageId) through the proxy (a send, v1.0); the task id each one got."""
    from tests.conftest import running_sdk_agent
    from tests.recorder.proxy.conftest import running_proxy, send_body

    tasks = []
    with running_sdk_agent() as agent, running_proxy(agent.url, db_path) as proxy:
        for text, message_id in sends:
            body, headers = send_body(text, dialect="1.0", stream=False, message_id=message_id)
            tasks.append(decode_item(httpx.post(proxy.url + "/", content=body, headers=headers).content).task_id)
    return tasks


def _replay_send(c: httpx.Client, text: str, message_id: str):
    from tests.recorder.proxy.conftest import send_body

    body, headers = send_body(text, dialect="1.0", stream=False, message_id=message_id)
    return decode_item(c.post("http://agent.test/", content=body, headers=headers).content)


def test_a_gateway_answer_from_the_log_is_not_an_episode(db_path):
    """A repeat the proxy answered from its log (outcome ``replayed``) never reached the agent and
    holds no answer of its own: replay serves the agent's answer for it, not "no answer recorded"."""
    first, again = _proxied_sends(db_path, [("hello", "m-dup"), ("hello", "m-dup")])
    assert first == again  # the gateway answered the repeat with the first task
    with ReplayTransport(db_path) as transport, httpx.Client(transport=transport) as c:
        answers = [_replay_send(c, "hello", "m-new") for _ in range(2)]
    assert [a.kind for a in answers] == ["task", "task"], answers
    assert {a.task_id for a in answers} == {first}


def test_a_shared_word_prefix_of_the_message_id_breaks_a_tie_between_equal_texts(db_path):
    """A suite that names its messages ``<purpose>-<run>`` and sends one text for several purposes
    (the official TCK 1.0 does) gets, in another run, the recording made for the same purpose
    whatever order it asks in; a random id keeps recorded order."""
    asked, done = _proxied_sends(
        db_path, [("same text", "tck-input-required-run1"), ("same text", "tck-complete-run1")]
    )
    assert asked != done
    with ReplayTransport(db_path) as transport, httpx.Client(transport=transport) as c:
        assert _replay_send(c, "same text", "tck-complete-run2").task_id == done
        assert _replay_send(c, "same text", "tck-input-required-run2").task_id == asked
    with ReplayTransport(db_path) as transport, httpx.Client(transport=transport) as c:
        assert _replay_send(c, "same text", "0f3c2a9e-5d1b-4c7e-9a2f-1b2c3d4e5f60").task_id == asked
        assert _replay_send(c, "same text", "0f3c2a9e-aaaa-4c7e-9a2f-1b2c3d4e5f60").task_id == done
