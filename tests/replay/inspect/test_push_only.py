"""A task the log knows by its pushes alone (issue 33): listed, shown, folded and examined like any other.

Two such tasks, each recorded for real behind the proxy:

- *only pushes reached the log*: the client streams its task straight from the agent (around the
  proxy) and registers its webhook through the proxy (``CreateTaskPushNotificationConfig``): the
  agent's pushes are all the proxy sees of the task's updates. A real a2a-sdk 1.3.0 agent whose
  task waits on a gate the test opens chunk by chunk (no sleeps), a Starlette webhook;
- *a push for a task the log never saw*: an update POSTed to the webhook registered for another
  task, naming a task id no exchange of the log names. The a2a-sdk agent never sends such a push,
  so the test POSTs it to the hook the real agent was given (a hand-written fault: the proxy, its
  receiver and every command as they run).

Every inspection path reads them through the installed CLI: ``tasks`` (and ``--state``), ``show``,
``channels``, ``doctor TASK``, ``doctor`` over the whole log (its findings kept in the log) and the
UI's task list, on SQLite and on PostgreSQL. Before each push had its note in the log, none of them
knew these tasks. On SQLite each command's first reading is the installed script's (``Log.installed``);
its further readings, and every reading of the PostgreSQL log, run the same command in process.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec
import pytest

from a2a_tape.recorder.proxy.push_configs import PUSH_PATH
from tests.conftest import running_sdk_agent
from tests.recorder.proxy.conftest import running_proxy
from tests.recorder.proxy.test_push import TOKEN, V1, Webhook, _send
from tests.replay.inspect.ui.conftest import start_ui, stop_ui
from tests.support.in_process import run_text_in_process
from tests.support.servers import serve_app

CLI = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "a2a-tape"
GHOST = "ghost-task-never-streamed"


def _cli(*args: object, installed: bool = False) -> subprocess.CompletedProcess[str]:
    """``a2a-tape ARGS`` in this process; ``installed``: by the installed script."""
    if installed:
        r = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=120)
    else:
        r = run_text_in_process([str(a) for a in args], timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    return r


@dataclass
class Log:
    db: Path | str  # a SQLite file, or a PostgreSQL URL
    around: str  # the task streamed around the proxy, its webhook registered through it
    registered: str  # the task that registered the webhook with its send (through the proxy)

    @property
    def installed(self) -> bool:
        """Whether a command's first reading of this log is by the installed script (on SQLite)."""
        return isinstance(self.db, Path)


