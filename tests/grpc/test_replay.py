"""``serve --grpc-listen``: recordings answer gRPC clients as the live agent did, whatever binding
made them; faults in gRPC's own terms."""

from __future__ import annotations

import grpc
import httpx
import msgspec
import pytest
from a2a.types import GetTaskRequest

from tests.grpc.clients import card, raw_call, sdk_get, sdk_send, send_request
from tests.grpc.conftest import running_grpc_proxy, running_serve
from tests.grpc.test_proxy import _strip_ids


@pytest.fixture
def grpc_recording(grpc_agent, db_path):
    """A recording made through the gRPC proxy (a stream, a send, a GetTask), and what the live
    agent answered."""
    with running_grpc_proxy(grpc_agent.url, grpc_agent.target, db_path) as proxy:
        live = {
            "stream": sdk_send(proxy.url, "hello", message_id="m-s"),
            "send": sdk_send(proxy.url, "hello there", message_id="m-u", stream=False),
        }
        task_id = live["send"][0]["task"]["id"]
        live["get"] = sdk_get(proxy.url, task_id)
    return db_path, live


def test_a_grpc_recording_answers_the_sdk_client_over_grpc_as_the_agent_did(grpc_recording):
    db_path, live = grpc_recording
    with running_serve(db_path) as serve:
        interfaces = {i["protocolBinding"]: i["url"] for i in card(serve.url)["supportedInterfaces"]}
        assert interfaces["GRPC"] == serve.target
        assert sdk_send(serve.url, "hello", message_id="m-s") == live["stream"]
        replayed = sdk_send(serve.url, "hello there", message_id="m-u", stream=False)
        assert _strip_ids(replayed) == _strip_ids(live["send"])
        task_id = replayed[0]["task"]["id"]
        assert _strip_ids(sdk_get(serve.url, task_id)) == _strip_ids(live["get"])


def test_a_jsonrpc_recording_answers_a_grpc_client(sdk_agent, tmp_path):
    """Recorded over JSON-RPC (v1.0) by the HTTP proxy, replayed to the a2a-sdk client over gRPC."""
    from tests.recorder.proxy.conftest import running_proxy, send_body

    db = tmp_path / "jsonrpc.db"
    with running_proxy(sdk_agent.url, db) as proxy:
        body, headers = send_body("hello", dialect="1.0", stream=True, message_id="m-j")
        with httpx.stream("POST", proxy.url + "/", content=body, headers=headers) as resp:
            recorded = [line[6:] for line in resp.iter_lines() if line.startswith("data: ")]
    with running_serve(db) as serve:
        from tests.grpc.clients import stream_response

        got = raw_call(serve.target, "SendStreamingMessage", send_request("hello", "m-j"), streaming=True)
        assert got.code == "OK"
        assert [stream_response(m) for m in got.messages] == [msgspec.json.decode(r)["result"] for r in recorded]


def test_errors_replay_as_the_grpc_status_the_agent_sent(grpc_agent, db_path):
    req = GetTaskRequest(id="no-such-task").SerializeToString()
    with running_grpc_proxy(grpc_agent.url, grpc_agent.target, db_path) as proxy:
        sdk_send(proxy.url, "hello", message_id="m-e")
        live = raw_call(proxy.target, "GetTask", req, streaming=False)
    with running_serve(db_path) as serve:
        replayed = raw_call(serve.target, "GetTask", req, streaming=False)
    assert live.code == "NOT_FOUND"
    assert (replayed.code, replayed.details) == (live.code, live.details)
    assert dict(replayed.trailers).get("grpc-status-details-bin") == dict(live.trailers)["grpc-status-details-bin"]


def test_a_dropped_stream_is_unavailable_and_a_method_nobody_has_is_unimplemented(grpc_recording):
    db_path, live = grpc_recording
    with running_serve(db_path, faults="drop-after=2") as serve:
        got = raw_call(serve.target, "SendStreamingMessage", send_request("hello", "m-s"), streaming=True)
        assert (len(got.messages), got.code) == (2, "UNAVAILABLE")
        per_call = raw_call(
            serve.target,
            "SendStreamingMessage",
            send_request("hello", "m-s"),
            streaming=True,
            metadata=(("a2a-version", "1.0"), ("x-a2a-tape-fault", "drop-after=1")),
        )
        assert (len(per_call.messages), per_call.code) == (1, "UNAVAILABLE")
        other = raw_call(serve.target, "/other.Echo/Reverse", b"x", streaming=False)
        assert other.code == grpc.StatusCode.UNIMPLEMENTED.name
