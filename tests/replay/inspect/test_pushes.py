"""Pushes in the inspection views (issue 33 item 2): ``show`` puts them beside the stream,
doctor compares them with what the agent streamed or stored.

Recorded for real (an a2a-sdk 1.3.0 agent with push notifications behind the proxy, a Starlette
webhook), then read through the installed CLI (``show``'s human view, and ``doctor`` where the token must
not show); its other readings run the same command in process; the doctor rules on a log written by hand too.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import msgspec

from a2a_tape import store
from a2a_tape.inspection.doctor import findings
from a2a_tape.recorder.proxy.push_configs import PUSH_PATH
from tests.conftest import running_sdk_agent
from tests.recorder.proxy.conftest import running_proxy
from tests.recorder.proxy.test_push import TOKEN, Webhook, _send
from tests.support.in_process import run_text_in_process
from tests.support.servers import serve_app

CLI = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "a2a-tape"


def _cli(*args: str, installed: bool = False) -> subprocess.CompletedProcess[str]:
    """``a2a-tape ARGS`` in this process; ``installed``: by the installed script."""
    if not installed:
        return run_text_in_process(list(args))
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=60)


def _record(db: Path, *extra_pushes: tuple[dict[str, str], bytes]) -> str:
    """One non-streaming task with a webhook through the proxy; then ``extra_pushes`` posted to its hook."""
    hook = Webhook()
    with serve_app(hook.app()) as url, running_sdk_agent(push=True) as agent, running_proxy(agent.url, db) as p:
        task_id = _send(p.url, "hello", url + "/hook")
        hook.wait_ended({task_id})
        (h,) = p.proxy.push.hooks.all()
        for headers, body in extra_pushes:
            httpx.post(p.url + PUSH_PATH + h.id, content=body.replace(b"TASK", task_id.encode()), headers=headers)
    return task_id


def test_show_puts_the_pushes_beside_the_stream_and_doctor_finds_nothing_wrong(tmp_path):
    db = tmp_path / "t.db"
    task_id = _record(db)
    rows = json.loads(_cli("show", task_id, "--db", str(db), "--json").stdout)
    pushed = [r for r in rows if r["origin"] == "push"]
    kinds = [r["kind"] for r in pushed]
    assert kinds[0] == "task" and kinds[-1] == "status" and "artifact" in kinds
    assert any(r["origin"] == "upstream" for r in rows)  # the send's answer, beside them
    human = _cli("show", task_id, "--db", str(db), installed=True)
    assert "PUSH" in human.stdout and "webhook 200" in human.stdout and "PUSH rows are" in human.stderr
    doctor = json.loads(_cli("doctor", task_id, "--db", str(db), "--json").stdout)
    assert [f for f in doctor["findings"] if f["code"].startswith("push-")] == []


def test_doctor_names_a_push_without_the_token_and_one_after_the_terminal(tmp_path):
    db = tmp_path / "t.db"
    late = b'{"statusUpdate":{"taskId":"TASK","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}'
    task_id = _record(db, ({}, late))
    doctor = json.loads(_cli("doctor", task_id, "--db", str(db), "--json", installed=True).stdout)
    codes = {f["code"] for f in doctor["findings"]}
    assert {"push-without-token", "push-after-terminal"} <= codes
    assert TOKEN not in json.dumps(doctor)


def test_doctor_names_a_push_for_a_task_no_config_named(tmp_path):
    """An agent that sends one task's update to the webhook another task registered: the a2a-sdk agent does not,
    so the stray push is POSTed to the proxy's receiver by hand (to the hook the real agent was given; the proxy
    and doctor as they run). Task A registers a webhook, task B none; a push naming B comes to A's webhook: it is
    filed under B, and doctor says no config of B names that webhook; A has no such finding."""
    db = tmp_path / "t.db"
    hook = Webhook()
    with serve_app(hook.app()) as url, running_sdk_agent(push=True) as agent, running_proxy(agent.url, db) as p:
        a = _send(p.url, "hello", url + "/hook")
        hook.wait_ended({a})
        plain = {"messageId": "m-b", "role": "ROLE_USER", "parts": [{"text": "no webhook"}]}
        body = {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": plain}}
        b = httpx.post(p.url + "/", json=body, headers={"a2a-version": "1.0"}, timeout=30).json()["result"]["task"][
            "id"
        ]
        (h,) = p.proxy.push.hooks.all()
        stray = {"statusUpdate": {"taskId": b, "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}
        httpx.post(p.url + PUSH_PATH + h.id, json=stray, headers={"x-a2a-notification-token": TOKEN}, timeout=30)
    other = json.loads(_cli("doctor", b, "--db", str(db), "--json").stdout)
    found = [f for f in other["findings"] if f["code"] == "push-other-task"]
    assert [f["level"] for f in found] == ["error"], other
    assert "1 push(es)" in found[0]["message"] and "/hook" in found[0]["message"]
    mine = json.loads(_cli("doctor", a, "--db", str(db), "--json").stdout)
    assert [f for f in mine["findings"] if f["code"] == "push-other-task"] == []


def test_push_other_task_compares_webhooks_without_their_query(tmp_path):
    """A config's URL is kept as sent, a push row's redacted: a secret in the query does not make the push stray."""
    with store.open_store(tmp_path / "t.db") as st:
        send = store.Exchange(
            url="http://agent/",
            rpc_method="SendMessage",
            request_body=b'{"params":{"configuration":{"taskPushNotificationConfig":{"url":"http://C/h?token=s3cr3t"}}}}',
            task_id="t1",
            role="proxy",
        )
        st.begin_exchange(send)
        body = b'{"statusUpdate":{"taskId":"t1","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}'
        st.begin_exchange(
            store.Exchange(
                url="http://c/h?token=[redacted]", rpc_method="push", request_body=body, task_id="t1", role="push"
            )
        )
        found = [f for f in findings("t1", st.read_task("t1"), st.exchanges("t1")) if f.code == "push-other-task"]
    assert found == []


def _log(st: store.Store, pushed_states: list[str]) -> list[store.Exchange]:
    send = store.Exchange(
        url="http://agent/",
        rpc_method="SendMessage",
        request_body=b'{"params":{"configuration":{"taskPushNotificationConfig":{"url":"http://c/h"}}}}',
        task_id="t1",
        role="proxy",
    )
    ex_id = st.begin_exchange(send)
    for state in ("TASK_STATE_WORKING", "TASK_STATE_COMPLETED"):
        payload = msgspec.json.encode({"statusUpdate": {"taskId": "t1", "contextId": "c", "status": {"state": state}}})
        st.append(store.NewEvent(payload=payload, task_id="t1", exchange_id=ex_id, received_at=1.0))
    for i, state in enumerate(pushed_states):
        body = msgspec.json.encode({"statusUpdate": {"taskId": "t1", "contextId": "c", "status": {"state": state}}})
        push = store.Exchange(url="http://c/h", rpc_method="push", request_body=body, task_id="t1", role="push")
        push.started_at = 2.0 + i
        st.begin_exchange(push)
    return st.exchanges("t1")


def test_doctor_names_the_state_never_pushed(tmp_path):
    """a2a-python#218's shape: the agent streamed the end, its webhook never heard of it."""
    with store.open_store(tmp_path / "t.db") as st:
        exchanges = _log(st, ["TASK_STATE_WORKING"])
        found = [f for f in findings("t1", st.read_task("t1"), exchanges) if f.code == "push-missed-state"]
    assert [(f.level, "completed" in f.message) for f in found] == [("error", True)]


