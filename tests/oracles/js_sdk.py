"""The official A2A JavaScript SDK (``@a2a-js/sdk``) as an oracle: its agent and its client, driven from Python.

The npm packages are pinned by ``tests/oracles/js/package.json`` + ``package-lock.json`` and installed with
``npm ci`` into the cache (``$A2A_TAPE_CACHE``, else ``$XDG_CACHE_HOME/a2a-tape``, else ``~/.cache/a2a-tape``)
``/js/<hash of the two files>/node_modules``, never into the repository. Each run works in a scratch directory
holding copies of ``agent.mjs`` / ``client.mjs`` and a symlink to that ``node_modules`` (ES modules resolve
packages from the script's own directory; ``NODE_PATH`` does not apply to them).
"""

from __future__ import annotations

import queue
import re
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from tests.oracles.cache import cache_dir, digest, install_once

JS_DIR = Path(__file__).with_name("js")
PINS = ("package.json", "package-lock.json")
SCRIPTS = ("agent.mjs", "client.mjs")
_URL = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


class JsUnavailable(Exception):
    """Node/npm are missing or the install failed; the message says which."""


@dataclass(frozen=True)
class NodeModules:
    path: Path
    seconds: float  # what ``npm ci`` took in this process; 0.0 when it was already in the cache


def ensure_node_modules() -> NodeModules:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        raise JsUnavailable("node and npm are needed for the JavaScript SDK oracle and are not on PATH")
    home = cache_dir() / "js" / digest(*(JS_DIR / name for name in PINS))

    def build(home: Path) -> None:
        for name in PINS:
            shutil.copyfile(JS_DIR / name, home / name)
        cmd = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"]
        try:
            done = subprocess.run(cmd, cwd=home, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise JsUnavailable("npm ci for the JavaScript SDK oracle took more than 600 s") from None
        if done.returncode != 0:
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise JsUnavailable(f"npm ci for the JavaScript SDK oracle failed: {tail}")

    seconds = install_once(home, build)
    return NodeModules(home / "node_modules", seconds)


def workspace(modules: NodeModules, where: Path) -> Path:
    """A directory with the scripts and ``node_modules`` (a symlink into the cache)."""
    where.mkdir(parents=True, exist_ok=True)
    for name in (*SCRIPTS, "package.json"):
        shutil.copyfile(JS_DIR / name, where / name)
    link = where / "node_modules"
    if not link.exists():
        link.symlink_to(modules.path, target_is_directory=True)
    return where


class JsAgent:
    """``node agent.mjs --dialect D`` (and ``extra`` options: ``--push``) in a subprocess; ``url`` read from its
    first stdout line."""

    def __init__(self, ws: Path, dialect: str, *extra: str) -> None:
        self.log = ws / f"agent-{dialect}.stderr"
        with self.log.open("wb") as err:  # a file, not a pipe: nobody has to drain it
            self.proc = subprocess.Popen(
                ["node", "agent.mjs", "--dialect", dialect, *extra],
                cwd=ws,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        first: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        out = self.proc.stdout

        def drain() -> None:  # the first line for us, the rest read away (a full pipe blocks node's console)
            first.put(out.readline())
            for _ in out:
                pass

        threading.Thread(target=drain, daemon=True).start()
        try:
            line = first.get(timeout=30)
        except queue.Empty:
            line = ""
        m = _URL.search(line)
        if not m:
            self.stop()
            said = self.log.read_text(errors="replace")
            raise AssertionError(f"the JS agent did not start: {line!r} {said[-2000:]}")
        self.url = m.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def __enter__(self) -> JsAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class WireCall(msgspec.Struct):
    method: str
    url: str
    status: int
    contentType: str | None  # the name in the client's JSON
    headers: dict[str, str]
    request: str | None
    body: str | None


class ClientRun(msgspec.Struct):
    """What ``client.mjs`` printed: the SDK's parsed view, and every HTTP exchange as it saw the bytes."""

    dialect: str
    events: list[dict[str, Any]]
    task: dict[str, Any]
    wire: list[WireCall]

    def call(self, rpc_methods: tuple[str, ...]) -> WireCall:
        for w in self.wire:
            if w.request and msgspec.json.decode(w.request.encode()).get("method") in rpc_methods:
                return w
        raise AssertionError(f"the client made no {rpc_methods} call: {[w.request for w in self.wire]}")


STREAM_METHODS = ("SendStreamingMessage", "message/stream")
GET_METHODS = ("GetTask", "tasks/get")


def run_client(ws: Path, url: str, dialect: str, text: str) -> ClientRun:
    done = subprocess.run(
        ["node", "client.mjs", url, dialect, text], cwd=ws, capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise AssertionError(f"client.mjs {url} {dialect} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return msgspec.json.decode(done.stdout.encode(), type=ClientRun)


def sse_data(body: str) -> list[bytes]:
    """The ``data`` of every event of an SSE body (an independent, minimal reading of the format)."""
    items: list[bytes] = []
    data: list[str] | None = None
    for line in body.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if data is not None:
                items.append("\n".join(data).encode())
            data = None
        elif line.startswith("data:"):
            value = line[5:]
            (data := data if data is not None else []).append(value[1:] if value.startswith(" ") else value)
    if data is not None:
        items.append("\n".join(data).encode())
    return items


ID_KEYS = frozenset({"id", "contextId", "taskId", "messageId"})


def without_ids(value: Any) -> Any:
    """``value`` with every id field removed, at any depth (two live runs differ only there)."""
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k not in ID_KEYS}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value


TIME_KEYS = frozenset({"timestamp"})


def without(value: Any, keys: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {k: without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [without(v, keys) for v in value]
    return value
