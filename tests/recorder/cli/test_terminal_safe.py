"""Nothing of a recording acts on the terminal (issue 23 item 7), through the installed CLI.

A hostile recording carries, in every field a command prints for people (the task id, the context,
status messages, the answer, reasoning, an artifact's id and name, a tool call's name, input and
output), the clipboard write ``ESC ] 52``, the screen clear ``ESC [ 2J``, a right-to-left override
``U+202E`` and the one-byte C1 ``CSI`` ``\\x9b``. Every human output shows them as their escapes
(``\\x1b``, ``\\u202e``, ``\\x9b``); ``--json`` and ``--raw`` keep them exactly. Output is captured (no
terminal), so rich styles nothing: any ESC on stdout or stderr came from the recording.

Each command's human output, markup left unread, an error line, ``--json``, ``--raw``, ``record`` and the
servers' banners go through the installed script once; a command's further cases run in process
(``installed=False``), where the same code prints the same text.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, Part, Task, TaskState, TaskStatus
from starlette.applications import Starlette

from a2a_tape import store
from a2a_tape.store import Exchange, NewEvent
from tests.support.servers import closed_port, serve_app

from .test_contract import SCRIPT, a2a_tape

OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # write "pwned" to the clipboard
CLEAR = "\x1b[2J"
RLO = "\u202e"
CSI = "\x9b31m"  # C1 CSI: red, in one byte
HOSTILE = OSC52 + CLEAR + RLO + CSI
ACTING = ("\x1b", "\x9b", "\u202e", "\x07")
SHOWN = ("\\x1b", "\\u202e", "\\x9b")

MARKUP = "[link=https://evil.example/]click[/link] :warning:"  # rich markup and an emoji code: text, never read
TASK = "t-" + HOSTILE  # selected by its prefix "t-"
OTHER = "t2-" + HOSTILE

_enc = msgspec.json.Encoder()


def _rpc(result: dict[str, Any]) -> bytes:
    return _enc.encode({"jsonrpc": "2.0", "id": 1, "result": result})


def _message(text: str) -> dict[str, Any]:
    return {"kind": "message", "role": "agent", "messageId": "m-" + text, "parts": [{"kind": "text", "text": text}]}


def _status(task: str, state: str, text: str) -> bytes:
    status = {"state": state, "message": _message(text)}
    return _rpc({"kind": "status-update", "taskId": task, "contextId": "c-" + HOSTILE, "status": status})


def _artifact(task: str, aid: str, part: dict[str, Any], **extra: Any) -> bytes:
    artifact = {"artifactId": aid, "name": "n-" + HOSTILE, "parts": [part]}
    return _rpc({"kind": "artifact-update", "taskId": task, "contextId": "c-" + HOSTILE, "artifact": artifact, **extra})


def _payloads(task: str, answer: str) -> list[bytes]:
    tool = {"call_id": "call-" + HOSTILE, "tool": "tool-" + HOSTILE, "status": "completed"}
    return [
        _rpc({"kind": "task", "id": task, "contextId": "c-" + HOSTILE, "status": {"state": "submitted"}}),
        _status(task, "working", "working " + HOSTILE),
        _artifact(task, f"{task}:stream:reasoning", {"kind": "text", "text": "thinking " + HOSTILE}),
        _artifact(
            task,
            f"{task}:stream:tool:p1",
            {"kind": "data", "data": {**tool, "input": {"q": HOSTILE}, "output": "out " + HOSTILE}},
        ),
        _artifact(task, f"{task}:stream:text", {"kind": "text", "text": answer}),
        _artifact(task, "extra-" + HOSTILE, {"kind": "text", "text": "extra " + HOSTILE}),
        _status(task, "completed", "done " + HOSTILE),
        _artifact(task, "late-" + HOSTILE, {"kind": "text", "text": "after the end " + HOSTILE}),  # a doctor finding
    ]


def make_hostile_log(path: Path) -> None:
    with store.open_store(path) as st:
        for i, (task, answer) in enumerate(((TASK, "answer " + HOSTILE + MARKUP), (OTHER, "other answer " + HOSTILE))):
            ex = st.begin_exchange(Exchange(started_at=100.0 + i, url="http://agent/", task_id=task))
            st.append_batch(
                [
                    NewEvent(payload=p, task_id=task, exchange_id=ex, received_at=100.0 + i + n / 10)
                    for n, p in enumerate(_payloads(task, answer))
                ]
            )


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "log.db"
    make_hostile_log(path)
    return path


def _human_env() -> dict[str, str]:
    # wide enough for every optional column (tasks shows the answer from 140 columns), never a terminal
    return {"COLUMNS": "160", "FORCE_COLOR": "", "TTY_COMPATIBLE": "", "TTY_INTERACTIVE": ""}


def assert_nothing_acts(text: str, where: str) -> None:
    found = [c for c in ACTING if c in text]
    assert not found, f"{where} holds {found!r}: {text!r}"


HUMAN_COMMANDS = {  # a command's first row runs installed (:func:`installed_once`)
    "tasks": ["tasks"],
    "tasks-all": ["tasks", "--all"],
    "show": ["show", "t-"],
    "show-follow": ["show", "t-", "--follow"],
    "channels": ["channels", "t-", "--reasoning", "--ignored"],
    "grep": ["grep", "answer"],
    "doctor": ["doctor"],
    "doctor-task": ["doctor", "t-"],
    "diff": ["diff", "t-", "t2-"],
}


def installed_once(argv: list[str]) -> bool:
    """Whether ``argv`` is its command's first row in HUMAN_COMMANDS (run by the installed script)."""
    return next(row for row in HUMAN_COMMANDS.values() if row[0] == argv[0]) is argv


