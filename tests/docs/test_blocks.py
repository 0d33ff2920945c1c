"""Every shell and Python block of README.md and docs/*.md runs as pasted (tests/docs/blocks.py
says how a block is marked when it cannot, or needs a server beside it): in a directory of its
own holding a copy of ``recordings/`` and a ``.venv`` that is this one, the installed CLI on PATH,
against the demo agent, a replay server, or the golden recordings.

The blocks of one page run in order in one directory (a later block reads what an earlier one
recorded); pages take a lock, since their servers listen on the ports the docs name."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, SHELL, Block, blocks_of, commands, documents, shell_problems
from tests.docs.harness import Background, reader_env
from tests.oracles.cache import locked

VENV = Path(sys.executable).parents[1]
LOCK = Path("/tmp/a2a-tape-doc-blocks.lock")


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
    run = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if run.returncode != 0 or "Traceback" in run.stderr:
        return f"{block.where}: exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return None


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
            beside = Background(block.with_command, cwd, env, block.ready or "http://") if block.with_command else None
            try:
                if block.background:
                    *first, last = commands(block.text)
                    script = "\n".join([*first, f"exec {last}"])
                    servers.append(Background(script, cwd, env, block.ready or "http://", shell_script=True))
                elif (problem := run_block(block, cwd, env, n)) is not None:
                    problems.append(problem)
            finally:
                if beside is not None and (code := beside.stop()) != 0:
                    problems.append(f"{block.where}: `{block.with_command}` ended {code}: {beside.text[-2000:]}")
    finally:
        problems += stop_all(servers, f"{page.name} {section!r}")
    return problems


@pytest.mark.parametrize("page", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_runs_as_pasted(page, tmp_path):
    if not any(b.not_run is None for b in blocks_of(page)):
        pytest.skip(f"{page.name}: no block to run")
    cwd = reader_dir(tmp_path)
    with locked(LOCK):  # the docs' fixed ports (9999, 8080, 8765, ...): one page at a time on this machine
        problems = run_page(page, cwd, reader_env(tmp_path / "home"))
    assert not problems, "\n\n".join(problems)


def test_every_block_is_run_or_says_why_not():
    """A marker is one of the known kinds: a typo would silently run (or skip) a block."""
    known = ("not run:", "background", "with `", "pytest file:")
    odd = [b.where for p in documents() for b in blocks_of(p) if b.marker and not b.marker.startswith(known)]
    assert not odd
    reasons = [b.where for p in documents() for b in blocks_of(p) if b.not_run == ""]
    assert not reasons, "a block marked not run says why"
