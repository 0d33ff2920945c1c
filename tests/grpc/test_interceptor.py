"""``RecordingInterceptor``: the a2a-sdk client's gRPC calls (and any grpc.aio client's) recorded
in-process, each answer in the log before the caller gets it."""

from __future__ import annotations

import asyncio

import grpc
import msgspec

from a2a_tape import RecordingInterceptor, store
from a2a_tape.fold.projection import fold_events
from tests.grpc.clients import PATH, sdk_send, send_request, stream_response
from tests.support.grpc_fake import exact_messages, running_fake_grpc_agent


def test_the_sdk_client_over_grpc_is_recorded_as_it_streamed(grpc_agent, db_path):
    st = store.open_store(db_path)
    recording = RecordingInterceptor(st)
    try:
        streamed = sdk_send(grpc_agent.url, "hello", message_id="m-in")
        # the same client, the same agent, through the recording channel factory
        recorded = _sdk_send_with(grpc_agent.url, recording, "hello", "m-in-2")
        (ex,) = st.exchanges()
        assert ex.url == f"grpc://{grpc_agent.target}/lf.a2a.v1.A2AService/SendStreamingMessage"
        assert (ex.role, ex.outcome, ex.message_id, ex.response_headers["grpc-status"]) == (
            "client",
            "closed",
            "m-in-2",
            "0",
        )
        logged = [msgspec.json.decode(e.payload) for e in st.read_exchange(ex.id)]
        assert logged == recorded and len(recorded) == len(streamed)
        assert recording.task_ids == [ex.task_id]
        assert fold_events(st.read_task(ex.task_id))[ex.task_id].state == "completed"
    finally:
        st.close()


def _sdk_send_with(url: str, recording: RecordingInterceptor, text: str, message_id: str) -> list[dict]:
    from a2a.client import ClientConfig
    from a2a.client.client_factory import create_client
    from a2a.types import Message, Part, Role, SendMessageRequest
    from google.protobuf import json_format

    async def run() -> list[dict]:
        config = ClientConfig(grpc_channel_factory=recording.channel, supported_protocol_bindings=["GRPC"])
        client = await create_client(url, client_config=config)
        msg = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])
        try:
            return [json_format.MessageToDict(ev) async for ev in client.send_message(SendMessageRequest(message=msg))]
        finally:
            await client.close()

    return asyncio.run(run())


def test_each_message_is_in_the_log_before_the_caller_gets_it_and_errors_are_recorded(db_path):
    with running_fake_grpc_agent() as (target, _fake):
        st = store.open_store(db_path)
        recording = RecordingInterceptor(st)
        counts: list[int] = []

        async def run() -> tuple[list[bytes], str]:
            async with recording.channel(target) as channel:
                got = []
                call = channel.unary_stream(PATH + "SendStreamingMessage")(send_request("x"))
                async for m in call:
                    (ex,) = st.exchanges()
                    counts.append(len(st.read_exchange(ex.id)))
                    got.append(m)
                bad = channel.unary_stream(PATH + "SendStreamingMessage")(
                    send_request("y"), metadata=(("x-fake-mode", "error"),)
                )
                try:
                    async for _ in bad:
                        pass
                except grpc.aio.AioRpcError as exc:
                    return got, exc.code().name
            return got, "OK"

        try:
            got, code = asyncio.run(run())
            assert got == exact_messages() and counts == [1, 2] and code == "NOT_FOUND"
            ok, failed = st.exchanges()
            logged = [msgspec.json.decode(e.payload) for e in st.read_exchange(ok.id)]
            assert logged == [stream_response(m) for m in exact_messages()]
            assert failed.outcome == "error" and "NOT_FOUND" in failed.error
            (err,) = st.read_exchange(failed.id)
            item = store.decode_item(err.payload)
            assert isinstance(item.body, store.ErrorItem) and item.body.message == "task nope not found"
            details = msgspec.json.decode(err.payload)["error"]["details"]
            assert details[0]["reason"] == "TASK_NOT_FOUND"  # the ErrorInfo, in its JSON mapping
        finally:
            st.close()


def test_calls_of_other_methods_pass_untouched_and_unrecorded(db_path):
    with running_fake_grpc_agent() as (target, _fake):
        st = store.open_store(db_path)
        recording = RecordingInterceptor(st)

        async def run() -> bytes:
            async with grpc.aio.insecure_channel(target, interceptors=recording.interceptors(target)) as channel:
                return await channel.unary_unary("/other.Echo/Reverse")(b"abc")

        try:
            assert asyncio.run(run()) == b"cba"
            assert st.exchanges() == []
        finally:
            st.close()


def test_metadata_secrets_are_redacted_before_the_disk(db_path):
    with running_fake_grpc_agent() as (target, _fake):
        recording = RecordingInterceptor(db_path, redact=["x-custom-secret"])

        async def run() -> None:
            async with recording.channel(target) as channel:
                md = (("authorization", "Bearer tok-123"), ("x-custom-secret", "v-456"))
                async for _ in channel.unary_stream(PATH + "SendStreamingMessage")(send_request("x"), metadata=md):
                    pass

        asyncio.run(run())
        recording.close()
        raw = db_path.read_bytes()
        assert b"tok-123" not in raw and b"v-456" not in raw


def test_json_paths_written_for_jsonrpc_redact_grpc_messages_too(db_path):
    """One [tool.a2a-tape] table for every binding: ``params.message.metadata.token`` and
    ``result.artifactUpdate...`` (the JSON-RPC form) redact a gRPC request and its answers."""
    from a2a.types import Message, Part, Role, SendMessageRequest
    from google.protobuf.struct_pb2 import Struct

    from a2a_tape.capture.grpc_calls import GrpcCapture
    from a2a_tape.store.redact import build_redactor

    meta = Struct()
    meta.update({"token": "SEKRET-META", "keep": "shown"})
    msg = Message(message_id="m-r", role=Role.ROLE_USER, parts=[Part(text="x")], metadata=meta)
    redactor = build_redactor(["params.message.metadata.token", "result.artifactUpdate.taskId"])
    gc = GrpcCapture(redactor, PATH + "SendStreamingMessage", role="client")
    ex = gc.request("127.0.0.1:1", SendMessageRequest(message=msg).SerializeToString(), ())
    assert b"SEKRET-META" not in ex.request_body and b"shown" in ex.request_body
    assert msgspec.json.decode(gc.request_json)["message"]["metadata"]["token"] == "SEKRET-META"  # hashed as sent
    gc.cap.exchange_id = 1
    (event,) = gc.message_events([exact_messages()[0]])
    assert b"t-fake" in event.payload  # a statusUpdate: the artifactUpdate path does not touch it
    from a2a.types import a2a_pb2

    art = a2a_pb2.StreamResponse(artifact_update=a2a_pb2.TaskArtifactUpdateEvent(task_id="SEKRET-TASK"))
    (event,) = gc.message_events([art.SerializeToString()])
    assert b"SEKRET-TASK" not in event.payload and b"artifactUpdate" in event.payload
