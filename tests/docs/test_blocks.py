"""Every shell and Python block of README.md and docs/*.md runs as pasted (tests/docs/blocks.py
says how a block is marked when it cannot, or is a server a reader leaves running in a terminal):
in a directory of its own holding a copy of ``recordings/`` and a ``.venv`` that is this one, the
installed CLI on PATH. A block that needs a server (the demo agent, a replay) starts it itself.

The blocks of one page run in order in one directory (a later block reads what an earlier one
recorded); pages take a lock, since their servers listen on the ports the docs name. Following
the README top to bottom leaves no doctor finding it did not announce (every database it made)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, SHELL, Block, blocks_of, commands, documents, shell_problems
from tests.docs.harness import Background, reader_env
from tests.oracles.cache import locked

VENV = Path(sys.executable).parents[1]
LOCK = Path("/tmp/a2a-tape-doc-blocks.lock")
BLOCK_TIMEOUT = 300  # seconds a block may run


def reader_dir(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "recordings", tmp_path / "recordings")
    (tmp_path / ".venv").symlink_to(VENV)
    return tmp_path


def run_block(block: Block, cwd: Path, env: dict[str, str], n: int) -> str | None:
    """Run one (not background) block; what went wrong, or None."""
    if block.pytest_file:
        target = cwd / block.pytest_file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text)
        argv = [str(VENV / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", block.pytest_file]
    elif block.language == "python":
        script = cwd / f"block_{n}.py"
        script.write_text(block.text)
        argv = [str(VENV / "bin" / "python"), script.name]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", block.text]
    # a session of its own: whatever the block left running (a server it failed to stop) ends with
    # it; its output in files, so a server it left does not hold the test until it ends
    timed_out = False
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as errs:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=errs, text=True, start_new_session=True)
        try:
            proc.wait(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            proc.wait()
        left = _end_group(proc.pid)
        out.seek(0)
        errs.seek(0)
        stdout, stderr = out.read(), errs.read()
    if timed_out or proc.returncode != 0 or "Traceback" in stderr:
        how = f"still running after {BLOCK_TIMEOUT} s (killed)" if timed_out else f"exit {proc.returncode}"
        return f"{block.where}: {how}\n{stdout[-3000:]}\n{stderr[-3000:]}{_logs(cwd)}"
    if left:
        return f"{block.where}: left a process running (a block stops what it starts)"
    return None


def _logs(cwd: Path) -> str:
    """The tails of the logs the page's blocks wrote (a server's ``2> serve.log``): where a block that
    failed or hung says why, in the failure's message (the test's directory does not outlive the run)."""
    return "".join(f"\n--- {log.name}:\n{log.read_text(errors='replace')[-1500:]}" for log in sorted(cwd.glob("*.log")))


def _end_group(pgid: int) -> bool:
    """Kill what is left of a block's process group; whether anything was."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def stop_all(servers: list[Background], where: str) -> list[str]:
    problems = [
        f"{where}: background `{server.line[:80]}` ended {code}: {server.text[-2000:]}"
        for server in servers
        if (code := server.stop()) != 0  # SIGTERM stops every server of ours with exit 0 (recorder/listen.py)
    ]
    servers.clear()
    return problems


def run_page(page: Path, cwd: Path, env: dict[str, str]) -> list[str]:
    problems: list[str] = []
    servers: list[Background] = []
    section = ""
    try:
        for n, block in enumerate(blocks_of(page)):
            if block.section != section:  # a section's servers end with it
                problems += stop_all(servers, f"{page.name} {section!r}")
                section = block.section
            if block.not_run is not None:
                continue
            if block.language in SHELL:
                problems += shell_problems(block)
            if block.background:
                *first, last = commands(block.text)
                script = "\n".join([*first, f"exec {last}"])
                servers.append(Background(script, cwd, env, block.ready or "http://", shell_script=True))
            elif (problem := run_block(block, cwd, env, n)) is not None:
                problems.append(problem)
    finally:
        problems += stop_all(servers, f"{page.name} {section!r}")
    return problems


README = ROOT / "README.md"
DEMO_AGENT = {"artifact-not-closed": 1, "answer-shown-twice": 1}  # the demo agent's two warnings, on purpose
ANNOUNCED = {
    # database the README makes -> doctor's findings the README says it holds (code: how many)
    "agent.db": DEMO_AGENT,
    "probe.db": {**DEMO_AGENT, "closed-while-working": 2},  # the streams the probe cut on purpose
    "push.db": DEMO_AGENT,  # the demo agent's task with its pushes
    "push-replay.db": DEMO_AGENT,  # and its replay, pushes included
    "dropped.db": {"closed-while-working": 1},  # the stream the Recover block's replay drops on purpose
}
"""What the README announces doctor finds in what it recorded; every other database: nothing."""


@pytest.mark.parametrize("page", [p for p in documents() if p != README], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_runs_as_pasted(page, tmp_path):
    if not any(b.not_run is None for b in blocks_of(page)):
        pytest.skip(f"{page.name}: no block to run")
    cwd = reader_dir(tmp_path)
    with locked(LOCK):  # the docs' fixed ports (9999, 8080, 8765, ...): one page at a time on this machine
        problems = run_page(page, cwd, reader_env(tmp_path / "home"))
    assert not problems, "\n\n".join(problems)


def test_the_readme_top_to_bottom_leaves_only_the_findings_it_announces(tmp_path):
    """Every README block, in order, in one directory as a newcomer follows it; then doctor on
    every database it made: exit 0, and exactly the findings the README announces. Before: two
    blocks recorded one replay into rest.db, and the proxy + probe block left doctor's error
    (events-after-terminal) in agent.db; blocks needed servers named only in HTML comments."""
    cwd = reader_dir(tmp_path)
    env = reader_env(tmp_path / "home")
    with locked(LOCK):
        problems = run_page(README, cwd, env)
    assert not problems, "\n\n".join(problems)
    made = sorted(p.name for p in cwd.glob("*.db"))
    assert set(ANNOUNCED) <= set(made), made
    found = {}
    for name in made:
        run = subprocess.run(
            [str(VENV / "bin" / "a2a-tape"), "doctor", "--db", name, "--json"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        doc = json.loads(run.stdout)
        codes = [f["code"] for f in doc["findings"]]
        found[name] = (run.returncode, {c: codes.count(c) for c in codes})
    assert found == {name: (0, ANNOUNCED.get(name, {})) for name in made}
    text = README.read_text()
    assert all(f"`{code}`" in text for codes in ANNOUNCED.values() for code in codes)


def test_no_block_needs_a_server_named_only_in_a_comment():
    """The ``with `COMMAND``` marker is gone: a block starts the server it needs (issue 37 item 1)."""
    withs = [b.where for p in documents() for b in blocks_of(p) if b.marker and b.marker.startswith("with ")]
    assert not withs


def test_every_block_is_run_or_says_why_not():
    """A marker is one of the known kinds: a typo would silently run (or skip) a block."""
    known = ("not run:", "background", "pytest file:")
    odd = [b.where for p in documents() for b in blocks_of(p) if b.marker and not b.marker.startswith(known)]
    assert not odd
    reasons = [b.where for p in documents() for b in blocks_of(p) if b.not_run == ""]
    assert not reasons, "a block marked not run says why"
