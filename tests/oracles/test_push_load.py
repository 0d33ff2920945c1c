"""Pushes under load through the proxy (issue 33): 100 concurrent tasks, each registering a webhook of its own
with its streaming send, against two real agents that push: the a2a-sdk 1.3.0 agent of tests/support and the
agent built with the official JavaScript SDK (tests/oracles/js/agent.mjs --push). ``a2a-tape proxy`` is the
installed console script; the client's webhook is a Starlette app on 127.0.0.1 with a path and a token per task.

For every task: each push the agent made is in the log once, as a push row of that task (and its note), in the
order the webhook got them, with the bytes it got; the webhook of that task (its path, its token) got every push
of that task and no other; as many pushes as the same agent makes for one task alone, ending with the terminal
state; doctor finds no push fault. The size (100 tasks, 3 chunks each) keeps each agent's run to seconds on 2
cores: the bound is the wait for the last push (60 s), never a timing assertion.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import msgspec
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_tape import store
from tests.conftest import running_sdk_agent
from tests.oracles import tape
from tests.oracles.js_sdk import JsAgent, JsUnavailable, ensure_node_modules, workspace
from tests.support.servers import serve_app

pytestmark = pytest.mark.oracle

TASKS = 100
V1 = {"content-type": "application/json", "a2a-version": "1.0"}
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}


def _task_of(body: bytes) -> str | None:
    doc = msgspec.json.decode(body)
    for key in ("statusUpdate", "artifactUpdate"):
        if key in doc:
            return doc[key].get("taskId")
    return (doc.get("task") or {}).get("id")


def _kind(body: bytes) -> str:
    doc = msgspec.json.decode(body)
    kind = next(k for k in ("task", "statusUpdate", "artifactUpdate", "message") if k in doc)
    if kind == "statusUpdate":
        return f"status {doc[kind]['status']['state']}"
    if kind == "task":
        return f"task {doc[kind]['status']['state']}"
    return kind


def _terminal(body: bytes) -> bool:
    doc = msgspec.json.decode(body)
    return (doc.get("statusUpdate") or doc.get("task") or {}).get("status", {}).get("state") in TERMINAL


class Webhooks:
    """The client's webhooks: ``/hook/{n}`` for the n-th send, each POST kept (its n, token header, bytes)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str | None, bytes]] = []
        self.changed = threading.Condition()

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        with self.changed:
            self.got.append((request.path_params["n"], request.headers.get("x-a2a-notification-token"), body))
            self.changed.notify_all()
        return Response(b'{"ok":true}', 200, media_type="application/json")

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook/{n}", self.hook, methods=["POST"])])

    def of(self, n: str) -> list[bytes]:
        with self.changed:
            return [body for m, _, body in self.got if m == n]

    def wait_ended(self, names: list[str], timeout: float = 60) -> None:
        def done() -> bool:
            ended = {m for m, _, body in self.got if _terminal(body)}
            return set(names) <= ended

        with self.changed:
            assert self.changed.wait_for(done, timeout), f"pushes missing: {len(self.got)} got"


async def _send(http: httpx.AsyncClient, url: str, hook: str, n: str) -> str:
    """A streaming send with a webhook of its own (``/hook/{n}``, token ``tok-{n}``), read to its end; its task id."""
    message = {"messageId": f"m-load-{n}", "role": "ROLE_USER", "parts": [{"text": f"load {n}"}]}
    config = {"taskPushNotificationConfig": {"url": f"{hook}/hook/{n}", "token": f"tok-{n}"}}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message, "configuration": config},
    }
    task_id = None
    async with http.stream("POST", url + "/", json=body, headers=V1) as r:
        async for line in r.aiter_lines():
            if line.startswith("data:") and task_id is None:
                result = msgspec.json.decode(line[5:])["result"]
                task_id = result["task"]["id"] if "task" in result else _task_of(msgspec.json.encode(result))
    assert task_id, f"send {n}: no task in the stream"
    return task_id


