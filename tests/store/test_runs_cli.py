"""Runs (issue 30), through the installed CLI with real agents: two observers of one task (the
proxy, and ``record`` through it) write one log, SQLite or PostgreSQL, each process its own run:
one task, two runs, doctor clean, ``diff TASK@1 TASK@2`` the same stream (the proxy was
transparent). A bad selector is one line, exit 2. A v5 log made by the code before runs upgrades,
each task one run unless its exchanges show a proxy and a client.

The proxy and ``record`` (the two observers) run installed, and on SQLite each reading command once; what
reads the log further (on PostgreSQL, a second run's channels) runs the same command in process
(``installed=False``)."""

from __future__ import annotations

import json
import shlex
import sqlite3

import pytest

from a2a_tape.store import open_store
from a2a_tape.store.records import Exchange, NewEvent
from a2a_tape.store.schema import MIGRATIONS, SCHEMA_VERSION
from tests.docs.harness import BIN, Background, reader_env, run_line
from tests.support.in_process import run_text_in_process, without_our_variables

A2A = BIN / "a2a-tape"
READY = r"http://127\.0\.0\.1:\d+"

pytestmark = pytest.mark.skipif(not A2A.exists(), reason="needs the installed console script")


def _cli(line: str, tmp_path, env, *, installed: bool = True) -> tuple[int, str, str]:
    """``a2a-tape LINE`` (a shell line's words) by the installed script; ``installed=False``: in process."""
    if installed:
        run = run_line(f"{A2A} {line}", tmp_path, env)
    else:
        # HOME only: the CLI makes its console once per process, as wide as $COLUMNS says then (a run here
        # that set it would set it for every later run in this worker)
        run = run_text_in_process(shlex.split(line), tmp_path, {**without_our_variables(), "HOME": env["HOME"]})
    assert "Traceback" not in run.stderr, run.stderr
    return run.returncode, run.stdout, run.stderr


def _proxy_and_client(db: str, agent_url: str, tmp_path) -> tuple[str, dict]:
    env = reader_env(tmp_path)
    proxy = Background(f"{A2A} proxy {agent_url} --listen 127.0.0.1:0 --db '{db}'", tmp_path, env, READY)
    try:
        url = "http://" + proxy.text.split("http://", 1)[1].split()[0].rstrip("/")
        code, out, err = _cli(f"record {url} 'hello there' --db '{db}' --json", tmp_path, env)
        assert code == 0, err
    finally:
        assert proxy.stop() == 0, proxy.text
    return json.loads(out)["task_id"], env


def _check_two_runs(db: str, task_id: str, tmp_path, env, *, installed: bool) -> None:
    """Each reading command through the installed script once if ``installed``; its repeats in process."""
    code, out, err = _cli(f"tasks --db '{db}' --json", tmp_path, env, installed=installed)
    assert code == 0, err
    tasks = json.loads(out)
    assert [(t["task_id"], t["runs"], sorted(t["sources"])) for t in tasks] == [(task_id, 2, ["client", "proxy"])]
    code, out, err = _cli(f"tasks --runs --db '{db}' --json", tmp_path, env, installed=False)
    runs = json.loads(out)
    assert [r["run"] for r in runs] == [f"{task_id}@1", f"{task_id}@2"]
    assert runs[0]["source"] == "proxy"  # the proxy writes each item before it forwards it
    assert {r["state"] for r in runs} == {"completed"} and all(r["faults"] == 0 for r in runs)
    code, out, err = _cli(f"doctor --db '{db}' --json", tmp_path, env, installed=installed)
    assert code == 0 and json.loads(out)["errors"] == 0, out
    code, out, err = _cli(f"diff {task_id}@1 {task_id}@2 --db '{db}'", tmp_path, env, installed=installed)
    assert code == 0 and "same" in out, out + err
    # each run's channels: the one the client was streamed, for both observers
    answers = set()
    for n in (1, 2):
        code, out, err = _cli(
            f"channels {task_id} --run {n} --db '{db}' --json", tmp_path, env, installed=installed and n == 1
        )
        assert code == 0, err
        doc = json.loads(out)
        assert doc["run"] == f"{task_id}@{n}" and doc["runs"] == 2
        answers.add(doc["final_answer"])
    assert len(answers) == 1 and None not in answers


