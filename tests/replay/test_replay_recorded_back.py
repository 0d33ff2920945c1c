"""A replay recorded back is a run of source ``replay`` (issue 30, item 5), on every recording path
that can talk to ``serve``: ``record``, the proxy in front of serve (and ``record`` through it),
``RecordingTransport``, the gRPC interceptor and the gRPC proxy in front of ``serve --grpc-listen``.
``serve`` marks its answers (``store.observers.REPLAY_MARKER``: a header, on gRPC initial metadata)
and the capture core reads it when it stamps the row's source. Through the installed CLI with a
real ``serve`` recording into the log it serves from: the served run stays as it was, each path's
run says ``replay`` in ``tasks --json`` and ``tasks --runs``.

A hostile agent that sends the marker only relabels its run: events, channels, doctor and what
``serve`` replays from that log are those of the same agent without the marker.

``serve`` and the proxy run installed, and so do the ``record`` path's ``record`` and its two ``tasks``
listings; what prepares a log (``import``), records as a client of what is tested, or reads a log on the
other paths runs the same command in process (``installed=False``)."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from a2a_tape import RecordingTransport
from a2a_tape.store.observers import REPLAY_MARKER
from tests.conftest import running_sdk_agent
from tests.docs.harness import BIN, Background, reader_env, run_line
from tests.support.in_process import run_text_in_process, without_our_variables

A2A = BIN / "a2a-tape"
TAPE = Path(__file__).parents[2] / "recordings" / "sdk-v10-stream.jsonl"  # one task: 'hello', 6 events
URL = r"http://127\.0\.0\.1:\d+"
GRPC = r"gRPC on (127\.0\.0\.1:\d+)"

pytestmark = pytest.mark.skipif(not A2A.exists(), reason="needs the installed console script")


@dataclass
class Served:
    """``a2a-tape serve --grpc-listen`` over ``db``, which the paths record into as well."""

    db: Path
    url: str
    target: str  # its gRPC side, HOST:PORT
    cwd: Path
    env: dict[str, str]

    def cli(self, line: str, *, installed: bool = False) -> str:
        return _cli(line, self.cwd, self.env, installed=installed).stdout


def _cli(line: str, cwd: Path, env: dict[str, str], *, installed: bool) -> subprocess.CompletedProcess[str]:
    """``a2a-tape LINE`` (a shell line's words) in process, or by the installed script; exit 0 and no traceback."""
    if installed:
        run = run_line(f"{A2A} {line}", cwd, env)
    else:
        # HOME only: the CLI makes its console once per process, as wide as $COLUMNS says then (a run here
        # that set it would set it for every later run in this worker)
        run = run_text_in_process(shlex.split(line), cwd, {**without_our_variables(), "HOME": env["HOME"]})
    assert run.returncode == 0 and "Traceback" not in run.stderr, f"{line}\n{run.stdout}\n{run.stderr}"
    return run


def _proxy(served: Served, *, grpc: bool) -> Background:
    line = f"{A2A} proxy {served.url} --listen 127.0.0.1:0 --db '{served.db}' --no-recover"
    ready = URL
    if grpc:
        line += " --grpc-listen 127.0.0.1:0"
        ready = GRPC
    return Background(line, served.cwd, served.env, ready)


def by_record(served: Served) -> list[str]:
    served.cli(f"record {served.url} hello --db '{served.db}'", installed=True)
    return ["replay"]


def by_proxy(served: Served) -> list[str]:
    """The proxy in front of serve, and ``record`` through the proxy: two observers, both of a replay
    (the proxy passes serve's answer on as it came, marker included)."""
    proxy = _proxy(served, grpc=False)
    try:
        url = re.search(URL, proxy.text).group(0)  # type: ignore[union-attr]
        served.cli(f"record {url} hello --db '{served.db}'")
    finally:
        assert proxy.stop() == 0, proxy.text
    return ["replay", "replay"]


def by_transport(served: Served) -> list[str]:
    from a2a.client import ClientConfig, create_client
    from a2a.types import Message, Part, Role, SendMessageRequest

    async def main() -> None:
        transport = RecordingTransport(served.db)
        try:
            async with httpx.AsyncClient(transport=transport) as http:
                client = await create_client(served.url, ClientConfig(httpx_client=http))
                message = Message(message_id="m-t", role=Role.ROLE_USER, parts=[Part(text="hello")])
                assert [ev async for ev in client.send_message(SendMessageRequest(message=message))]
        finally:
            transport.close()

    asyncio.run(main())
    return ["replay"]


def by_interceptor(served: Served) -> list[str]:
    from a2a_tape import RecordingInterceptor
    from tests.grpc.clients import sdk_send

    recording = RecordingInterceptor(served.db)
    try:
        assert sdk_send(served.url, "hello", interceptors=recording.interceptors(served.target))
    finally:
        recording.close()
    return ["replay"]


def by_grpc_proxy(served: Served) -> list[str]:
    from tests.grpc.clients import sdk_send

    proxy = _proxy(served, grpc=True)
    try:
        url = re.search(URL, proxy.text).group(0)  # type: ignore[union-attr]
        assert sdk_send(url, "hello")  # a gRPC client that records nothing itself
    finally:
        assert proxy.stop() == 0, proxy.text
    return ["replay"]


PATHS: dict[str, Callable[[Served], list[str]]] = {
    "record": by_record,
    "proxy": by_proxy,
    "transport": by_transport,
    "interceptor": by_interceptor,
    "grpc-proxy": by_grpc_proxy,
}


@pytest.mark.parametrize("path", PATHS)
def test_a_replay_recorded_back_is_a_run_of_source_replay_on_every_path(path, tmp_path):
    env = reader_env(tmp_path)
    db = tmp_path / "served.db"
    _cli(f"import {TAPE} --db '{db}'", tmp_path, env, installed=False)
    serve = Background(f"{A2A} serve --db '{db}' --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0", tmp_path, env, GRPC)
    try:
        url = re.search(URL, serve.text).group(0)  # type: ignore[union-attr]
        target = re.search(GRPC, serve.text).group(1)  # type: ignore[union-attr]
        served = Served(db, url, target, tmp_path, env)
        (before,) = json.loads(served.cli(f"tasks --runs --db '{db}' --json"))
        added = PATHS[path](served)
    finally:
        assert serve.stop() == 0, serve.text
    (task,) = json.loads(served.cli(f"tasks --db '{db}' --json", installed=path == "record"))
    assert task["sources"] == ["import", *added]
    runs = json.loads(served.cli(f"tasks --runs --db '{db}' --json", installed=path == "record"))
    assert [r["source"] for r in runs] == ["import", *added]
    # the run served is as it was: the replay recorded back never grew it
    assert runs[0] == before
    assert all(r["state"] == "completed" and r["final_answer"] == before["final_answer"] for r in runs)


class Marking:
    """An agent that claims to be a replay: serve's marker on every answer it sends."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        async def marked(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (REPLAY_MARKER.encode(), b"1")]}
            await send(message)

        return await self.app(scope, receive, marked if scope["type"] == "http" else send)


def _seen(db: Path, cwd: Path, env: dict[str, str]) -> dict[str, object]:
    """What the CLI says of the one task in ``db``, its ids, times, host and agent's port left out."""

    def cli(line: str) -> object:
        return json.loads(_cli(f"{line} --db '{db}' --json", cwd, env, installed=False).stdout)

    (task,) = cli("tasks")
    text = json.dumps(
        {
            "task": task,
            "runs": cli("tasks --runs"),
            "channels": cli(f"channels {task['task_id']}"),
            "doctor": cli("doctor"),
            "events": [
                {k: v for k, v in e.items() if k in ("kind", "origin", "payload", "binding", "version")}
                for e in cli(f"show {task['task_id']}")
            ],
        }
    )
    for name in ("task_id", "context_id"):
        text = text.replace(task[name], name.upper())
    doc = json.loads(text)
    for row in [doc["task"], *doc["runs"], doc["channels"]]:
        for key in ("first_at", "last_at", "host", "observer", "upstream"):  # upstream: the agent's port
            row.pop(key, None)
    return doc


def test_an_agent_sending_the_marker_only_relabels_its_run(tmp_path):
    env = reader_env(tmp_path)
    seen: dict[str, dict[str, object]] = {}
    for name, wrap in (("plain", None), ("hostile", Marking)):
        db = tmp_path / f"{name}.db"
        with running_sdk_agent(wrap=wrap) as agent:
            _cli(f"record {agent.url} hello --db '{db}' --json", tmp_path, env, installed=False)
        seen[name] = _seen(db, tmp_path, env)
    plain, hostile = seen["plain"], seen["hostile"]
    assert plain["task"]["sources"] == ["client"] and hostile["task"]["sources"] == ["replay"]  # type: ignore[index]
    assert [r["source"] for r in hostile["runs"]] == ["replay"]  # type: ignore[attr-defined]
    for doc in (plain, hostile):
        doc["task"]["sources"] = doc["runs"][0]["source"] = None  # type: ignore[index]
    assert hostile == plain  # the label, nothing else
    # serve replays a run labelled replay as it replays any first run: the agent's answer
    db = tmp_path / "hostile.db"
    served = tmp_path / "served.db"
    shutil.copy(db, served)
    serve = Background(f"{A2A} serve --db '{served}' --listen 127.0.0.1:0", tmp_path, env, URL)
    try:
        url = re.search(URL, serve.text).group(0)  # type: ignore[union-attr]
        again = _cli(f"record {url} hello --db '{tmp_path / 'again.db'}' --json", tmp_path, env, installed=False)
    finally:
        assert serve.stop() == 0, serve.text
    assert json.loads(again.stdout)["final_answer"] == hostile["channels"]["final_answer"]  # type: ignore[index]
