from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.support.servers import bind_loopback, serve_app


class Agent:
    """A running agent: its base URL and its executor (to count executions)."""

    def __init__(self, url: str, executor) -> None:
        self.url = url
        self.executor = executor


@contextlib.contextmanager
def running_sdk_agent(**kw) -> Iterator[Agent]:
    from tests.support.sdk_agents import make_agent_app

    sock = bind_loopback()
    port = sock.getsockname()[1]
    sock.close()
    url = f"http://127.0.0.1:{port}"
    app, executor = make_agent_app(url, **kw)
    with serve_app(app, port=port) as served:
        assert served == url
        yield Agent(url, executor)


@pytest.fixture
def sdk_agent() -> Iterator[Agent]:
    """A real a2a-sdk 1.3.0 agent on 127.0.0.1 (streaming, both dialects)."""
    with running_sdk_agent() as agent:
        yield agent


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "tape.db"
