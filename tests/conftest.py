from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

from tests.support.servers import bind_loopback, serve_app

# Before anything imports grpc (a2a-sdk's server package does, once the grpc extra is installed): a
# test process that has run gRPC calls forks children (subprocess with preexec_fn) whose grpc fork
# handlers can kill them between fork and exec ('epoll_wait error: Bad file descriptor', 2 children
# in 60). Our children exec a new program at once: they need no gRPC state from us.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker more than the cores. The oracles' module fixtures mostly wait (the TCK's
    timeouts, the agents' sleeps: 4-5 minutes of a worker each at a load under 1), and a third worker on
    two cores runs the other tests meanwhile."""
    return (os.cpu_count() or 1) + 1


def pytest_xdist_make_scheduler(config, log):
    """Under ``-n``: each oracle module on one worker, every other test wherever a worker is free.

    An oracle runs its suite once per module, in a module-scoped fixture (the TCK's nine runs, the JS SDK,
    opencode-a2a); a module split across two workers ran it on each. xdist's ``--dist loadgroup`` would do
    this from ``xdist_group`` marks, but it names an item's group by rewriting ``item._nodeid``, which pytest 9
    no longer reads (xdist 3.8): the groups are made here, from the node id, with the scheduler it uses."""
    from xdist.scheduler import LoadScopeScheduling

    class OracleModulesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid.split("::", 1)[0] if nodeid.startswith("tests/oracles/") else nodeid

    return OracleModulesTogether(config, log)


class Agent:
    """A running agent: its base URL, its executor (to count executions) and the app served."""

    def __init__(self, url: str, executor, app=None) -> None:
        self.url = url
        self.executor = executor
        self.app = app


@contextlib.contextmanager
def running_sdk_agent(*, wrap=None, **kw) -> Iterator[Agent]:
    """A real a2a-sdk agent on 127.0.0.1; ``wrap``: an ASGI middleware class put in front of it
    (what a load balancer adds, a counter of what reached it)."""
    from tests.support.sdk_agents import make_agent_app

    sock = bind_loopback()
    port = sock.getsockname()[1]
    sock.close()
    url = f"http://127.0.0.1:{port}"
    app, executor = make_agent_app(url, **kw)
    if wrap is not None:
        app = wrap(app)
    with serve_app(app, port=port) as served:
        assert served == url
        yield Agent(url, executor, app)


@pytest.fixture
def sdk_agent() -> Iterator[Agent]:
    """A real a2a-sdk 1.3.0 agent on 127.0.0.1 (streaming, both dialects)."""
    with running_sdk_agent() as agent:
        yield agent


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "tape.db"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A private PostgreSQL server for the session (Debian's postgresql package; .ci/run installs it).

    Skips, saying why, when the server binaries are missing on a developer's machine; under CI
    (``CI`` set) a missing server is an error, never a silent pass.
    """
    import os

    from tests.support import postgres

    if not postgres.available():
        if os.environ.get("CI"):
            pytest.fail(postgres.MISSING)
        pytest.skip(postgres.MISSING)
    with postgres.postgres_server() as url:
        yield url


_pg_schemas = iter(range(1, 1_000_000))


@pytest.fixture
def pg_url(pg_server) -> str:
    """A fresh, empty schema on the session's PostgreSQL server, as a URL."""
    import psycopg

    name = f"t{next(_pg_schemas)}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{pg_server}?options=-csearch_path%3D{name}"
