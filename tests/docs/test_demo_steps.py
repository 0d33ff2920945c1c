"""``a2a-tape demo`` tells a newcomer what to try next: those lines run as printed, in the order
printed, through the installed CLI, and leave the log as the demo made it (doctor finds no error).

Before: ``serve`` and ``record`` shared ./a2a-tape.db and replay reuses the recorded task id, so
the demo's task grew to 22 events and doctor failed; ``record URL 'hello'`` could not run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess

import httpx
import pytest

from a2a_tape.recorder.listen import LOWEST_PORT, ephemeral_start
from tests.docs.harness import BIN, Background, reader_env, run_line

SCRIPT = BIN / "a2a-tape"
LONG_LIVED = "until Ctrl-C"  # what the demo says of a step that runs until stopped
READY = r"http://127\.0\.0\.1:\d+"
DEMO_ANSWER = (
    "a2a-tape keeps every raw A2A stream event in one SQLite file, exactly as it arrived, "
    "and rebuilds the final answer, reasoning and tool calls from it."
)

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")


def printed_steps(stdout: str) -> list[str]:
    head = "what to try next"
    assert head in stdout, stdout
    return [line.strip() for line in stdout.split(head, 1)[1].splitlines()[1:] if line.strip()]


def doctor_errors(db: str, cwd, env) -> list[dict]:
    run = run_line(f"{SCRIPT} doctor --db {db} --json", cwd, env)
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(run.stdout)
    findings = doc["findings"] if isinstance(doc, dict) else doc
    return [f for f in findings if f.get("level") == "error"]


@pytest.mark.parametrize("started_as", ["a2a-tape", ".venv/bin/a2a-tape"])
def test_the_demo_next_steps_run_as_printed(tmp_path, started_as):
    """Started as ``a2a-tape`` (on PATH), or as ``.venv/bin/a2a-tape`` before the virtual
    environment is activated (README's first command): the steps name the program so."""
    env = reader_env(tmp_path)
    if started_as != "a2a-tape":  # not on PATH: the steps must say where it is
        (tmp_path / ".venv").symlink_to(BIN.parent)
        env["PATH"] = env["PATH"].split(os.pathsep, 1)[1]
    demo = run_line(f"{started_as} demo", tmp_path, env)
    assert demo.returncode == 0, demo.stderr
    steps = printed_steps(demo.stdout)
    words = [shlex.split(step, comments=True) for step in steps]
    assert {w[0] for w in words} == {started_as}
    assert any(w[1] == "doctor" for w in words) and any(w[1] == "ui" for w in words)
    # the port serve is told to listen on is none the kernel hands out by itself meanwhile (another
    # program's server on port 0, a connection's own end): before, it was the kernel's pick, and
    # beside a busy test run serve failed now and then with "Address already in use"
    (serve,) = [w for w in words if w[1] == "serve"]
    port = int(serve[serve.index("--listen") + 1].rsplit(":", 1)[1])
    assert LOWEST_PORT <= port < ephemeral_start(), serve
    running: list[Background] = []
    try:
        for step in steps:
            command = step.split("  #", 1)[0].strip()
            if LONG_LIVED in step:
                bg = Background(command, tmp_path, env, READY)
                running.append(bg)
                url = "http://" + bg.text.split("http://", 1)[1].split()[0]
                page = url if "?token=" in url else url + "/.well-known/agent-card.json"  # the UI, or an agent
                assert httpx.get(page, follow_redirects=True, timeout=30).status_code == 200, step
                continue
            run = run_line(command, tmp_path, env)
            assert run.returncode == 0, f"{step}\n{run.stdout}\n{run.stderr}"
            assert "Traceback" not in run.stderr
    finally:
        codes = {bg.line: bg.stop() for bg in running}
    assert codes and all(code == 0 for code in codes.values()), [bg.text for bg in running]
    # the replay was recorded back into the demo's own log (issue 30): a second run of the task,
    # never a longer first one; doctor exits 0 on the log
    doctor = run_line(f"{started_as} doctor", tmp_path, env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert doctor_errors("a2a-tape.db", tmp_path, env) == []
    tasks = json.loads(run_line(f"{started_as} tasks --json", tmp_path, env).stdout)
    assert [(t["runs"], t["sources"]) for t in tasks] == [
        (2, ["client", "replay"])
    ]  # the second: the replay recorded back
    runs = json.loads(run_line(f"{started_as} tasks --runs --json", tmp_path, env).stdout)
    task_id = tasks[0]["task_id"]
    assert [r["run"] for r in runs] == [f"{task_id}@1", f"{task_id}@2"]
    # the demo's task as the demo recorded it: its stream's 11 events, the note and the agent's
    # answer to the GetTask record asks once after a stream; its answer the demo's
    assert runs[0]["events"] == 13
    first = json.loads(run_line(f"{started_as} channels {task_id}@1 --json", tmp_path, env).stdout)
    assert first["run"] == f"{task_id}@1" and first["runs"] == 2 and first["events"] == 13
    assert first["final_answer"] == DEMO_ANSWER
    # the replay answered GetTask as the agent did, though the client recorded into the log it
    # served: the replay run's stored copy is the demo agent's, not the stream folded twice
    report = json.loads(run_line(f"{started_as} doctor --json", tmp_path, env).stdout)
    assert [f["message"] for f in report["findings"] if f["code"] == "stored-copy-differs"] == []


def test_demo_agent_alone_is_a_loopback_server(tmp_path):
    """``demo --agent-only`` prints its URL, answers programs on this machine and refuses a web
    page's request (the loopback guard); it refuses to listen off loopback (exit 2, one line)."""
    env = reader_env(tmp_path)
    bg = Background("a2a-tape demo --agent-only --listen 127.0.0.1:0", tmp_path, env, READY)
    try:
        url = "http://" + bg.text.split("http://", 1)[1].split()[0]
        assert httpx.get(url + "/.well-known/agent-card.json").json()["name"] == "a2a-tape demo agent"
        rebound = httpx.get(url + "/.well-known/agent-card.json", headers={"Host": "evil.example"})
        assert rebound.status_code == 403
        cross = httpx.post(url + "/", content=b"{}", headers={"Origin": "http://evil.example"})
        assert cross.status_code == 403
        recorded = run_line(f"a2a-tape record {url} hi --db agent.db --json", tmp_path, env)
        assert recorded.returncode == 0, recorded.stderr
        assert json.loads(recorded.stdout)["state"] == "completed"
    finally:
        code = bg.stop()
    assert code == 0, bg.text
    off = subprocess.run(
        [str(SCRIPT), "demo", "--agent-only", "--listen", "192.0.2.1:0"], capture_output=True, text=True, env=env
    )
    assert off.returncode == 2 and "loopback" in off.stderr and "Traceback" not in off.stderr
    assert len(off.stderr.strip().splitlines()) == 1
