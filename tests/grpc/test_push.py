"""Push notifications over gRPC (issue 33 item 4): a real a2a-sdk 1.3.0 agent serving gRPC with push
notifications on (tests/support/grpc_agents.py, ``push=True``), behind ``a2a-tape proxy --grpc-listen`` (the
installed CLI in a subprocess), then ``a2a-tape serve --grpc-listen`` over its log; the client's webhook is a
small Starlette app on 127.0.0.1 (tests/recorder/proxy/test_push.py), the calls raw gRPC (tests/grpc/clients.py).

A webhook registered over gRPC (in a send's configuration, or by CreateTaskPushNotificationConfig) reaches the
agent as the proxy's push receiver: every POST the agent makes is in the log, linked to its task, and goes on to
the client's webhook; every config answer over gRPC (create, get, list) names the client's own URL. Serve
delivers the recorded pushes to the webhook a replaying gRPC client registers, and answers its config calls
(DeleteTaskPushNotificationConfig's Empty included).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format

from a2a_tape import store
from a2a_tape.recorder.proxy.push_configs import PUSH_PATH
from tests.grpc.clients import raw_call
from tests.recorder.proxy.test_push import CLI, TOKEN, ProxyCli, Webhook
from tests.replay.serve.test_pushes import MINE, serving, wait_for
from tests.support.grpc_agents import running_grpc_agent
from tests.support.servers import serve_app

pytestmark = pytest.mark.skipif(not CLI.exists(), reason="needs the installed console script")


def _call(target: str, method: str, request: Any, answer: type) -> tuple[str, dict[str, Any]]:
    """A unary call; (status name, the answer's JSON mapping)."""
    raw = raw_call(target, method, request.SerializeToString(), streaming=False)
    if raw.code != "OK":
        return raw.code, {"details": raw.details}
    msg = answer()
    msg.ParseFromString(raw.messages[0])
    return raw.code, json_format.MessageToDict(msg)


def _send(target: str, text: str, hook_url: str, token: str) -> str:
    """A SendMessage registering ``hook_url`` with ``token``; the task id answered."""
    req = json_format.ParseDict(
        {
            "message": {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]},
            "configuration": {"taskPushNotificationConfig": {"id": "cfg-1", "url": hook_url, "token": token}},
        },
        a2a_pb2.SendMessageRequest(),
    )
    code, answer = _call(target, "SendMessage", req, a2a_pb2.SendMessageResponse)
    assert code == "OK", answer
    return str(answer["task"]["id"])


def _config(task_id: str, config_id: str, url: str | None = None, token: str | None = None) -> Any:
    fields = {"taskId": task_id, "id": config_id} | ({"url": url} if url else {}) | ({"token": token} if token else {})
    return json_format.ParseDict(fields, a2a_pb2.TaskPushNotificationConfig())


def _grpc_address(lines: list[str]) -> str:
    for line in lines:
        m = re.search(r"gRPC on (127\.0\.0\.1:\d+)", line)
        if m:
            return m.group(1)
    raise AssertionError(f"no gRPC address in {lines}")


def test_grpc_push_configs_go_through_the_receiver_and_replay(tmp_path):
    hook = Webhook()
    db = tmp_path / "tape.db"
    with serve_app(hook.app()) as hook_base, running_grpc_agent(push=True) as agent:
        hook_url, other = hook_base + "/hook", hook_base + "/hook?second=1"
        proxy = ProxyCli(agent.url, db, "--grpc-listen", "127.0.0.1:0")
        try:
            said = [proxy.lines.get(timeout=30)]  # after the line it listens on: where its gRPC side does
            while not re.search(r"gRPC on ", said[-1]):
                said.append(proxy.lines.get(timeout=30))
            target = _grpc_address(said)
            task_id = _send(target, "hello", hook_url, TOKEN)
            hook.wait_ended({task_id})
            made = _call(
                target,
                "CreateTaskPushNotificationConfig",
                _config(task_id, "cfg-2", other, "tok-two-abcdef"),
                a2a_pb2.TaskPushNotificationConfig,
            )
            got = _call(
                target,
                "GetTaskPushNotificationConfig",
                a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id="cfg-2"),
                a2a_pb2.TaskPushNotificationConfig,
            )
            listed = _call(
                target,
                "ListTaskPushNotificationConfigs",
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id),
                a2a_pb2.ListTaskPushNotificationConfigsResponse,
            )
        finally:
            proxy.stop()
    # the client sees its own webhooks in every config answer, never the receiver
    assert made[0] == got[0] == listed[0] == "OK", (made, got, listed)
    assert made[1]["url"] == got[1]["url"] == other
    assert sorted(c["url"] for c in listed[1]["configs"]) == sorted([hook_url, other])
    assert PUSH_PATH not in str([made, got, listed])
    # the agent posted to the receiver: each push in the log, linked to its task, as the webhook got it
    st = store.open_store(db)
    try:
        rows = st.exchanges()
        answers = b"".join(bytes(e.payload) for e in st.read_task(task_id))
    finally:
        st.close()
    pushes = [ex for ex in rows if ex.role == "push"]
    assert pushes and [ex.request_body for ex in pushes] == [body for _, body in hook.got]
    assert {ex.task_id for ex in pushes} == {task_id} and all(ex.outcome == "ok" for ex in pushes)
    assert all(h.get("x-a2a-notification-token") == TOKEN for h, _ in hook.got)
    assert PUSH_PATH.encode() not in answers  # the log keeps what the client was answered
    config_rows = [ex for ex in rows if "PushNotificationConfig" in (ex.rpc_method or "")]
    assert {ex.task_id for ex in config_rows} == {task_id} and len(config_rows) == 3

    # serve over gRPC: a replaying client's webhook gets the recorded pushes; its config calls are answered
    recorded = [ex.request_body for ex in pushes]
    replayed = Webhook()
    with serve_app(replayed.app()) as replay_base, serving(db, "--grpc-listen", "127.0.0.1:0") as serve:
        serve.wait_line(r"gRPC on ")
        target = _grpc_address(serve.lines)
        replay_task = _send(target, "hello", replay_base + "/hook", MINE)
        got_back = wait_for(replayed, len(recorded))
        gone = _call(
            target,
            "DeleteTaskPushNotificationConfig",
            a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=replay_task, id="cfg-1"),
            a2a_pb2.TaskPushNotificationConfig,  # Empty: no field to read
        )
        left = _call(
            target,
            "ListTaskPushNotificationConfigs",
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=replay_task),
            a2a_pb2.ListTaskPushNotificationConfigsResponse,
        )
    assert replay_task == task_id  # a replay answers with the recorded ids
    assert got_back == recorded
    assert {h.get("x-a2a-notification-token") for h, _ in replayed.got} == {MINE}
    assert gone[0] == "OK" and left == ("OK", {}), (gone, left)