def test_a_task_without_a_webhook_has_no_push_finding(tmp_path):
    with store.open_store(tmp_path / "t.db") as st:
        send = store.Exchange(url="http://agent/", rpc_method="SendMessage", request_body=b"{}", task_id="t1")
        ex_id = st.begin_exchange(send)
        payload = b'{"statusUpdate":{"taskId":"t1","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}'
        st.append(store.NewEvent(payload=payload, task_id="t1", exchange_id=ex_id, received_at=1.0))
        found = findings("t1", st.read_task("t1"), st.exchanges("t1"))
    assert [f for f in found if f.code.startswith("push-")] == []


def test_channels_fold_the_pushes_of_a_task_the_client_never_streamed(tmp_path):
    """A send answered at once (returnImmediately): the client learns the rest by webhook only."""
    db = tmp_path / "t.db"
    hook = Webhook()
    with serve_app(hook.app()) as url, running_sdk_agent(push=True) as agent, running_proxy(agent.url, db) as p:
        send = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m-now", "role": "ROLE_USER", "parts": [{"text": "now"}]},
                "configuration": {
                    "returnImmediately": True,
                    "taskPushNotificationConfig": {"url": url + "/hook", "token": TOKEN},
                },
            },
        }
        answer = httpx.post(p.url + "/", json=send, headers={"a2a-version": "1.0"}, timeout=30).json()["result"]
        task_id = answer["task"]["id"]
        hook.wait_ended({task_id})
    view = json.loads(_cli("channels", task_id, "--db", str(db), "--json").stdout)
    assert answer["task"]["status"]["state"] != "TASK_STATE_COMPLETED"  # the send's answer alone: not ended
    assert view["state"] == "completed"
    assert "chunk-0 chunk-1 chunk-2" in json.dumps(view)