async def _sends(url: str, hook: str, names: list[str]) -> list[str]:
    limits = httpx.Limits(max_connections=TASKS + 10, max_keepalive_connections=TASKS + 10)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        return list(await asyncio.gather(*(_send(http, url, hook, n) for n in names)))


@contextmanager
def _agent(which: str, tmp: Path) -> Iterator[str]:
    if which == "a2a-sdk":
        with running_sdk_agent(push=True) as agent:
            yield agent.url
        return
    try:
        modules = ensure_node_modules()
    except JsUnavailable as exc:
        pytest.skip(str(exc))
    with JsAgent(workspace(modules, tmp / "js"), "1.0", "--push") as agent:
        yield agent.url


@pytest.mark.parametrize("which", ["a2a-sdk", "js-sdk"])
def test_every_push_of_100_concurrent_tasks_is_recorded_once_under_its_task_in_order(which, tmp_path, oracle_timing):
    import time

    db = tmp_path / "tape.db"
    hooks = Webhooks()
    names = [str(n) for n in range(TASKS)]
    with serve_app(hooks.app()) as hook, _agent(which, tmp_path) as agent:
        with tape.proxy(agent, db, tmp_path / "proxy.stderr") as proxy:
            (alone,) = asyncio.run(_sends(proxy.url, hook, ["alone"]))  # what one task alone is pushed
            hooks.wait_ended(["alone"])
            started = time.monotonic()
            ids = asyncio.run(_sends(proxy.url, hook, names))
            hooks.wait_ended(names)
            took = time.monotonic() - started
        # the proxy stopped (SIGTERM: its in-flight pushes delivered, every row complete)
    baseline = [_kind(b) for b in hooks.of("alone")]
    oracle_timing(f"push load, {which}: {TASKS} tasks x {len(baseline)} pushes through the proxy in {took:.1f} s")
    assert baseline and _terminal(hooks.of("alone")[-1])
    assert len(set(ids)) == TASKS
    st = store.open_store(db, create=False)
    try:
        for n, task_id in zip(names, ids, strict=True):
            got = hooks.of(n)
            # the webhook of this task got its pushes only, with its token, as many as one task alone gets
            assert {_task_of(b) for b in got} == {task_id}, f"send {n}: a push of another task"
            assert {tok for m, tok, _ in hooks.got if m == n} == {f"tok-{n}"}
            assert [_kind(b) for b in got] == baseline, f"send {n}: {[_kind(b) for b in got]} != {baseline}"
            # the log: every push once, under its task, in the order the webhook got them, the bytes it got
            rows = [ex for ex in st.exchanges(task_id) if ex.role == "push"]
            assert [ex.request_body for ex in sorted(rows, key=lambda ex: ex.id or 0)] == got
            assert all(ex.url.endswith(f"/hook/{n}") and ex.status == 200 and ex.outcome == "ok" for ex in rows)
            notes = [ev for ev in st.read_task(task_id) if ev.origin == "local" and b'"action":"push"' in ev.payload]
            assert sorted(ev.exchange_id for ev in notes) == sorted(ex.id for ex in rows)  # each push's place
        pushes = [ex for ex in st.exchanges() if ex.role == "push"]
        assert len(pushes) == (TASKS + 1) * len(baseline)  # none stray: every push row is one of the above
        rounds = sorted(ex.ended_at - ex.started_at for ex in pushes if ex.ended_at is not None)
        oracle_timing(
            f"push load, {which}: a push's round trip through the proxy (recorded, delivered, completed):"
            f" median {rounds[len(rounds) // 2]:.2f} s, max {rounds[-1]:.2f} s"
        )
    finally:
        st.close()
    doctor = subprocess.run(
        [str(tape.tape_script()), "doctor", "--db", str(db), "--json"], capture_output=True, text=True, timeout=120
    )
    found = [f for f in json.loads(doctor.stdout)["findings"] if f["code"].startswith("push-")]
    assert found == [], found[:3]
