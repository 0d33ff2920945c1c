"""Recorded pushes replayed by ``serve`` (issue 33 item 3), through the installed CLI.

An a2a-sdk 1.3.0 agent with push notifications on is recorded once behind ``a2a-tape proxy`` (a
non-streaming and a streaming send, each registering a webhook); ``a2a-tape serve`` then replays
that log to a client that registers its own Starlette webhook on 127.0.0.1 with its own token.
Waits are on conditions (the webhook's POSTs, serve's line per push), never sleeps.
"""

from __future__ import annotations

import contextlib
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from a2a_tape import store
from tests.conftest import running_sdk_agent
from tests.recorder.proxy.test_push import CLI, V1, ProxyCli, Webhook, _send
from tests.support.servers import serve_app

pytestmark = pytest.mark.skipif(not CLI.exists(), reason="needs the installed console script")
MINE = "replaying-client-token-42"


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> tuple[Path, dict[str, list[bytes]]]:
    """(log, {text: the task's recorded push bodies}) for "hello" (blocking send) and "streamy" (stream)."""
    db = tmp_path_factory.mktemp("pushes") / "tape.db"
    hook = Webhook()
    with serve_app(hook.app()) as url, running_sdk_agent(push=True) as agent:
        proxy = ProxyCli(agent.url, db)
        try:
            ids = {"hello": _send(proxy.url, "hello", url + "/hook")}
            ids["streamy"] = _send(proxy.url, "streamy", url + "/hook", stream=True)
            hook.wait_ended(set(ids.values()))
        finally:
            proxy.stop()
    st = store.open_store(db)
    try:
        rows = [ex for ex in st.exchanges() if ex.role == "push"]
    finally:
        st.close()
    return db, {text: [ex.request_body or b"" for ex in rows if ex.task_id == tid] for text, tid in ids.items()}


class ServeCli:
    """``a2a-tape serve`` in a subprocess: its URL, and its stderr lines as they come."""

    def __init__(self, db: Path, *extra: str) -> None:
        args = [str(CLI), "serve", "--db", str(db), "--listen", "127.0.0.1:0", *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self.changed = threading.Condition()
        first: queue.Queue[str] = queue.Queue()

        def drain() -> None:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace")
                if not self.lines:
                    first.put(line)
                with self.changed:
                    self.lines.append(line)
                    self.changed.notify_all()

        threading.Thread(target=drain, daemon=True).start()
        m = re.search(r"(http://127\.0\.0\.1:\d+)", first.get(timeout=30))
        assert m, self.lines
        self.url = m.group(1)

    def wait_line(self, pattern: str, count: int = 1, timeout: float = 30) -> None:
        with self.changed:
            found = self.changed.wait_for(
                lambda: sum(bool(re.search(pattern, x)) for x in self.lines) >= count, timeout
            )
            assert found, f"no {pattern!r} in {self.lines}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


@contextlib.contextmanager
def serving(db: Path, *extra: str) -> Iterator[ServeCli]:
    s = ServeCli(db, *extra)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def webhook() -> Iterator[tuple[Webhook, str]]:
    hook = Webhook()
    with serve_app(hook.app()) as url:
        yield hook, url + "/hook"


def send(url: str, text: str, hook_url: str | None, *, stream: bool, fault: str | None = None) -> str:
    """A v1.0 send through ``url`` registering ``hook_url`` (None: no webhook) with :data:`MINE`;
    the task id answered (a stream: read to its end)."""
    params: dict[str, object] = {"message": {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}}
    if hook_url is not None:
        params["configuration"] = {"taskPushNotificationConfig": {"url": hook_url, "token": MINE}}
    method = "SendStreamingMessage" if stream else "SendMessage"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {**V1, **({"x-a2a-tape-fault": fault} if fault else {})}
    if not stream:
        return str(httpx.post(url + "/", json=body, headers=headers, timeout=30).json()["result"]["task"]["id"])
    with httpx.stream("POST", url + "/", json=body, headers=headers, timeout=30) as r:
        data = [line for line in r.iter_lines() if line.startswith("data:")]
    return str(msgspec.json.decode(data[0][5:])["result"]["task"]["id"])


def wait_for(hook: Webhook, n: int, timeout: float = 30) -> list[bytes]:
    with hook.changed:
        assert hook.changed.wait_for(lambda: len(hook.got) >= n, timeout), f"{len(hook.got)} of {n} pushes"
        return [body for _, body in hook.got]


def states(bodies: list[bytes]) -> list[str]:
    out = []
    for b in bodies:
        doc = msgspec.json.decode(b)
        status = (doc.get("statusUpdate") or doc.get("task") or {}).get("status")
        if status:
            out.append(status["state"])
    return out


@pytest.mark.parametrize("text", ["hello", "streamy"], ids=["blocking-send", "streaming-send"])
def test_the_webhook_a_replaying_client_registers_gets_the_recorded_pushes(recording, webhook, text):
    db, recorded = recording
    hook, hook_url = webhook
    with serving(db) as serve:
        task_id = send(serve.url, text, hook_url, stream=text == "streamy")
        got = wait_for(hook, len(recorded[text]))
        serve.wait_line(rf"PUSH {len(recorded[text])}/{len(recorded[text])} task {task_id} webhook")
        listed = httpx.post(
            serve.url + "/",
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "ListTaskPushNotificationConfigs",
                "params": {"taskId": task_id},
            },
            headers=V1,
            timeout=30,
        ).json()["result"]["configs"]
    assert got == recorded[text]  # the agent's bytes, in recorded order, as many
    assert states(got)[-1] == "TASK_STATE_COMPLETED" and states(got) == states(recorded[text])
    assert {h.get("x-a2a-notification-token") for h, _ in hook.got} == {MINE}  # the token this client set
    assert [(c["url"], c["token"], c["taskId"]) for c in listed] == [(hook_url, MINE, task_id)]