def _stream_around(agent_url: str, proxy_url: str, hook_url: str, gate: threading.Semaphore, hook: Webhook) -> str:
    """A gated task streamed straight from the agent; its webhook set through the proxy while the
    task waits; then the gate opened for each chunk and the stream read to its end."""
    message = {"messageId": "m-around", "role": "ROLE_USER", "parts": [{"text": "gated around"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}}
    with httpx.stream("POST", agent_url + "/", json=body, headers=V1, timeout=60) as r:
        lines = r.iter_lines()
        first = next(line for line in lines if line.startswith("data:"))
        task_id = msgspec.json.decode(first[5:])["result"]["task"]["id"]
        config = {"taskId": task_id, "id": "cfg-around", "url": hook_url, "token": TOKEN}
        call = {"jsonrpc": "2.0", "id": 2, "method": "CreateTaskPushNotificationConfig", "params": config}
        made = httpx.post(proxy_url + "/", json=call, headers=V1, timeout=30).json()
        assert "result" in made, made
        for _ in range(3):
            gate.release()
        for _ in lines:  # the rest of the stream, straight from the agent: the log never sees it
            pass
    hook.wait_ended({task_id})
    return task_id


def _database(request, tmp_path_factory) -> Path | str:
    """A new SQLite file, or a fresh schema on the session's PostgreSQL server (as a URL)."""
    if request.param == "sqlite":
        return tmp_path_factory.mktemp("push-only") / "tape.db"
    import psycopg

    server = request.getfixturevalue("pg_server")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA push_only")
    return f"{server}?options=-csearch_path%3Dpush_only"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def log(request, tmp_path_factory) -> Iterator[Log]:
    db = _database(request, tmp_path_factory)
    hook = Webhook()
    with serve_app(hook.app()) as url, running_sdk_agent(push=True) as agent, running_proxy(agent.url, db) as p:
        registered = _send(p.url, "hello", url + "/hook")
        hook.wait_ended({registered})
        around = _stream_around(agent.url, p.url, url + "/hook", agent.executor.gate, hook)
        first = next(h for h in p.proxy.push.hooks.all() if h.url == url + "/hook")
        ghost = [
            {"statusUpdate": {"taskId": GHOST, "contextId": "ctx-ghost", "status": {"state": "TASK_STATE_WORKING"}}},
            {
                "task": {
                    "id": GHOST,
                    "contextId": "ctx-ghost",
                    "status": {"state": "TASK_STATE_COMPLETED"},
                    "artifacts": [{"artifactId": "a1", "parts": [{"text": "pushed answer"}]}],
                }
            },
        ]
        for update in ghost:
            r = httpx.post(
                p.url + PUSH_PATH + first.id, json=update, headers={"x-a2a-notification-token": TOKEN}, timeout=30
            )
            assert r.status_code == 200, r.text
    yield Log(db, around, registered)


def _tasks(log: Log, *args: str, installed: bool = False) -> dict[str, dict]:
    r = _cli("tasks", "--db", log.db, "--json", *args, installed=installed)
    assert r.returncode == 0, r.stderr
    return {row["task_id"]: row for row in json.loads(r.stdout)}


def test_tasks_lists_them_with_the_state_pushed(log):
    rows = _tasks(log, installed=log.installed)
    assert {log.around, GHOST, log.registered} <= rows.keys()
    assert rows[GHOST]["state"] == "completed" and rows[GHOST]["context_id"] == "ctx-ghost"
    assert rows[GHOST]["events"] == 2  # a note per push: the place of each in the log
    assert rows[GHOST]["final_answer"] == "pushed answer"  # as channels folds the pushes
    assert rows[log.around]["state"] == "completed"
    assert {GHOST, log.around} <= _tasks(log, "--state", "completed").keys()
    assert GHOST not in _tasks(log, "--state", "working")


@pytest.mark.parametrize("which", ["ghost", "around"])
def test_show_puts_each_push_at_its_place_in_the_log(log, which):
    task = GHOST if which == "ghost" else log.around
    rows = json.loads(_cli("show", task, "--db", log.db, "--json").stdout)
    pushed = [r for r in rows if r["origin"] == "push"]
    assert pushed and all(r["position"] > 0 for r in pushed)
    assert [r["position"] for r in rows] == sorted(r["position"] for r in rows)
    assert not [r for r in rows if r["origin"] == "local" and r["kind"] == "note"]  # each note is its push's row
    human = _cli("show", task, "--db", log.db, installed=log.installed and which == "ghost")
    assert human.returncode == 0 and "PUSH" in human.stdout


def test_channels_folds_the_pushes(log):
    ghost = json.loads(_cli("channels", GHOST, "--db", log.db, "--json", installed=log.installed).stdout)
    assert ghost["state"] == "completed" and ghost["final_answer"] == "pushed answer", ghost
    around = json.loads(_cli("channels", log.around, "--db", log.db, "--json").stdout)
    assert around["state"] == "completed" and around["final_answer"].split() == ["chunk-0", "chunk-1", "chunk-2"]


def test_doctor_examines_them(log):
    ghost = json.loads(_cli("doctor", GHOST, "--db", log.db, "--json", installed=log.installed).stdout)
    codes = {(f["code"], f["level"]) for f in ghost["findings"]}
    assert ("push-only", "warning") in codes and ("push-other-task", "error") in codes, ghost
    around = json.loads(_cli("doctor", log.around, "--db", log.db, "--json").stdout)
    assert not [f for f in around["findings"] if f["level"] == "error"], around
    runs = json.loads(_cli("tasks", "--db", log.db, "--runs", "--json").stdout)  # each run examined alone
    counts = {r["task_id"]: (r["errors"], r["warnings"]) for r in runs}
    for task, doc in ((GHOST, ghost), (log.around, around)):
        levels = [f["level"] for f in doc["findings"]]
        assert counts[task] == (levels.count("error"), levels.count("warning")), (task, counts[task], doc)
    every = _cli("doctor", "--db", log.db, "--json", installed=log.installed)  # the findings kept; no secret
    assert {f["task_id"] for f in json.loads(every.stdout)["findings"]} >= {GHOST}
    assert TOKEN not in every.stdout


def test_the_ui_lists_them(log):
    ui = start_ui(log.db)
    try:
        with httpx.Client(base_url=ui.base, cookies={f"a2a_tape_ui_{ui.port}": ui.token}, timeout=30) as c:
            html = c.get("/").text
            page = c.get(f"/tasks/{GHOST}")
            findings = c.get("/task/findings", params={"task": GHOST})
    finally:
        stop_ui(ui)
    listed = re.findall(r'class="task-row[^"]*"><td class="id">(?:<a href="[^"]*">)?<code[^>]*>([^<]*)</code>', html)
    assert {GHOST, log.around} <= set(listed), listed
    assert "pushed answer" in html  # its answer, folded from its pushes, as tasks lists it
    assert page.status_code == 200 and GHOST in page.text  # its page
    assert findings.status_code == 200 and "push-only" in findings.text  # doctor's finding on it
