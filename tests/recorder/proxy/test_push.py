"""Push notifications through the proxy (issue 33 item 1): an a2a-sdk 1.3.0 agent with push
notifications on, behind ``a2a-tape proxy`` (the installed CLI in a subprocess, and in process
for the receiver's own refusals); the client's webhook is a small Starlette app on 127.0.0.1.

Every POST the agent makes is in the log as a ``push`` exchange linked to its task, with the
bytes the webhook got, before the webhook got them; the webhook gets the agent's token, the log
never holds it; config answers name the client's webhook, never the receiver.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_tape import store
from a2a_tape.recorder.proxy.push_configs import PUSH_PATH
from tests.conftest import running_sdk_agent
from tests.recorder.proxy.conftest import running_proxy
from tests.support.servers import closed_port, serve_app

V1 = {"content-type": "application/json", "a2a-version": "1.0"}
V03 = {"content-type": "application/json"}
TOKEN = "push-tok-1a2b3c4d5e6f"
TERMINAL = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED")
CLI = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "a2a-tape"


class Webhook:
    """The client's webhook: every POST kept (headers, bytes); a test waits for a task's last push."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.got: list[tuple[dict[str, str], bytes]] = []
        self.changed = threading.Condition()

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        with self.changed:
            self.got.append((dict(request.headers), body))
            self.changed.notify_all()
        return Response(b'{"ok":true}', self.status, media_type="application/json")

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    def ended(self, task_ids: set[str]) -> bool:
        done = set()
        for _, body in self.got:
            update = msgspec.json.decode(body).get("statusUpdate") or {}
            if update.get("status", {}).get("state") in TERMINAL:
                done.add(update["taskId"])
        return task_ids <= done

    def wait_ended(self, task_ids: set[str], timeout: float = 60) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.ended(task_ids), timeout), f"pushes missing: {len(self.got)} got"


