"""The scripted fault agent of tests/support/fault_agent.py, served once for the module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fault_agent import SECRET_CONFIG, RawFaultAgent
from tests.support.servers import serve_app


@pytest.fixture(scope="module")
def raw_agent() -> Iterator[tuple[str, RawFaultAgent]]:
    agent = RawFaultAgent()
    with serve_app(agent.app()) as url:
        yield url, agent


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory whose pyproject.toml configures the redaction every path must apply."""
    (tmp_path / "pyproject.toml").write_text(SECRET_CONFIG)
    return tmp_path