def test_proxy_and_client_into_one_sqlite_log(sdk_agent, tmp_path):
    db = str(tmp_path / "one.db")
    task_id, env = _proxy_and_client(db, sdk_agent.url, tmp_path)
    _check_two_runs(db, task_id, tmp_path, env, installed=True)
    # bad selectors: one line on stderr, exit 2 (the first installed)
    for line in (f"channels {task_id}@9", f"channels {task_id}@x", f"show {task_id}@0", f"doctor {task_id}@3"):
        code, out, err = _cli(f"{line} --db '{db}'", tmp_path, env, installed=line.endswith("@9"))
        assert code == 2 and len(err.strip().splitlines()) == 1, (line, err)
    code, out, err = _cli(f"diff {task_id}@1 {task_id}@7 --db '{db}'", tmp_path, env, installed=False)
    assert code == 2 and "no run 7" in err and len(err.strip().splitlines()) == 1


def test_proxy_and_client_into_one_postgresql_log(sdk_agent, pg_url, tmp_path):
    """Two processes (two hosts of a shared log, as far as the log can tell) on one PostgreSQL log."""
    task_id, env = _proxy_and_client(pg_url, sdk_agent.url, tmp_path)
    _check_two_runs(pg_url, task_id, tmp_path, env, installed=False)


def test_a_v5_log_upgrades_each_task_one_run_unless_a_proxy_and_a_client(tmp_path):
    path = tmp_path / "v5.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:5]:
        migration(conn)
    conn.execute("PRAGMA user_version = 5")
    rows = [(1, "t1", "client"), (2, "t1", "client"), (3, "t2", "proxy"), (4, "t2", "client"), (5, "t2", "recovery")]
    for ex_id, task, role in rows:
        conn.execute(
            "INSERT INTO exchanges (id, started_at, url, http_method, rpc_method, dialect, task_id, role, binding)"
            " VALUES (?, 1, 'http://a/', 'POST', 'message/stream', '0.3', ?, ?, 'jsonrpc')",
            (ex_id, task, role),
        )
    conn.close()

    def status(task: str, state: str) -> bytes:
        update = {"kind": "status-update", "taskId": task, "contextId": "c", "status": {"state": state}, "final": False}
        return json.dumps({"jsonrpc": "2.0", "id": 1, "result": update}).encode()

    with open_store(path) as st:
        assert st._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        for ex_id, task, state in [(1, "t1", "working"), (2, "t1", "completed"), (3, "t2", "working")]:
            st.append(NewEvent(status(task, state), task, ex_id, received_at=1.0))
        st.append(NewEvent(status("t2", "working"), "t2", 4, received_at=1.0))
        st.append(NewEvent(status("t2", "completed"), "t2", 3, received_at=1.0))
        st.append(NewEvent(status("t2", "completed"), "t2", 4, received_at=1.0))
        st.append(NewEvent(status("t2", "completed"), "t2", 5, received_at=1.0))  # recovery: the latest run
        observers = {ex.id: (ex.observer, ex.source) for ex in st.exchanges()}
        new = st.begin_exchange(Exchange(url="http://a/", task_id="t3"))
        assert st.get_exchange(new).observer not in (None, "v5-client")  # a new exchange: this process's
    assert observers == {
        1: ("v5-client", "client"),
        2: ("v5-client", "client"),
        3: ("v5-proxy", "proxy"),
        4: ("v5-client", "client"),
        5: (None, None),
    }
    env = reader_env(tmp_path)
    code, out, err = _cli(f"tasks --runs --db '{path}' --json", tmp_path, env, installed=False)
    assert code == 0, err
    runs = {r["run"]: (r["source"], r["events"], r["state"]) for r in json.loads(out)}
    assert runs == {
        "t1@1": ("client", 2, "completed"),
        "t2@1": ("proxy", 2, "completed"),
        "t2@2": ("client", 3, "completed"),
    }