def test_a_config_set_by_call_is_what_get_and_list_answer(recording, webhook):
    db, _ = recording
    _, hook_url = webhook
    with serving(db) as serve:
        task_id = send(serve.url, "hello", None, stream=False)

        def call(method: str, **params: object) -> httpx.Response:
            body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"taskId": task_id, **params}}
            return httpx.post(serve.url + "/", json=body, headers=V1, timeout=30)

        made = call("CreateTaskPushNotificationConfig", id="c-2", url=hook_url, token=MINE).json()["result"]
        got = call("GetTaskPushNotificationConfig", id="c-2").json()["result"]
        listed = call("ListTaskPushNotificationConfigs").json()["result"]["configs"]
        call("DeleteTaskPushNotificationConfig", id="c-2")
        after = call("ListTaskPushNotificationConfigs").json()["result"]["configs"]
        unknown = httpx.post(
            serve.url + "/",
            json={"jsonrpc": "2.0", "id": 4, "method": "ListTaskPushNotificationConfigs", "params": {"taskId": "nope"}},
            headers=V1,
            timeout=30,
        ).json()
    assert made == got == {"id": "c-2", "taskId": task_id, "url": hook_url, "token": MINE}
    assert listed == [made] and after == []
    assert unknown["error"]["code"] == -32001


def test_a_client_that_registers_no_webhook_gets_no_post(recording, webhook):
    db, recorded = recording
    hook, _ = webhook
    n = len(recorded["hello"])
    with serving(db) as serve:
        task_id = send(serve.url, "hello", None, stream=False)
        serve.wait_line(rf"PUSH {n}/{n} task {task_id} not sent: no webhook registered")
    assert hook.got == []


@pytest.mark.parametrize("text", ["hello", "streamy"])
def test_faults_on_pushes_are_what_the_webhook_sees(recording, webhook, text):
    db, recorded = recording
    hook, hook_url = webhook
    pushes = recorded[text]
    n = len(pushes)
    with serving(db) as serve:
        task_id = send(serve.url, text, hook_url, stream=text == "streamy", fault="push-drop=2,push-duplicate=last")
        serve.wait_line(rf"PUSH {n}/{n} task {task_id} webhook", count=2)  # the last one twice
        serve.wait_line(rf"PUSH 2/{n} task {task_id} not sent: fault push-drop")
        got = wait_for(hook, n)
    assert got == [pushes[0], *pushes[2:], pushes[-1]]  # the second never came, the terminal one twice


