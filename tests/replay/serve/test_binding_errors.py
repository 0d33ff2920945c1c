"""Errors replayed in the binding's own shape, as the agent sent them (issue 22).

- The agent's own refusals, recorded through the proxy, come back with every field it sent (its code,
  message and ``ErrorInfo`` details; the HTTP status on HTTP+JSON): subscribing to a finished task,
  a push-notification config on an agent without push notifications (sent again with another
  webhook URL: the agent refuses the method whatever it is sent), an unknown task.
- What no recording answers gets the error a live a2a-sdk 1.3.0 agent gives, in the same shape: each
  hostile request below is sent to the live agent and to the replay, and the status, the error's
  code/status and its ErrorInfo reasons must agree. Never a JSON-RPC envelope on an HTTP+JSON route.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.transport import ReplayTransport
from tests.recorder.proxy.conftest import running_proxy
from tests.support.sdk_agents import two_binding_agent

V1 = {"A2A-Version": "1.0", "content-type": "application/json"}
SEND = b'{"message": {"messageId": "e-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}'


def rpc(method: str, params: dict[str, Any], rpc_id: int = 1) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})


def push(task_id: str, url: str) -> dict[str, Any]:
    return {"taskId": task_id, "url": url}


def requests(binding: str, task_id: str, webhook: str) -> list[tuple[str, str, bytes]]:
    """(HTTP method, path, body) of the refused requests, in ``binding``."""
    if binding == "JSONRPC":
        return [
            ("POST", "/", rpc("SubscribeToTask", {"id": task_id}, 2)),
            ("POST", "/", rpc("CreateTaskPushNotificationConfig", push(task_id, webhook), 3)),
            ("POST", "/", rpc("GetTask", {"id": "no-such-task"}, 4)),
            ("POST", "/", rpc("CancelTask", {"id": task_id}, 5)),
        ]
    base = "/a2a/rest"
    return [
        ("POST", f"{base}/tasks/{task_id}:subscribe", b""),
        ("POST", f"{base}/tasks/{task_id}/pushNotificationConfigs", msgspec.json.encode({"url": webhook})),
        ("GET", f"{base}/tasks/no-such-task", b""),
        ("POST", f"{base}/tasks/{task_id}:cancel", b""),
    ]


def send(client: httpx.Client, binding: str) -> str:
    if binding == "JSONRPC":
        r = client.post("/", content=rpc("SendMessage", msgspec.json.decode(SEND)), headers=V1)
        return r.json()["result"]["task"]["id"]
    r = client.post("/a2a/rest/message:send", content=SEND, headers=V1)
    return r.json()["task"]["id"]


def answers(client: httpx.Client, binding: str, task_id: str, webhook: str) -> list[tuple[int, str, bytes]]:
    out = []
    for method, path, body in requests(binding, task_id, webhook):
        r = client.request(method, path, content=body or None, headers=V1)
        out.append((r.status_code, r.headers.get("content-type", ""), r.content))
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Iterator[dict[str, tuple[str, list[tuple[int, str, bytes]]]]]:
    """Per binding: (the task id, the agent's answers) recorded through the proxy."""
    out = {}
    for binding in ("JSONRPC", "HTTP+JSON"):
        db = tmp_path_factory.mktemp("errors") / "tape.db"
        with two_binding_agent() as agent, running_proxy(agent, db) as proxy:
            with httpx.Client(base_url=proxy.url, timeout=10) as c:
                task_id = send(c, binding)
                out[binding] = (task_id, answers(c, binding, task_id, "http://127.0.0.1:9/recorded-hook"), db)
    yield out


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_the_agents_refusals_replay_with_every_field(recorded, binding):
    task_id, live, db = recorded[binding]
    codes = [msgspec.json.decode(body).get("error", {}).get("code") for _, _, body in live]
    if binding == "JSONRPC":
        assert codes == [-32004, -32003, -32001, -32002]
    else:
        assert [s for s, _, _ in live] == [400, 400, 404, 400] and codes == [400, 400, 404, 400]
    lib = Library.open(db)
    try:
        with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(lib)), base_url="http://replay.test") as c:
            send(c, binding)
            # the push config names another webhook: the agent refuses the method whatever it is sent
            got = answers(c, binding, task_id, "http://127.0.0.1:9/another-hook")
    finally:
        lib.close()
    assert [(s, body) for s, _, body in got] == [(s, body) for s, _, body in live]


# -- what no recording answers: the error a live agent gives, in the binding's shape ------------------

HOSTILE = [
    ("GET", "/a2a/rest/tasks/no-such-task", b"", V1),  # unknown task
    ("POST", "/a2a/rest/tasks/no-such-task:cancel", b"", V1),
    ("POST", "/a2a/rest/tasks/no-such-task:subscribe", b"", V1),
    ("GET", "/a2a/rest/tasks/no-such-task", b"", {}),  # no A2A-Version: 0.3, refused on these routes
    ("POST", "/a2a/rest/message:send", b"{not json", V1),  # unreadable body
    ("POST", "/a2a/rest/message:send", b'{"message": {"messageId": "x", "role": "ROLE_USER"}}', V1),  # no parts
    ("GET", "/a2a/rest/tasks?pageSize=0", b"", V1),  # page size out of range
    ("GET", "/a2a/rest/tasks?pageSize=500", b"", V1),
    # the same refusals on JSON-RPC: a JSON-RPC error with the same ErrorInfo details
    ("POST", "/", rpc("GetTask", {"id": "no-such-task"}), V1),
    ("POST", "/", rpc("CancelTask", {"id": "no-such-task"}), V1),
    ("POST", "/", rpc("GetTask", {"id": "no-such-task"}), {}),
    ("POST", "/", rpc("SendMessage", {"message": {"messageId": "x", "role": "ROLE_USER"}}), V1),
    ("POST", "/", rpc("SendMessage", {}), V1),
    ("POST", "/", rpc("ListTasks", {"pageSize": 0}), V1),
]


def _error(path: str, status: int, body: bytes) -> tuple[int, Any, Any, Any]:
    """(HTTP status, code, status name, details) of an error answer, in the shape of its route's binding."""
    whole = msgspec.json.decode(body)
    err = whole.get("error")
    assert isinstance(err, dict), body
    rest = path.startswith("/a2a/rest")
    assert ("jsonrpc" in whole) != rest, body  # never a JSON-RPC envelope on an HTTP+JSON route, nor the reverse
    return status, err.get("code"), err.get("status"), err.get("details" if rest else "data")


@pytest.fixture(scope="module")
def empty_replay(recorded) -> Iterator[httpx.Client]:
    lib = Library.open(recorded["JSONRPC"][2])
    try:
        with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(lib)), base_url="http://replay.test") as c:
            yield c
    finally:
        lib.close()


@pytest.mark.parametrize(
    ("method", "path", "body", "headers"), HOSTILE, ids=[f"{m} {p} {b[:12]!r}" for m, p, b, _ in HOSTILE]
)
def test_what_no_recording_answers_is_refused_as_the_agent_refuses_it(empty_replay, method, path, body, headers):
    with two_binding_agent() as agent, httpx.Client(base_url=agent, timeout=10) as live_client:
        live = live_client.request(method, path, content=body or None, headers=headers)
    got = empty_replay.request(method, path, content=body or None, headers=headers)
    assert live.status_code >= 400 or b'"error"' in live.content
    assert _error(path, got.status_code, got.content) == _error(path, live.status_code, live.content)
