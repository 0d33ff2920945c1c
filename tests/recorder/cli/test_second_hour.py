"""Issue 37 item 8, the smaller things a newcomer meets in the second hour, each through the
installed ``a2a-tape`` against real agents on 127.0.0.1: an httpx outside our bounds is one line,
``show`` keeps a chunk's edge spaces, doctor does not call the user's own Ctrl-C an error,
``import`` takes several files and says truthfully what it added, ``-h`` is ``--help``, the
commands are listed in a newcomer's order, ``--state`` names the states, counts are spelled alike.
(The README's files being git-ignored: tests/docs/test_ignored.py.) What only prepares a test or reads its
log, and a check's further cases, run the same command in process (``installed=False``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from a2a_tape import store
from a2a_tape.store import NewEvent
from tests.conftest import running_sdk_agent
from tests.support.in_process import run_text_in_process

SCRIPT = Path(sys.executable).with_name("a2a-tape")
RECORDINGS = Path(__file__).resolve().parents[3] / "recordings"


def cli(
    *args: object, env: dict[str, str] | None = None, timeout: float = 120, installed: bool = True
) -> subprocess.CompletedProcess[str]:
    """``a2a-tape ARGS`` by the installed script; ``installed=False``: the same command in this process
    (``env`` is then only the variables it sets)."""
    if not installed:
        return run_text_in_process([str(a) for a in args], env=env, timeout=timeout)
    return subprocess.run(
        [str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def one_line(run: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert run.returncode == code, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_an_httpx_outside_the_bound_is_one_line_naming_it(tmp_path):
    """httpx 1.0's pre-releases drop httpx.AsyncBaseTransport and friends: a command that needs
    them says so in one line (exit 2); the error handler itself never needs httpx."""
    fake = tmp_path / "site"
    (fake / "httpx").mkdir(parents=True)
    (fake / "httpx" / "__init__.py").write_text('__version__ = "1.0.dev6"\n')  # what 1.0 lacks, it lacks
    (fake / "httpx-1.0.dev6.dist-info").mkdir()
    (fake / "httpx-1.0.dev6.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: httpx\nVersion: 1.0.dev6\n"
    )
    env = {**os.environ, "PYTHONPATH": str(fake)}
    db = tmp_path / "log.db"
    for args in (
        ["record", "http://127.0.0.1:9/", "hi", "--db", db],
        # serve loads httpx only to forward (a plain replay starts without it, and would serve here)
        [
            "serve",
            "--db",
            RECORDINGS / "sdk-v10-stream.jsonl",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9",
        ],
        ["proxy", "http://127.0.0.1:9/", "--db", db, "--listen", "127.0.0.1:0"],
        ["demo", "--db", db],
    ):
        line = one_line(cli(*args, env=env))
        assert line.startswith("a2a-tape: error: httpx 1.0.dev6 is installed"), line
        assert "pip install 'httpx<1'" in line, line
    # a command's own error, reported by a handler that used to import httpx for it
    missing = one_line(cli("tasks", "--db", tmp_path / "none.db", env=env))
    assert missing == f"a2a-tape: error: no database at {tmp_path / 'none.db'} (record something first, or pass --db)"
    # what needs no httpx still works
    assert cli("import", RECORDINGS / "sdk-v10-stream.jsonl", "--db", db, env=env).returncode == 0
    assert cli("doctor", "--db", db, env=env).returncode == 0


def test_show_keeps_the_spaces_at_a_chunks_edges(tmp_path):
    db = tmp_path / "log.db"
    with running_sdk_agent() as agent:
        rec = cli("record", agent.url, "spaced words", "--db", db, "--json", installed=False)
    assert rec.returncode == 0, rec.stderr
    task = json.loads(rec.stdout)["task_id"]
    shown = cli("show", task, "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "' chunk-1'" in shown.stdout and "' chunk-2'" in shown.stdout, shown.stdout


def _wait_for_events(db: Path, n: int) -> None:
    """Until the log holds ``n`` events (the store's own wait, not a sleep)."""
    with store.open_store(db, create=True) as st:
        deadline = time.monotonic() + 30
        while st.count_events() < n:
            assert time.monotonic() < deadline, "the recorder never stored the first events"
            st.wait_for_events(st.last_position(), timeout=1)


def test_doctor_calls_the_users_ctrl_c_a_warning(fault_agent, tmp_path):
    """``record`` stopped by the user mid-stream notes it (LOCAL); doctor then warns that the user
    stopped the recording, and exits 0: the agent did nothing wrong."""
    db = tmp_path / "log.db"
    host = fault_agent.hosts["stall"]
    proc = subprocess.Popen(
        [str(SCRIPT), "record", fault_agent.url("stall"), "go", "--db", str(db), "--stall-timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert host.stream_started.wait(30)
        _wait_for_events(db, 3)  # submitted, working, chunk-0: the stream then only keeps alive
        proc.send_signal(signal.SIGINT)
        _, errs = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, errs
    doctor = cli("doctor", "--db", db, "--json", installed=False)
    assert doctor.returncode == 0, doctor.stdout
    report = json.loads(doctor.stdout)
    closed = [f for f in report["findings"] if f["code"] == "closed-while-working"]
    assert len(closed) == 1 and closed[0]["level"] == "warning", report
    assert "the user stopped the recording (Ctrl-C" in closed[0]["message"], closed[0]
    assert report["errors"] == 0
    human = cli("doctor", "--db", db)
    assert human.returncode == 0 and "0 errors" in human.stdout, human.stdout


def test_import_takes_several_files_and_a_reimport_says_what_it_did(tmp_path):
    db = tmp_path / "log.db"
    tapes = [RECORDINGS / "sdk-v10-stream.jsonl", RECORDINGS / "sdk-v03-stream.jsonl"]
    first = cli("import", *tapes, "--db", db)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.strip().splitlines()
    assert lines == [
        f"{tapes[0]}: imported 6 events, 1 exchange, 1 task",
        f"{tapes[1]}: imported 6 events, 1 exchange, 1 task",
        "in all: imported 12 events, 2 exchanges, 2 tasks",
    ], lines
    again = cli("import", tapes[0], "--db", db, installed=False)
    assert one_line(again, 0) == (
        "imported 0 new events, 0 new exchanges, 0 new tasks; already in the log: 6 events, 1 exchange, 1 task"
    )
    doc = json.loads(cli("import", *tapes, "--db", db, "--json", installed=False).stdout)
    assert (doc["events"], doc["skipped"], doc["exchanges"], doc["exchanges_present"]) == (0, 12, 0, 2), doc
    assert doc["tasks_present"] == doc["task_ids"] and len(doc["task_ids"]) == 2
    # a bad line in any file: nothing of any file is imported, and the line names the file
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    fresh = tmp_path / "fresh.db"
    cli("import", RECORDINGS / "sdk-boom.jsonl", "--db", fresh, installed=False)
    before = json.loads(cli("tasks", "--db", fresh, "--json", installed=False).stdout)
    refused = one_line(cli("import", RECORDINGS / "sdk-input-required.jsonl", bad, "--db", fresh))
    assert refused.startswith(f"a2a-tape: error: {bad}: line 1:") and "nothing imported" in refused, refused
    assert json.loads(cli("tasks", "--db", fresh, "--json", installed=False).stdout) == before


def test_dash_h_is_help_everywhere():
    top = cli("-h")
    assert top.returncode == 0 and top.stdout == cli("--help").stdout
    for command in ("demo", "record", "tasks", "import", "serve"):  # in process: the top's pair is installed
        short = cli(command, "-h", installed=False)
        assert short.returncode == 0, short.stderr
        assert short.stdout == cli(command, "--help", installed=False).stdout
        assert "-h, --help" in short.stdout


def test_the_command_list_is_in_a_newcomers_order():
    shown = cli("--help", installed=False).stdout.split("Commands:", 1)[1]
    names = [line.split()[0] for line in shown.splitlines() if line.startswith("  ") and line.split()]
    assert names[:5] == ["demo", "record", "proxy", "serve", "verify"], names  # the jobs, then what to look at
    inspection = {"tasks", "show", "channels", "doctor", "diff", "grep", "ui"}
    moving = {"import", "export", "copy"}
    assert set(names[5 : 5 + len(inspection)]) == inspection, names
    assert max(names.index(n) for n in inspection) < min(names.index(n) for n in moving), names
    assert names[-5:] == ["import", "export", "copy", "rm", "prune"], names  # moving recordings, then removing


def test_an_unknown_state_names_the_states(tmp_path):
    db = tmp_path / "log.db"
    cli("import", RECORDINGS / "sdk-v10-stream.jsonl", "--db", db, installed=False)
    line = one_line(cli("tasks", "--state", "done", "--db", db))
    assert "unknown task state 'done'" in line
    for state in ("submitted", "working", "input-required", "completed", "failed", "canceled", "rejected"):
        assert state in line, line


def test_how_many_more_is_spelled_as_the_total(tmp_path):
    db = tmp_path / "log.db"
    enc = msgspec.json.Encoder()
    with store.open_store(db, create=True) as st:
        st.append_batch(
            [
                NewEvent(
                    payload=enc.encode(
                        {
                            "result": {
                                "task": {"id": f"t{i}", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}
                            }
                        }
                    ),
                    task_id=f"t{i}",
                    received_at=1000.0 + i,
                )
                for i in range(1001)
            ]
        )
    run = cli("tasks", "--limit", "1", "--db", db)
    assert run.returncode == 0, run.stderr
    assert "1,000 more tasks not shown (newest 1 of 1,001)" in run.stderr, run.stderr