def test_push_delay_and_reorder(recording, webhook):
    db, recorded = recording
    hook, hook_url = webhook
    pushes = recorded["hello"]
    with serving(db, "--fault", "push-delay=250,push-reorder") as serve:
        sent = time.monotonic()
        send(serve.url, "hello", hook_url, stream=False)
        first = wait_for(hook, 1)
        took = time.monotonic() - sent
        got = wait_for(hook, len(pushes))
    assert took >= 0.25  # the first push waited its delay
    assert got == [*pushes[:-2], pushes[-1], pushes[-2]]  # the terminal one before the one before it
    assert first[0] == pushes[0]


def test_push_timing_recorded_keeps_the_agents_pace(recording, webhook):
    db, recorded = recording
    hook, hook_url = webhook
    st = store.open_store(db)
    try:
        rows = [ex for ex in st.exchanges() if ex.role == "push" or ex.rpc_method == "SendMessage"]
    finally:
        st.close()
    start = rows[0].started_at
    last = max(ex.started_at for ex in rows if ex.role == "push" and ex.request_body == recorded["hello"][-1])
    with serving(db, "--push-timing", "recorded") as serve:
        sent = time.monotonic()
        send(serve.url, "hello", hook_url, stream=False)
        wait_for(hook, len(recorded["hello"]))
        took = time.monotonic() - sent
    assert took >= (last - start) * 0.9  # the last push came as long after the send as the agent's


def test_a_bad_push_timing_is_one_line_and_exit_2(recording):
    db, _ = recording
    done = subprocess.run(
        [str(CLI), "serve", "--db", str(db), "--push-timing", "soon"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2 and "--push-timing" in done.stderr and "Traceback" not in done.stderr
    bad = subprocess.run(
        [str(CLI), "serve", "--db", str(db), "--fault", "push-drop=0"], capture_output=True, text=True, timeout=30
    )
    assert bad.returncode == 2 and "pushes count from 1" in bad.stderr


def test_the_agents_authorization_is_replayed_with_the_replaying_clients_credentials(tmp_path, webhook):
    """A config with ``authentication`` (scheme and credentials): the a2a-sdk agent sends each push with
    ``Authorization: <scheme> <credentials>`` (the TCK's PUSH-DELIVER-001 checks it). The proxy forwards it to the
    webhook and keeps it redacted; serve sends the header the replaying client's own config makes."""
    hook, hook_url = webhook
    db = tmp_path / "tape.db"

    def send_with_auth(url: str, credentials: str) -> str:
        config = {"url": hook_url, "authentication": {"scheme": "Bearer", "credentials": credentials}}
        params = {
            "message": {"messageId": "m-auth", "role": "ROLE_USER", "parts": [{"text": "hello"}]},
            "configuration": {"taskPushNotificationConfig": config},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        return str(httpx.post(url + "/", json=body, headers=V1, timeout=30).json()["result"]["task"]["id"])

    with running_sdk_agent(push=True) as agent:
        proxy = ProxyCli(agent.url, db)
        try:
            task_id = send_with_auth(proxy.url, "recorded-secret-1234")
            hook.wait_ended({task_id})
        finally:
            proxy.stop()
    live = [h.get("authorization") for h, _ in hook.got]
    assert live and set(live) == {"Bearer recorded-secret-1234"}
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("tape.db"))
    assert b"recorded-secret-1234" not in raw  # redacted in the log
    hook.got.clear()
    with serving(db) as serve:
        replayed_task = send_with_auth(serve.url, "replaying-secret-5678")
        got = wait_for(hook, len(live))
        serve.wait_line(rf"PUSH {len(live)}/{len(live)} task {replayed_task} webhook")
    assert len(got) == len(live)
    assert {h.get("authorization") for h, _ in hook.got} == {"Bearer replaying-secret-5678"}