@pytest.mark.parametrize("argv", HUMAN_COMMANDS.values(), ids=HUMAN_COMMANDS.keys())
def test_every_human_output_shows_controls_as_escapes(hostile, tmp_path, argv):
    installed = installed_once(argv)
    env = _human_env()
    if not installed:  # the CLI makes its console once per process, as wide as $COLUMNS says then: a run
        del env["COLUMNS"]  # here that set it would set it for every later run in this worker
    r = a2a_tape(*argv, "--db", hostile, cwd=tmp_path, env=env, installed=installed)
    assert r.code in (0, 1), r.stderr
    out = r.stdout.decode("utf-8")
    assert_nothing_acts(out, "stdout")
    assert_nothing_acts(r.stderr, "stderr")
    assert any(s in out for s in SHOWN), out  # shown, not dropped


@pytest.mark.parametrize("argv", [["grep", "answer"], ["show", "t-"], ["channels", "t-"]], ids=str)
def test_recorded_text_is_never_read_as_markup(hostile, tmp_path, argv):
    r = a2a_tape(*argv, "--db", hostile, cwd=tmp_path, env={**_human_env(), "COLUMNS": "1000"})  # nothing wraps
    assert r.code == 0, r.stderr
    assert "[link=https://" in r.stdout.decode("utf-8")  # grep and show cut the text after it


def test_an_error_line_naming_recorded_ids_shows_them_as_escapes(hostile, tmp_path):
    # "t" starts both recorded ids: the ambiguity names them on stderr
    r = a2a_tape("show", "t", "--db", hostile, cwd=tmp_path, env=_human_env())
    assert r.code == 2
    assert_nothing_acts(r.stderr, "stderr")


JSON_COMMANDS = [["channels", "t-", "--json"], ["show", "t-", "--json"], ["tasks", "--json"]]


@pytest.mark.parametrize("argv", JSON_COMMANDS)
def test_json_keeps_the_recording_exact(hostile, tmp_path, argv):
    r = a2a_tape(*argv, "--db", hostile, cwd=tmp_path, installed=argv is JSON_COMMANDS[0])
    assert r.code == 0, r.stderr
    assert TASK in msgspec.json.decode(r.stdout).__repr__() or TASK.encode() in r.stdout or b"\\u001b" in r.stdout
    assert RLO.encode() in r.stdout  # not turned into its escape


def test_raw_keeps_the_recording_exact(hostile, tmp_path):
    r = a2a_tape("show", "t-", "--raw", "--db", hostile, cwd=tmp_path)
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines() == _payloads(TASK, "answer " + HOSTILE + MARKUP)


# -- record: a real a2a-sdk agent whose text is hostile --------------------------------------------


class HostileAgent(AgentExecutor):
    """A real a2a-sdk 1.3.0 agent answering with terminal escapes in its status and its answer."""

    async def execute(self, ctx: RequestContext, q: EventQueue) -> None:
        await q.enqueue_event(
            Task(
                id=ctx.task_id,
                context_id=ctx.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[ctx.message],
            )
        )
        up = TaskUpdater(q, ctx.task_id, ctx.context_id)
        await up.start_work(up.new_agent_message([Part(text="working " + HOSTILE)]))
        await up.add_artifact([Part(text="answer " + HOSTILE)], artifact_id="art-1", name="n-" + HOSTILE)
        await up.complete(up.new_agent_message([Part(text="done " + HOSTILE)]))

    async def cancel(self, ctx: RequestContext, q: EventQueue) -> None:  # pragma: no cover - never cancelled
        await TaskUpdater(q, ctx.task_id, ctx.context_id).cancel()


@contextlib.contextmanager
def hostile_agent() -> Iterator[str]:
    port = closed_port()  # nothing listens there; bound later by the server
    url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="hostile-" + HOSTILE,
        description="answers with terminal escapes",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url + "/")],
    )
    handler = DefaultRequestHandler(agent_executor=HostileAgent(), task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/"))
    with serve_app(app, port=port):
        yield url


def test_record_shows_the_agents_escapes_as_text(tmp_path):
    with hostile_agent() as url:
        r = a2a_tape("record", url, "hello", "--db", tmp_path / "rec.db", cwd=tmp_path, env=_human_env())
    assert r.code == 0, r.stderr
    out = r.stdout.decode("utf-8")
    assert_nothing_acts(out, "stdout")
    assert_nothing_acts(r.stderr, "stderr")
    assert "\\x1b" in out


# -- serve and proxy: their banner names the log -----------------------------------------------------


@pytest.mark.parametrize("server", ["serve", "proxy"])
def test_a_servers_banner_shows_escapes_as_text(hostile, tmp_path, server):
    db = tmp_path / ("log-" + HOSTILE.replace("/", "") + ".db")
    db.write_bytes(hostile.read_bytes())
    # the proxy in front of a closed port (nothing is sent before a client asks); serve recording for
    # one (the hostile log holds no recorded sends to replay)
    extra = {
        "proxy": ["http://127.0.0.1:9", "--no-recover"],
        "serve": ["--record-mode", "once", "--upstream", "http://127.0.0.1:9"],
    }[server]
    argv = [str(SCRIPT), server, *extra, "--listen", "127.0.0.1:0", "--db", str(db)]
    env = {**os.environ, **_human_env()}
    with subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            banner = proc.stderr.readline().decode("utf-8")  # type: ignore[union-attr]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    assert f"a2a-tape {server}" in banner, banner
    assert_nothing_acts(banner, "the banner")
    assert "\\x1b" in banner
