"""Fixtures for the inspection tests: the real CLI in-process, and live recordings of a real agent."""

from __future__ import annotations

import json as jsonlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import running_sdk_agent
from tests.replay.inspect.builders import record_live


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return jsonlib.loads(self.stdout)


def cli(*args: object) -> Run:
    """Run ``cli.app`` in-process with typer's CliRunner."""
    from a2a_tape.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return Run(result.exit_code, result.stdout, result.stderr)


@dataclass
class Live:
    """One database of live recordings: task ids by (dialect, text)."""

    db: Path
    tasks: dict[tuple[str, str], str]


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Live:
    """A real a2a-sdk 1.3.0 agent, recorded over both dialects: hello (clean), ask, boom, reply."""
    db = tmp_path_factory.mktemp("live") / "live.db"
    tasks: dict[tuple[str, str], str] = {}
    with running_sdk_agent() as agent:
        for dialect in ("1.0", "0.3"):
            for text in ("hello", "ask", "boom", "reply"):
                tasks[(dialect, text)] = record_live(agent.url, text, db, dialect=dialect)
    return Live(db, tasks)
