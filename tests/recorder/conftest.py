from __future__ import annotations

import json as _json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from a2a_tape.cli import app
from tests.support.fault_agent import FaultHost, make_fault_app
from tests.support.servers import serve_app


class FaultAgent:
    def __init__(self, url: str, hosts: dict[str, FaultHost]) -> None:
        self.base = url
        self.hosts = hosts

    def url(self, mode: str) -> str:
        return f"{self.base}/{mode}"


@pytest.fixture(scope="module")
def fault_agent() -> Iterator[FaultAgent]:
    """The hand-written fault agent (tests/support/fault_agent.py), one mode per path."""
    fapp, hosts = make_fault_app()
    with serve_app(fapp) as url:
        yield FaultAgent(url, hosts)


class Run:
    def __init__(self, result) -> None:
        self.code = result.exit_code
        self.stdout = result.stdout
        self.stderr = result.stderr

    @property
    def json(self):
        return _json.loads(self.stdout)


def run_cli(*args: str) -> Run:
    """Invoke the real CLI in-process (CliRunner), stdout and stderr kept apart."""
    return Run(CliRunner().invoke(app, list(args)))


@pytest.fixture
def record(db_path: Path):
    def _record(url: str, text: str, *extra: str) -> Run:
        return run_cli("record", url, text, "--db", str(db_path), "--json", *extra)

    return _record
