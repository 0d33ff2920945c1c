"""The demo agent pushes (what the README's push block records and replays): a send with a push config gets
its task's updates POSTed to that webhook, in order, with the config's token, in the send's dialect: the task
as created, then each update it streams, the last one its end. Real HTTP on 127.0.0.1: the demo agent and a
Starlette webhook."""

from __future__ import annotations

import httpx
import msgspec
import pytest

from a2a_tape.recorder.demo_agent import make_demo_app
from tests.recorder.proxy.test_push import Webhook
from tests.support.servers import serve_app

TERMINAL = ("TASK_STATE_COMPLETED", "completed")


def _kinds(bodies: list[bytes], dialect: str) -> list[str]:
    docs = [msgspec.json.decode(b) for b in bodies]
    if dialect == "1.0":
        return [next(iter(d)) for d in docs]  # task, statusUpdate, artifactUpdate
    return [d["kind"] for d in docs]  # task, status-update, artifact-update


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_a_send_with_a_webhook_gets_each_update_pushed_in_order(dialect):
    hook = Webhook()
    if dialect == "1.0":
        message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        config = {"taskPushNotificationConfig": {"url": "URL", "token": "tok-1"}}
        method, headers = "SendStreamingMessage", {"a2a-version": "1.0"}
    else:
        message = {"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}
        config = {"pushNotificationConfig": {"url": "URL", "token": "tok-1"}}
        method, headers = "message/stream", {}
    with serve_app(hook.app()) as base, serve_app(make_demo_app(delay=0)) as agent:
        config[next(iter(config))]["url"] = base + "/hook"
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message, "configuration": config}}
        with httpx.stream("POST", agent + "/", json=body, headers=headers, timeout=30) as r:
            streamed = [msgspec.json.decode(line[5:])["result"] for line in r.iter_lines() if line.startswith("data:")]
        with hook.changed:
            assert hook.changed.wait_for(lambda: len(hook.got) >= len(streamed), 30), (len(hook.got), len(streamed))
    bodies = [b for _, b in hook.got]
    assert all(h.get("x-a2a-notification-token") == "tok-1" for h, _ in hook.got)
    # as many pushes as items streamed, the same kinds in the same order: the task, then each update
    assert _kinds(bodies, dialect) == [next(iter(s)) if dialect == "1.0" else s["kind"] for s in streamed]
    last = msgspec.json.decode(bodies[-1])
    assert (last["statusUpdate"] if dialect == "1.0" else last)["status"]["state"] in TERMINAL


def test_a_send_without_a_webhook_pushes_nothing():
    hook = Webhook()
    with serve_app(hook.app()), serve_app(make_demo_app(delay=0)) as agent:
        message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        answer = httpx.post(agent + "/", json=body, headers={"a2a-version": "1.0"}, timeout=30).json()
        assert "task" in answer["result"]
    assert hook.got == []
