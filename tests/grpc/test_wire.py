"""wire/grpc.py: a message's exact bytes <-> its proto3 JSON mapping, and errors <-> statuses."""

from __future__ import annotations

import msgspec
import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_tape import store
from a2a_tape.wire import grpc as grpc_wire

texts = st.text(max_size=20)
scalars = st.one_of(st.none(), st.booleans(), texts, st.integers(-(2**40), 2**40).map(float))
metadata = st.dictionaries(texts, scalars, max_size=3)
states = st.sampled_from([s for s in a2a_pb2.TaskState.values() if s])


@st.composite
def stream_responses(draw) -> a2a_pb2.StreamResponse:
    task, ctx = draw(texts), draw(texts)
    if draw(st.booleans()):
        parts = [a2a_pb2.Part(text=t) for t in draw(st.lists(texts, max_size=3))]
        art = a2a_pb2.Artifact(artifact_id=draw(texts), parts=parts)
        art.metadata.update(draw(metadata))
        ev = a2a_pb2.TaskArtifactUpdateEvent(
            task_id=task, context_id=ctx, artifact=art, append=draw(st.booleans()), last_chunk=draw(st.booleans())
        )
        return a2a_pb2.StreamResponse(artifact_update=ev)
    status = a2a_pb2.TaskStatus(state=draw(states))
    return a2a_pb2.StreamResponse(
        status_update=a2a_pb2.TaskStatusUpdateEvent(task_id=task, context_id=ctx, status=status)
    )


@settings(max_examples=150, deadline=None)
@given(stream_responses())
def test_json_and_back_is_the_same_message_and_the_log_reads_it(msg):
    raw = msg.SerializeToString()
    as_json = grpc_wire.to_json("lf.a2a.v1.StreamResponse", raw)
    assert msgspec.json.decode(as_json) == json_format.MessageToDict(msg)  # the v1.0 JSON shape
    back = a2a_pb2.StreamResponse()
    back.ParseFromString(grpc_wire.from_json("lf.a2a.v1.StreamResponse", as_json))
    assert back == msg
    item = store.decode_item(as_json)
    assert not isinstance(item.body, store.Undecodable)
    assert (item.body.task_id or None) == (msg.artifact_update.task_id or msg.status_update.task_id or None)


def test_bytes_that_are_not_the_message_are_said_so():
    with pytest.raises(grpc_wire.NotTheMessage):
        grpc_wire.to_json("lf.a2a.v1.StreamResponse", b"\xff\xff\xff")
    with pytest.raises(grpc_wire.NotTheMessage):
        grpc_wire.from_json("lf.a2a.v1.Task", b'{"status": 5}')


@pytest.mark.parametrize(
    ("code", "status", "reason"),
    [(-32001, 5, "TASK_NOT_FOUND"), (-32002, 9, "TASK_NOT_CANCELABLE"), (-32602, 3, "INVALID_PARAMS")],
)
def test_a_jsonrpc_error_is_the_status_a2a_sdks_grpc_server_sends(code, status, reason):
    from google.rpc import error_details_pb2, status_pb2

    got, details, trailer = grpc_wire.status_of_error({"code": code, "message": "m"}, jsonrpc=True)
    assert (got, details) == (status, "m")
    parsed = status_pb2.Status()
    parsed.ParseFromString(trailer)
    info = error_details_pb2.ErrorInfo()
    parsed.details[0].Unpack(info)
    assert (info.reason, info.domain) == (reason, "a2a-protocol.org")


def test_a_grpc_error_item_goes_back_to_the_status_it_was():
    from tests.support.grpc_fake import error_details

    item = grpc_wire.error_item(5, "task nope not found", [("grpc-status-details-bin", error_details())])
    error = msgspec.json.decode(item)["error"]
    assert (error["code"], error["status"]) == (5, "NOT_FOUND")
    code, details, trailer = grpc_wire.status_of_error(error, jsonrpc=False)
    assert (code, details, trailer) == (5, "task nope not found", error_details())
