"""store.decode_item on what agents really send (the a2a-sdk 1.3.0 captures), both dialects and REST."""

from __future__ import annotations

import pytest

from a2a_tape.store import (
    ArtifactUpdate,
    ErrorItem,
    MessageItem,
    Other,
    StatusUpdate,
    TaskSnapshot,
    Undecodable,
    decode_item,
)

V10_TASK = (
    b'{"result": {"task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_SUBMITTED"}, '
    b'"history": [{"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}]}}, "id": 1, "jsonrpc": "2.0"}'
)
V03_STATUS = (
    b'{"id":1,"jsonrpc":"2.0","result":{"contextId":"c1","final":false,"kind":"status-update",'
    b'"status":{"state":"input-required","message":{"kind":"message","messageId":"m2","parts":[{"kind":"text",'
    b'"text":"need more input"}],"role":"agent"}},"taskId":"t1"}}'
)
V10_CHUNK = (
    b'{"result": {"artifactUpdate": {"taskId": "t1", "contextId": "c1", "artifact": {"artifactId": "art-1", '
    b'"parts": [{"text": "chunk-1 "}]}, "append": true, "lastChunk": true}}, "id": "req-7", "jsonrpc": "2.0"}'
)
V10_GET = (
    b'{"result":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":'
    b'"art-1","parts":[{"text":"a"},{"text":"b"}]}]},"id":99,"jsonrpc":"2.0"}'
)
REST_BARE_TASK = (
    b'{"id":"t9","contextId":"c9","status":{"state":"TASK_STATE_WORKING"},"artifacts":[{"artifactId":"art-1",'
    b'"parts":[{"text":"chunk-0 "}]}]}'
)
REST_ERROR = b'{"error":{"code":404,"status":"NOT_FOUND","message":"Task not found","details":[]}}'
V03_ERROR = b'{"error":{"code":-32603,"message":"agent exploded mid-stream"},"id":"BOOM03","jsonrpc":"2.0"}'
V03_MESSAGE = (
    b'{"id":1,"jsonrpc":"2.0","result":{"contextId":"c3","kind":"message","messageId":"m3","parts":'
    b'[{"kind":"text","text":"direct reply"}],"role":"agent","taskId":"t3"}}'
)


def test_v10_task_snapshot():
    item = decode_item(V10_TASK)
    assert (item.dialect, item.kind, item.task_id, item.context_id, item.rpc_id) == ("1.0", "task", "t1", "c1", 1)
    assert item.body.state == "submitted" and item.body.history[0].role == "user"


def test_v03_status_with_message():
    item = decode_item(V03_STATUS)
    assert isinstance(item.body, StatusUpdate) and item.dialect == "0.3"
    assert item.body.state == "input-required" and item.body.message.text == "need more input"
    assert item.body.final is False


def test_v10_chunk_defaults_and_flags():
    body = decode_item(V10_CHUNK).body
    assert isinstance(body, ArtifactUpdate)
    assert (body.artifact.artifact_id, body.artifact.text, body.append, body.last_chunk) == (
        "art-1",
        "chunk-1 ",
        True,
        True,
    )


def test_v10_get_task_is_a_bare_task_in_the_result():
    body = decode_item(V10_GET).body
    assert isinstance(body, TaskSnapshot) and body.state == "completed" and body.artifacts[0].text == "ab"


def test_rest_bare_task_is_a_task_snapshot():
    item = decode_item(REST_BARE_TASK)
    assert item.dialect == "rest" and isinstance(item.body, TaskSnapshot)
    assert (item.task_id, item.body.state, item.body.artifacts[0].text) == ("t9", "working", "chunk-0 ")


@pytest.mark.parametrize("payload, dialect", [(REST_ERROR, "rest"), (V03_ERROR, "unknown")])
def test_errors(payload, dialect):
    item = decode_item(payload)
    assert isinstance(item.body, ErrorItem) and item.dialect == dialect
    assert item.body.message in ("Task not found", "agent exploded mid-stream")


def test_lone_message_reply():
    body = decode_item(V03_MESSAGE).body
    assert isinstance(body, MessageItem) and body.message.text == "direct reply" and body.message.task_id == "t3"


@pytest.mark.parametrize("payload", [b"", b"not json", b"\xff\xfe", b"[1,2]", b'{"result": 3}', b'{"id": {"x": 1}}'])
def test_anything_else_never_raises(payload):
    assert isinstance(decode_item(payload).body, (Undecodable, Other))
