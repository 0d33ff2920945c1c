"""Payload builders for projection tests: wire bytes in both dialects, as agents send them."""

from __future__ import annotations

from typing import Any

import msgspec

from a2a_tape.store import StoredEvent

_enc = msgspec.json.Encoder()


def v03(result: dict) -> bytes:
    return _enc.encode({"jsonrpc": "2.0", "id": 1, "result": result})


def v10(kind: str, body: dict) -> bytes:
    return _enc.encode({"jsonrpc": "2.0", "id": 1, "result": {kind: body}})


def task03(
    task: str, state: str = "submitted", *, user: str | None = None, artifacts: list[dict] | None = None
) -> bytes:
    body: dict[str, Any] = {"kind": "task", "id": task, "contextId": "ctx", "status": {"state": state}}
    if user is not None:
        body["history"] = [
            {"kind": "message", "role": "user", "messageId": "u1", "parts": [{"kind": "text", "text": user}]}
        ]
    if artifacts is not None:
        body["artifacts"] = artifacts
    return v03(body)


def status03(task: str, state: str, message: str | None = None) -> bytes:
    status: dict[str, Any] = {"state": state}
    if message is not None:
        status["message"] = {
            "kind": "message",
            "role": "agent",
            "messageId": "s1",
            "parts": [{"kind": "text", "text": message}],
        }
    return v03({"kind": "status-update", "taskId": task, "contextId": "ctx", "status": status, "final": False})


def status10(task: str, state: str) -> bytes:
    return v10("statusUpdate", {"taskId": task, "contextId": "ctx", "status": {"state": state}})


def art03(
    task: str,
    aid: str,
    text: str | None = None,
    *,
    append: bool | None = None,
    last: bool = False,
    meta: dict | None = None,
    data: Any = None,
) -> bytes:
    parts = []
    if text is not None:
        parts.append({"kind": "text", "text": text})
    if data is not None:
        parts.append({"kind": "data", "data": data})
    artifact: dict[str, Any] = {"artifactId": aid, "parts": parts}
    if meta is not None:
        artifact["metadata"] = meta
    body: dict[str, Any] = {"kind": "artifact-update", "taskId": task, "contextId": "ctx", "artifact": artifact}
    if append is not None:
        body["append"] = append
    if last:
        body["lastChunk"] = True
    return v03(body)


def oc(channel: str, *, message_id: str | None = "m1", source: str | None = None, role: str | None = None) -> dict:
    """``metadata`` of an opencode-channels artifact."""
    m: dict[str, Any] = {"channel": channel}
    if message_id is not None:
        m["message_id"] = message_id
    if source is not None:
        m["source"] = source
    if role is not None:
        m["role"] = role
    return {"opencode": m}


def blocks(
    block_type: str,
    *,
    event_id: str | None = None,
    sequence: Any = None,
    source: str | None = None,
    message_id: str | None = "m1",
) -> dict:
    """``metadata`` of an opencode-blocks artifact (``shared.stream``)."""
    s: dict[str, Any] = {"block_type": block_type}
    if message_id is not None:
        s["message_id"] = message_id
    if event_id is not None:
        s["event_id"] = event_id
    if sequence is not None:
        s["sequence"] = sequence
    if source is not None:
        s["source"] = source
    return {"shared": {"stream": s}}


def stored(
    payloads: list[bytes],
    task: str | None = "t1",
    *,
    exchange: int | None = 1,
    start: int = 1,
    origin: str = "upstream",
) -> list[StoredEvent]:
    """Payloads as stored events of one task, in log order (positions from ``start``)."""
    return [
        StoredEvent(start + i, task, start + i, exchange, None, p, 1000.0 + start + i, None, origin)  # type: ignore[arg-type]
        for i, p in enumerate(payloads)
    ]
