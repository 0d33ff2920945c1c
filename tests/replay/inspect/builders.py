"""Recordings for the inspection tests, in both dialects.

Two ways to get a recording:
- :func:`record_live`: send a message to a REAL a2a-sdk 1.3.0 agent on 127.0.0.1 over httpx
  and append every SSE ``data:`` payload to the store, exactly as received (a minimal recorder,
  so these tests do not wait for the real ``record`` command);
- :class:`Tape` + :func:`items`: hand-built payloads for faults a real agent will not produce on
  demand (a finished task going back to working, a sequence gap, text crossing channels).
  They use the wire shapes of the captures (v0.3 bare objects with ``kind``; v1.0 wrappers
  with ``TASK_STATE_*`` enums and no ``final``).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
from httpx_sse import connect_sse

from a2a_tape import store
from a2a_tape.store import Exchange, NewEvent

_enc = msgspec.json.Encoder()

V1_STATE = {
    "submitted": "TASK_STATE_SUBMITTED",
    "working": "TASK_STATE_WORKING",
    "completed": "TASK_STATE_COMPLETED",
    "failed": "TASK_STATE_FAILED",
    "canceled": "TASK_STATE_CANCELED",
    "input-required": "TASK_STATE_INPUT_REQUIRED",
}


@dataclass
class Items:
    """Payload builders for one task in one dialect."""

    dialect: str
    task_id: str
    context_id: str = "ctx-0001"
    rpc_id: int = 1

    def _wrap(self, v1_key: str, obj: dict[str, Any], v03_kind: str) -> bytes:
        if self.dialect == "1.0":
            result: dict[str, Any] = {v1_key: obj}
        else:
            result = {**obj, "kind": v03_kind}
        return _enc.encode({"jsonrpc": "2.0", "id": self.rpc_id, "result": result})

    def _state(self, state: str) -> str:
        return V1_STATE[state] if self.dialect == "1.0" else state

    def task(self, state: str = "submitted", user_text: str = "hello", artifacts: list[dict] | None = None) -> bytes:
        msg: dict[str, Any] = {
            "messageId": f"m-user-{self.task_id}",
            "taskId": self.task_id,
            "contextId": self.context_id,
            "role": "ROLE_USER" if self.dialect == "1.0" else "user",
            "parts": [{"text": user_text} if self.dialect == "1.0" else {"kind": "text", "text": user_text}],
        }
        obj = {
            "id": self.task_id,
            "contextId": self.context_id,
            "status": {"state": self._state(state)},
            "history": [msg],
        }
        if artifacts:
            obj["artifacts"] = artifacts
        return self._wrap("task", obj, "task")

    def status(self, state: str, text: str | None = None) -> bytes:
        status: dict[str, Any] = {"state": self._state(state), "timestamp": "2026-11-30T02:08:56.971579Z"}
        if text is not None:
            status["message"] = {
                "messageId": f"m-agent-{self.task_id}",
                "role": "ROLE_AGENT" if self.dialect == "1.0" else "agent",
                "parts": [self.part(text)],
            }
        obj: dict[str, Any] = {"taskId": self.task_id, "contextId": self.context_id, "status": status}
        if self.dialect == "0.3":
            obj["final"] = state in ("completed", "failed", "canceled")
        return self._wrap("statusUpdate", obj, "status-update")

    def part(self, text: str) -> dict[str, Any]:
        return {"text": text} if self.dialect == "1.0" else {"kind": "text", "text": text}

    def artifact_obj(
        self,
        artifact_id: str,
        text: str | None = None,
        *,
        metadata: dict | None = None,
        data: dict | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        parts = []
        if text is not None:
            parts.append(self.part(text))
        if data is not None:
            parts.append({"data": data} if self.dialect == "1.0" else {"kind": "data", "data": data})
        art: dict[str, Any] = {"artifactId": artifact_id, "parts": parts}
        if name is not None:
            art["name"] = name
        if metadata is not None:
            art["metadata"] = metadata
        return art

    def artifact(
        self,
        artifact_id: str,
        text: str | None = None,
        *,
        append: bool = False,
        last: bool = False,
        metadata: dict | None = None,
        data: dict | None = None,
        name: str | None = None,
    ) -> bytes:
        obj: dict[str, Any] = {
            "taskId": self.task_id,
            "contextId": self.context_id,
            "artifact": self.artifact_obj(artifact_id, text, metadata=metadata, data=data, name=name),
        }
        if append or self.dialect == "0.3":
            obj["append"] = append
        if last or self.dialect == "0.3":
            obj["lastChunk"] = last
        return self._wrap("artifactUpdate", obj, "artifact-update")


def items(dialect: str, task_id: str | None = None) -> Items:
    return Items(dialect, task_id or f"task-{uuid.uuid4()}")


class Tape:
    """A database file with hand-built exchanges and events (through the store API)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = store.open_store(path)
        self.clock = 1_796_000_000.0

    def exchange(
        self,
        *,
        streaming: bool = True,
        rpc_method: str = "SendStreamingMessage",
        task_id: str | None = None,
        dialect: str = "1.0",
    ) -> int:
        return self.store.begin_exchange(
            Exchange(
                started_at=self.clock,
                url="http://127.0.0.1:9/",
                rpc_method=rpc_method,
                dialect=dialect,
                streaming=streaming,
                request_headers={"content-type": "application/json"},
                request_body=b'{"jsonrpc":"2.0","id":1,"method":"' + rpc_method.encode() + b'"}',
                status=200,
                content_type="text/event-stream" if streaming else "application/json",
                outcome="closed",
                task_id=task_id,
            )
        )

    def add(
        self, task_id: str | None, payloads: list[bytes], *, exchange_id: int | None = None, origin: str = "upstream"
    ) -> None:
        evs = []
        for p in payloads:
            self.clock += 0.05
            evs.append(
                NewEvent(payload=p, task_id=task_id, exchange_id=exchange_id, received_at=self.clock, origin=origin)
            )  # type: ignore[arg-type]
        self.store.append_batch(evs)

    def stream(self, it: Items, payloads: list[bytes]) -> int:
        ex = self.exchange(
            task_id=it.task_id,
            dialect=it.dialect,
            rpc_method="SendStreamingMessage" if it.dialect == "1.0" else "message/stream",
        )
        self.add(it.task_id, payloads, exchange_id=ex)
        return ex

    def close(self) -> None:
        self.store.close()


