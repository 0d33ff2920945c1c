"""The Task a replay answers with is the Task the agent's own task manager holds.

The oracle is a2a-sdk 1.3.0 itself: its ``TaskManager`` folds the same events (parsed into its
protobuf types) and the Task it keeps, as JSON, must equal ours: every field of the status
(state, timestamp, message), the artifacts (parts with mediaType and metadata, the artifact's
metadata, name, description, extensions), the task's metadata and the history with the status
messages moved into it. For v0.3 the oracle is the SDK's own compatibility conversion of that
Task.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from a2a.compat.v0_3.conversions import to_compat_task
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskManager
from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict, ParseDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_tape.replay.serve.convert import encode_task, fold_task, task_json
from a2a_tape.wire.dialects import result_in

TASK, CTX = "task-1", "ctx-1"
_enc = msgspec.json.Encoder()

# -- generated histories (v1.0 JSON, as the SDK writes it) -----------------------------------

_words = st.text(alphabet="abcdefgh ", min_size=1, max_size=8)
_meta = st.dictionaries(st.sampled_from(["a", "b", "source", "n"]), st.one_of(_words, st.booleans()), min_size=1)
_stamp = st.builds(
    lambda s, ms: f"2026-11-30T02:08:{s:02d}" + (f".{ms:03d}" if ms else "") + "Z",
    st.integers(0, 59),
    st.integers(0, 999),
)


@st.composite
def _part(draw) -> dict[str, Any]:
    if draw(st.booleans()):
        p: dict[str, Any] = {"text": draw(_words)}
    else:
        p = {"data": {"k": draw(_words)}}
    if draw(st.booleans()):
        p["mediaType"] = draw(st.sampled_from(["text/plain", "text/markdown", "application/json"]))
    if draw(st.booleans()):
        p["metadata"] = draw(_meta)
    return p


@st.composite
def _message(draw, n: int) -> dict[str, Any]:
    m: dict[str, Any] = {
        "messageId": f"s-{n}",
        "role": "ROLE_AGENT",
        "parts": draw(st.lists(_part(), min_size=1, max_size=2)),
    }
    if draw(st.booleans()):
        m["metadata"] = draw(_meta)
    return m


@st.composite
def _history(draw) -> list[tuple[str, dict[str, Any]]]:
    """(kind, v1.0 object): a Task first, then status and artifact updates."""
    task: dict[str, Any] = {
        "id": TASK,
        "contextId": CTX,
        "status": {"state": "TASK_STATE_SUBMITTED"},
        "history": [{"messageId": "u-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}],
    }
    if draw(st.booleans()):
        task["metadata"] = draw(_meta)
    out = [("task", task)]
    known: set[str] = set()
    for n in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            status: dict[str, Any] = {
                "state": draw(
                    st.sampled_from(["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"])
                )
            }
            if draw(st.booleans()):
                status["timestamp"] = draw(_stamp)
            if draw(st.booleans()):
                status["message"] = draw(_message(n))
            ev: dict[str, Any] = {"taskId": TASK, "contextId": CTX, "status": status}
            if draw(st.booleans()):
                ev["metadata"] = draw(_meta)
            out.append(("status", ev))
            continue
        aid = draw(st.sampled_from(["art-1", "art-2"]))
        art: dict[str, Any] = {"artifactId": aid, "parts": draw(st.lists(_part(), min_size=1, max_size=2))}
        for field in ("name", "description"):
            if draw(st.booleans()):
                art[field] = draw(_words)
        if draw(st.booleans()):
            art["metadata"] = draw(_meta)
        if draw(st.booleans()):
            art["extensions"] = ["urn:x:" + draw(_words).strip().replace(" ", "-") or "urn:x:e"]
        ev = {"taskId": TASK, "contextId": CTX, "artifact": art}
        if aid in known and draw(st.booleans()):
            ev["append"] = True  # the SDK refuses an append to an artifact it has not seen
        if draw(st.booleans()):
            ev["lastChunk"] = True
        known.add(aid)
        out.append(("artifact", ev))
    return out


# -- the oracle ------------------------------------------------------------------------------

_PROTO = {"task": a2a_pb2.Task, "status": a2a_pb2.TaskStatusUpdateEvent, "artifact": a2a_pb2.TaskArtifactUpdateEvent}


def _sdk_task(history: list[tuple[str, dict[str, Any]]]) -> a2a_pb2.Task:
    async def run() -> a2a_pb2.Task:
        tm = TaskManager(InMemoryTaskStore(), ServerCallContext(), None, None, None)
        task = None
        for kind, obj in history:
            task = await tm.save_task_event(ParseDict(obj, _PROTO[kind]()))
        assert task is not None
        return task

    return asyncio.run(run())


def _payloads(history: list[tuple[str, dict[str, Any]]], dialect: str) -> list[bytes]:
    return [_enc.encode({"jsonrpc": "2.0", "id": 1, "result": result_in(k, o, dialect)}) for k, o in history]


_settings = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(_history())
def test_the_folded_task_is_the_sdk_task_manager_s(history):
    want = MessageToDict(_sdk_task(history))
    got = task_json(fold_task(TASK, _payloads(history, "1.0")), "1.0")
    assert msgspec.json.decode(msgspec.json.encode(got)) == want


@_settings
@given(_history())
def test_a_v1_recording_answers_a_v03_client_as_the_sdk_does(history):
    want = to_compat_task(_sdk_task(history)).model_dump(mode="json", by_alias=True, exclude_none=True)
    got = task_json(fold_task(TASK, _payloads(history, "1.0")), "0.3")
    assert got == want


@_settings
@given(_history())
def test_a_v03_recording_folds_to_the_same_task(history):
    """Recorded in v0.3 (the SDK's compat spelling), answered in v1.0: the same Task, but for
    what v0.3 cannot carry (a part's mediaType: docs/replay.md)."""
    v1 = task_json(fold_task(TASK, _payloads(history, "1.0")), "1.0")
    got = task_json(fold_task(TASK, _payloads(history, "0.3")), "1.0")

    def no_media(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: no_media(v) for k, v in value.items() if k != "mediaType"}
        if isinstance(value, list):
            return [no_media(v) for v in value]
        return value

    assert got == no_media(v1)


def test_a_replayed_get_task_keeps_timestamps_media_types_metadata_and_history():
    """The fields issue 13 saw dropped: status.timestamp, mediaType, task metadata, the status
    messages a live agent folds into history."""
    history = [
        (
            "task",
            {
                "id": TASK,
                "contextId": CTX,
                "status": {"state": "TASK_STATE_SUBMITTED"},
                "metadata": {"origin": "test"},
                "history": [{"messageId": "u-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}],
            },
        ),
        (
            "status",
            {
                "taskId": TASK,
                "contextId": CTX,
                "status": {
                    "state": "TASK_STATE_WORKING",
                    "timestamp": "2026-11-30T02:08:56.971Z",
                    "message": {"messageId": "s-1", "role": "ROLE_AGENT", "parts": [{"text": "working on it"}]},
                },
            },
        ),
        (
            "artifact",
            {
                "taskId": TASK,
                "contextId": CTX,
                "artifact": {
                    "artifactId": "a",
                    "parts": [{"text": "x", "mediaType": "text/markdown", "metadata": {"k": "v"}}],
                    "unknownField": 7,
                },
            },
        ),
        (
            "status",
            {
                "taskId": TASK,
                "contextId": CTX,
                "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-11-30T02:08:57Z"},
                "metadata": {"done": True},
            },
        ),
    ]
    body = msgspec.json.decode(encode_task(fold_task(TASK, _payloads(history, "1.0")), "1.0", 5))
    task = body["result"]
    assert body["id"] == 5
    assert task["status"] == {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-11-30T02:08:57Z"}
    assert task["metadata"] == {"origin": "test", "done": True}
    assert [m["messageId"] for m in task["history"]] == ["u-1", "s-1"]
    assert task["artifacts"][0]["parts"][0] == {"text": "x", "mediaType": "text/markdown", "metadata": {"k": "v"}}
    assert task["artifacts"][0]["unknownField"] == 7  # a field we do not model survives
