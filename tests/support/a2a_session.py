"""One client session of the a2a-sdk 1.3.0 client, as what the client saw: the oracle of "replay answers as the
live agent did" (tests/replay/serve/test_http_json.py, tests/oracles/test_opencode.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
)
from google.protobuf.json_format import MessageToDict


def _message(text: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id="m-" + text, role=Role.ROLE_USER, parts=[Part(text=text)]))


async def _outcome(call) -> Any:
    try:
        return MessageToDict(await call)
    except Exception as exc:  # noqa: BLE001 - the client's error is part of what it saw
        return {"error": type(exc).__name__, "message": str(exc)}


async def session(
    url: str,
    binding: str,
    transport: httpx.AsyncBaseTransport | None = None,
    headers: Mapping[str, str] | None = None,
) -> list[Any]:
    """What the a2a-sdk client sees of one session in ``binding``: a stream, a send, GetTask (whole
    and with historyLength), cancel and subscribe of a finished task, an unknown task, ListTasks."""
    async with httpx.AsyncClient(transport=transport, headers=headers, timeout=30) as hc:
        seen: list[Any] = []
        for streaming in (True, False):
            factory = ClientFactory(
                ClientConfig(httpx_client=hc, streaming=streaming, supported_protocol_bindings=[binding])
            )
            client = await factory.create_from_url(url)
            events = [MessageToDict(ev) async for ev in client.send_message(_message(f"hello {streaming}"))]
            seen.append(events)
        task_id = seen[0][0]["task"]["id"]
        seen.append(await _outcome(client.get_task(GetTaskRequest(id=task_id))))
        seen.append(await _outcome(client.get_task(GetTaskRequest(id=task_id, history_length=1))))
        seen.append(await _outcome(client.cancel_task(CancelTaskRequest(id=task_id))))
        try:
            seen.append([MessageToDict(ev) async for ev in client.subscribe(SubscribeToTaskRequest(id=task_id))])
        except Exception as exc:  # noqa: BLE001
            seen.append({"error": type(exc).__name__, "message": str(exc)})
        seen.append(await _outcome(client.get_task(GetTaskRequest(id="no-such-task"))))
        seen.append(await _outcome(client.list_tasks(ListTasksRequest())))
        return seen


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?")


def normalised(seen: list[Any]) -> str:
    """The session less what differs between two runs of the agent: ids and times (each id named by where it
    first shows), the order of an object's keys (a protobuf Struct's map has none), and the order of a
    ListTasks page's tasks of equal timestamps (the agent breaks ties by id, random in each run)."""
    text = json.dumps(seen, sort_keys=True)
    ids: dict[str, str] = {}
    text = _UUID.sub(lambda m: ids.setdefault(m.group(0), f"<id{len(ids)}>"), text)
    return json.dumps(_tasks_sorted(json.loads(_TIME.sub("<time>", text))), sort_keys=True)


def _tasks_sorted(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _tasks_sorted(v) for k, v in value.items()}
        if isinstance(out.get("tasks"), list):
            out["tasks"] = sorted(out["tasks"], key=lambda t: json.dumps(t, sort_keys=True))
        return out
    if isinstance(value, list):
        return [_tasks_sorted(v) for v in value]
    return value