class ProxyCli:
    """``a2a-tape proxy`` (the installed console script) in a subprocess; stopped by SIGTERM."""

    def __init__(self, upstream: str, db: Path, *extra: str) -> None:
        args = [str(CLI), "proxy", upstream, "--listen", "127.0.0.1:0", "--db", str(db), "--no-recover", *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        lines: queue.Queue[str] = queue.Queue()

        def drain() -> None:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                lines.put(raw.decode(errors="replace"))

        threading.Thread(target=drain, daemon=True).start()
        self.first = lines.get(timeout=30)
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", self.first)
        assert m, f"unexpected first line from the proxy: {self.first!r}"
        self.url = m.group(1)
        self.lines = lines

    def stop(self) -> str:
        """SIGTERM (in-flight requests finish: every push row is complete), then what it said."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=30) == 0
        said = [self.first]
        with contextlib.suppress(queue.Empty):
            while True:
                said.append(self.lines.get(timeout=1))
        return "".join(said)


@pytest.fixture
def webhook() -> Iterator[tuple[Webhook, str]]:
    hook = Webhook()
    with serve_app(hook.app()) as url:
        yield hook, url + "/hook"


def _send(url: str, text: str, webhook_url: str, *, dialect: str = "1.0", stream: bool = False) -> str:
    """A send with a push config through ``url``; the task id the agent answered."""
    if dialect == "1.0":
        config = {"taskPushNotificationConfig": {"url": webhook_url, "token": TOKEN}}
        method = "SendStreamingMessage" if stream else "SendMessage"
        message = {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}
    else:
        config = {"pushNotificationConfig": {"url": webhook_url, "token": TOKEN}}
        method = "message/stream" if stream else "message/send"
        message = {
            "kind": "message",
            "messageId": f"m-{text}",
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
        }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message, "configuration": config}}
    headers = V1 if dialect == "1.0" else V03
    if not stream:
        result = httpx.post(url + "/", json=body, headers=headers, timeout=60).json()["result"]
        return result["task"]["id"] if "task" in result else result["id"]
    with httpx.stream("POST", url + "/", json=body, headers=headers, timeout=60) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data:")]
    first = msgspec.json.decode(lines[0][5:])["result"]
    return first["task"]["id"] if "task" in first else first["id"]


def _pushes(db: Path) -> list[store.Exchange]:
    st = store.open_store(db)
    try:
        return [ex for ex in st.exchanges() if ex.role == "push"]
    finally:
        st.close()


@pytest.mark.parametrize(("dialect", "stream"), [("1.0", False), ("1.0", True), ("0.3", True)])
def test_every_push_is_in_the_log_linked_to_its_task_and_reaches_the_webhook(tmp_path, webhook, dialect, stream):
    hook, hook_url = webhook
    db = tmp_path / "tape.db"
    with running_sdk_agent(push=True) as agent:
        proxy = ProxyCli(agent.url, db)
        try:
            task_id = _send(proxy.url, "hello", hook_url, dialect=dialect, stream=stream)
            hook.wait_ended({task_id})
            listed = httpx.post(
                proxy.url + "/",
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "ListTaskPushNotificationConfigs",
                    "params": {"taskId": task_id},
                },
                headers=V1,
                timeout=30,
            ).json()["result"]["configs"]
        finally:
            said = proxy.stop()
    rows = _pushes(db)
    assert [ex.request_body for ex in rows] == [body for _, body in hook.got]  # the exact bytes, in order
    assert {ex.task_id for ex in rows} == {task_id}
    assert all(ex.outcome == "ok" and ex.status == 200 and ex.rpc_method == "push" for ex in rows)
    assert all(ex.url == hook_url for ex in rows)  # where it went: the client's webhook
    assert all(h.get("x-a2a-notification-token") == TOKEN for h, _ in hook.got)  # the webhook checks its token
    assert all(ex.request_headers["x-a2a-notification-token"] == "[redacted]" for ex in rows)
    assert [c["url"] for c in listed] == [hook_url]  # the client sees its own webhook, never ours
    assert PUSH_PATH not in str(listed)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("tape.db"))
    assert TOKEN.encode() not in raw and TOKEN not in said  # never on disk, never said


def test_http_json_config_calls_name_the_clients_webhook(tmp_path, webhook):
    hook, hook_url = webhook
    db = tmp_path / "tape.db"
    rest = "/a2a/rest"
    with running_sdk_agent(push=True, rest=True) as agent, running_proxy(agent.url, db) as p:
        send = {
            "message": {"messageId": "m-rest", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"taskPushNotificationConfig": {"url": hook_url, "token": TOKEN}},
        }
        task = httpx.post(p.url + rest + "/message:send", json=send, headers=V1, timeout=30).json()["task"]
        hook.wait_ended({task["id"]})
        other = hook_url + "?second=1"
        made = httpx.post(
            p.url + rest + f"/tasks/{task['id']}/pushNotificationConfigs",
            json={"id": "cfg-2", "url": other, "token": "tok-two-abcdef"},
            headers=V1,
            timeout=30,
        )
        listed = httpx.get(p.url + rest + f"/tasks/{task['id']}/pushNotificationConfigs", headers=V1, timeout=30)
        got = httpx.get(p.url + rest + f"/tasks/{task['id']}/pushNotificationConfigs/cfg-2", headers=V1, timeout=30)
        assert len(p.proxy.push.hooks) == 2  # each webhook the agent was given is a hook of ours
    assert made.json()["url"] == other and got.json()["url"] == other
    assert sorted(c["url"] for c in listed.json()["configs"]) == sorted([hook_url, other])
    assert PUSH_PATH not in made.text + listed.text + got.text
    assert {ex.task_id for ex in _pushes(db)} == {task["id"]}


def test_twenty_concurrent_tasks_lose_no_push(tmp_path, webhook):
    hook, hook_url = webhook
    db = tmp_path / "tape.db"
    with running_sdk_agent(push=True) as agent:
        proxy = ProxyCli(agent.url, db)
        try:
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                ids = set(pool.map(lambda i: _send(proxy.url, f"job {i}", hook_url, stream=i % 2 == 0), range(20)))
            assert len(ids) == 20
            hook.wait_ended(ids)
        finally:
            proxy.stop()
    rows = _pushes(db)
    assert len(rows) == len(hook.got) and {ex.task_id for ex in rows} == ids
    assert sorted(ex.request_body for ex in rows) == sorted(body for _, body in hook.got)
    assert all(ex.outcome == "ok" for ex in rows)


def test_a_webhook_that_is_down_loses_nothing(tmp_path):
    db = tmp_path / "tape.db"
    down = f"http://127.0.0.1:{closed_port()}/hook"
    with running_sdk_agent(push=True) as agent:
        proxy = ProxyCli(agent.url, db)
        try:
            task_id = _send(proxy.url, "nobody home", down)  # blocking: the task ended, every push made
        finally:
            proxy.stop()
    rows = _pushes(db)
    states = [
        msgspec.json.decode(ex.request_body).get("statusUpdate", {}).get("status", {}).get("state") for ex in rows
    ]
    assert "TASK_STATE_COMPLETED" in states and {ex.task_id for ex in rows} == {task_id}
    assert all(ex.outcome == "error" and "cannot be reached" in (ex.error or "") for ex in rows)


def test_push_receiver_off_leaves_configs_alone(tmp_path, webhook):
    hook, hook_url = webhook
    db = tmp_path / "tape.db"
    with running_sdk_agent(push=True) as agent, running_proxy(agent.url, db, push=False) as p:
        task_id = _send(p.url, "direct", hook_url)
        hook.wait_ended({task_id})
    assert _pushes(db) == []  # the agent posted to the webhook itself


def test_push_receiver_on_its_own_listener(tmp_path, webhook):
    hook, hook_url = webhook
    db = tmp_path / "tape.db"
    with running_sdk_agent(push=True) as agent:
        proxy = ProxyCli(agent.url, db, "--push-receiver", "127.0.0.1:0")
        try:
            assert "pushes received at http://127.0.0.1:" in proxy.first
            receiver = proxy.first.rsplit("pushes received at ", 1)[1].split()[0]
            task_id = _send(proxy.url, "own listener", hook_url)
            hook.wait_ended({task_id})
            # the receiver's listener answers pushes only: nothing of the agent through it
            assert httpx.get(receiver + "/.well-known/agent-card.json", timeout=10).status_code == 404
        finally:
            proxy.stop()
    assert {ex.task_id for ex in _pushes(db)} == {task_id}


# -- bad input: the receiver's own answers, and what the log says -----------------------------


@pytest.fixture
def receiver(tmp_path, webhook):
    """(proxy, hook url of the agent-facing receiver, webhook, db) with one config registered."""
    hook, hook_url = webhook
    db = tmp_path / "tape.db"
    with running_sdk_agent(push=True) as agent, running_proxy(agent.url, db, max_body=4096) as p:
        task_id = _send(p.url, "first", hook_url)
        hook.wait_ended({task_id})
        (only,) = p.proxy.push.hooks.all()
        yield p, p.url + PUSH_PATH + only.id, hook, db, task_id


def _notes(db: Path, ex_id: int | None) -> list[str]:
    st = store.open_store(db)
    try:
        return [store.decode_item(e.payload).body.action for e in st.read_exchange(ex_id or 0) if e.origin == "local"]
    finally:
        st.close()


def test_bad_pushes_get_a_clear_record_and_the_right_answer(receiver):
    p, at, hook, db, task_id = receiver
    before = len(hook.got)
    status = '{"statusUpdate":{"taskId":"%s","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}'
    cases = {
        "unknown hook": (p.url + PUSH_PATH + "x" * 22, status % task_id, {"x-a2a-notification-token": TOKEN}),
        "huge": (at, "x" * 10_000, {"x-a2a-notification-token": TOKEN}),
        "not A2A": (at, "<html>hello</html>", {"x-a2a-notification-token": TOKEN}),
        "no token": (at, status % task_id, {}),
        "wrong token": (at, status % task_id, {"x-a2a-notification-token": "another-one"}),
        "unknown task": (at, status % "no-such-task", {"x-a2a-notification-token": TOKEN}),
    }
    answers = {name: httpx.post(url, content=body, headers=h, timeout=30) for name, (url, body, h) in cases.items()}
    assert answers["unknown hook"].status_code == 404 and answers["huge"].status_code == 413
    for name in ("not A2A", "no token", "wrong token", "unknown task"):  # the webhook's to judge: delivered
        assert answers[name].status_code == 200, name
    assert len(hook.got) == before + 4
    rows = _pushes(db)[-6:]
    assert [ex.outcome for ex in rows] == ["refused", "refused", "ok", "ok", "ok", "ok"]
    assert "no push config" in (rows[0].error or "") and "limit of 4096 bytes" in (rows[1].error or "")
    assert rows[2].request_body == b"<html>hello</html>"
    assert [_notes(db, ex.id) for ex in rows[2:]] == [  # a push naming a task has its place in it: a push note
        ["push-not-a2a"],
        ["push", "push-token-missing"],
        ["push", "push-token-wrong"],
        ["push"],
    ]
    assert rows[5].task_id == "no-such-task"
    assert all("Traceback" not in a.text for a in answers.values())


@pytest.mark.parametrize("value", ["nonsense", "0.0.0.0:0", "127.0.0.1:99999"])
def test_a_bad_push_receiver_is_one_line_and_exit_2(tmp_path, value):
    from typer.testing import CliRunner

    from a2a_tape.cli import app

    r = CliRunner().invoke(
        app, ["proxy", "http://127.0.0.1:9", "--push-receiver", value, "--db", str(tmp_path / "t.db")]
    )
    assert r.exit_code == 2, r.output
    assert "--push-receiver" in r.output and "Traceback" not in r.output


def test_behind_a_token_only_a_hook_this_proxy_gave_out_is_public(tmp_path, webhook):
    hook, hook_url = webhook
    db = tmp_path / "tape.db"
    with running_sdk_agent(push=True) as agent, running_proxy(agent.url, db, token="proxy-tok-123456") as p:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m-tok", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
                "configuration": {"taskPushNotificationConfig": {"url": hook_url, "token": TOKEN}},
            },
        }
        auth = {**V1, "authorization": "Bearer proxy-tok-123456"}
        task_id = httpx.post(p.url + "/", json=body, headers=auth, timeout=30).json()["result"]["task"]["id"]
        hook.wait_ended({task_id})  # the agent's pushes went through without the proxy's token
        guessed = httpx.post(p.url + PUSH_PATH + "A" * 22, content=b"{}", timeout=10)
        other = httpx.post(p.url + "/.a2a-tape/other", content=b"{}", timeout=10)
    assert guessed.status_code == 404 and other.status_code == 401
    assert {ex.task_id for ex in _pushes(db) if ex.outcome == "ok"} == {task_id}


def test_config_calls_are_rows_of_their_task_in_either_spelling(tmp_path, webhook):
    """A config call's row names the task the config is for, never the config's own ``id`` (v1.0's
    ``CreateTaskPushNotificationConfig`` has both): ``taskId``, or ``task_id`` as the TCK sends it (proto
    JSON's other spelling, which the a2a-sdk agent accepts), or the HTTP+JSON route's path."""
    _, hook_url = webhook
    db = tmp_path / "tape.db"
    with running_sdk_agent(push=True, rest=True) as agent, running_proxy(agent.url, db) as p:
        task_id = _send(p.url, "configs", hook_url)

        def call(method: str, **params: object) -> dict[str, object]:
            body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
            return dict(httpx.post(p.url + "/", json=body, headers=V1, timeout=30).json())

        made = call("CreateTaskPushNotificationConfig", task_id=task_id, id="cfg-snake", url=hook_url)
        got = call("GetTaskPushNotificationConfig", taskId=task_id, id="cfg-snake")
        rest = httpx.get(p.url + f"/a2a/rest/tasks/{task_id}/pushNotificationConfigs/cfg-snake", headers=V1, timeout=30)
    assert "result" in made and "result" in got and rest.status_code == 200, (made, got, rest.text)
    st = store.open_store(db)
    try:
        calls = [ex for ex in st.exchanges() if "PushNotificationConfig" in (ex.rpc_method or "")]
    finally:
        st.close()
    assert len(calls) == 3 and {ex.task_id for ex in calls} == {task_id}, [(ex.rpc_method, ex.task_id) for ex in calls]
