"""Realistic payloads for store tests: the shapes a2a-sdk 1.3.0 sends (see the captures)."""

from __future__ import annotations

import msgspec

_enc = msgspec.json.Encoder()


def v1_artifact(task_id: str, n: int, *, artifact_id: str = "art-1", append: bool = True, rpc_id: int = 1) -> bytes:
    update: dict = {
        "taskId": task_id,
        "contextId": f"ctx-{task_id}",
        "artifact": {"artifactId": artifact_id, "name": "out", "parts": [{"text": f"chunk-{n} "}]},
    }
    if append:
        update["append"] = True
    return _enc.encode({"result": {"artifactUpdate": update}, "id": rpc_id, "jsonrpc": "2.0"})


def v1_status(task_id: str, state: str = "TASK_STATE_WORKING", rpc_id: int = 1) -> bytes:
    return _enc.encode(
        {
            "result": {"statusUpdate": {"taskId": task_id, "contextId": f"ctx-{task_id}", "status": {"state": state}}},
            "id": rpc_id,
            "jsonrpc": "2.0",
        }
    )