def record_live(url: str, text: str, db_path: Path, *, dialect: str = "1.0") -> str:
    """Send ``text`` to a real agent (streaming), append every SSE item as received; return the task id."""
    mid = str(uuid.uuid4())
    if dialect == "1.0":
        method = "SendStreamingMessage"
        message = {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}]}
        headers = {"A2A-Version": "1.0"}
    else:
        method = "message/stream"
        message = {"kind": "message", "messageId": mid, "role": "user", "parts": [{"kind": "text", "text": text}]}
        headers = {}
    body = _enc.encode({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}})
    st = store.open_store(db_path)
    task_id: str | None = None
    with st, httpx.Client(timeout=10) as client:
        started = time.time()
        ex = st.begin_exchange(
            Exchange(
                started_at=started,
                url=url + "/",
                rpc_method=method,
                dialect=dialect,
                streaming=True,
                request_headers={"content-type": "application/json", **headers},
                request_body=body,
                message_id=mid,
            )
        )
        pending: list[NewEvent] = []
        with connect_sse(
            client, "POST", url + "/", content=body, headers={"content-type": "application/json", **headers}
        ) as source:
            st.update_exchange(
                ex, status=source.response.status_code, content_type=source.response.headers.get("content-type")
            )
            for sse in source.iter_sse():
                payload = sse.data.encode()
                tid = store.decode_item(payload).task_id or task_id
                task_id = tid
                now = time.time()
                pending.append(
                    NewEvent(
                        payload=payload,
                        task_id=tid,
                        exchange_id=ex,
                        received_at=now,
                        mono=now - started,
                        sse_event=None if sse.event == "message" else sse.event,
                    )
                )
        # events that came before the task id was known belong to it once known
        for ev in pending:
            if ev.task_id is None and task_id is not None:
                ev.task_id = task_id
        st.append_batch(pending)
        st.update_exchange(ex, ended_at=time.time(), outcome="closed", task_id=task_id)
    assert task_id is not None, "the agent answered without a task id"
    return task_id
