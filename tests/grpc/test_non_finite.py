"""Issue 36, item 2: a NaN or Infinity number in a ``google.protobuf.Struct`` is valid protobuf with
no JSON mapping. Recording is a side effect: the client gets what the agent (or the recording)
answers, and the log says, in a local note, where a number was stored as a string."""

from __future__ import annotations

import math

import msgspec
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, a2a_pb2

from a2a_tape import RecordingInterceptor, store
from tests.grpc.clients import raw_call
from tests.grpc.conftest import running_grpc_proxy, running_serve


def _request(message_id: str) -> bytes:
    msg = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text="hello")])
    msg.metadata["score"] = float("nan")
    msg.metadata["limits"] = [1.0, float("inf")]
    return SendMessageRequest(message=msg).SerializeToString()


def _echoed_metadata(raw: bytes) -> dict:
    """The metadata of the message the agent echoes in its first answer (the task's history)."""
    r = a2a_pb2.StreamResponse()
    r.ParseFromString(raw)
    return dict(r.task.history[0].metadata)


def _assert_answered_as_the_agent(got) -> None:
    assert got.code == "OK", (got.code, got.details)
    assert len(got.messages) == 6  # the task, working, three chunks, completed
    echoed = _echoed_metadata(got.messages[0])
    assert math.isnan(echoed["score"]) and list(echoed["limits"]) == [1.0, math.inf]


def _assert_noted(st: store.Store) -> store.Exchange:
    (ex,) = [e for e in st.exchanges() if e.url.startswith("grpc://")]
    assert ex.outcome == "closed"
    assert msgspec.json.decode(ex.request_body)["message"]["metadata"] == {"score": "NaN", "limits": [1.0, "Infinity"]}
    notes = [msgspec.json.decode(e.payload)["a2a-tape"] for e in st.read_exchange(ex.id) if e.origin == "local"]
    details = [n["detail"] for n in notes if n["action"] == "not-json"]
    said = " ".join(details)
    for where in ("message.metadata.score", "message.metadata.limits[1]", "task.history[0].metadata.score"):
        assert where in said, notes
    return ex


def test_the_interceptor_gives_the_caller_the_agents_answer(grpc_agent, db_path):
    st = store.open_store(db_path)
    try:
        recording = RecordingInterceptor(st)
        got = raw_call(
            grpc_agent.target,
            "SendStreamingMessage",
            _request("m-nan-i"),
            streaming=True,
            interceptors=recording.interceptors,
        )
        _assert_answered_as_the_agent(got)
        _assert_noted(st)
    finally:
        st.close()


def test_the_grpc_proxy_and_serve_answer_as_the_agent_did(grpc_agent, db_path):
    with running_grpc_proxy(grpc_agent.url, grpc_agent.target, db_path) as proxy:
        got = raw_call(proxy.target, "SendStreamingMessage", _request("m-nan-p"), streaming=True)
        _assert_answered_as_the_agent(got)
        (ex,) = [e for e in proxy.store.exchanges() if e.url.startswith("grpc://")]
        proxy.wait_settled(ex.id)
        _assert_noted(proxy.store)
    with running_serve(db_path) as serve:
        replayed = raw_call(serve.target, "SendStreamingMessage", _request("m-nan-p"), streaming=True)
    # as recorded: the log holds the number as its proto3 JSON string (the note says so)
    assert (replayed.code, len(replayed.messages)) == ("OK", 6)
    assert _echoed_metadata(replayed.messages[0])["score"] == "NaN"


@pytest.mark.parametrize("value", [float("nan"), float("-inf")])
def test_serve_answers_a_request_holding_one(grpc_agent, db_path, value):
    """A recording made without it: the request still matches, no UNKNOWN."""
    plain = SendMessageRequest(
        message=Message(message_id="m-plain", role=Role.ROLE_USER, parts=[Part(text="hello")])
    ).SerializeToString()
    with running_grpc_proxy(grpc_agent.url, grpc_agent.target, db_path) as proxy:
        assert raw_call(proxy.target, "SendStreamingMessage", plain, streaming=True).code == "OK"
    msg = Message(message_id="m-plain", role=Role.ROLE_USER, parts=[Part(text="hello")])
    msg.metadata["x"] = value
    with running_serve(db_path) as serve:
        got = raw_call(
            serve.target, "SendStreamingMessage", SendMessageRequest(message=msg).SerializeToString(), streaming=True
        )
    assert got.code == "OK" and len(got.messages) == 6
