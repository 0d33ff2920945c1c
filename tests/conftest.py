from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.support.in_process import fresh_consoles
from tests.support.servers import closed_port, serve_app

# No test times itself (speed is measured in benchmarks/): Hypothesis's per-example deadline is off for the
# whole suite. A first example that imports a module at first use took 0.5 s on a loaded machine and
# failed test_options.py as "unreliable timings".
settings.register_profile("a2a-tape", deadline=None)
settings.load_profile("a2a-tape")

# Before anything imports grpc (a2a-sdk's server package does, once the grpc extra is installed): a
# test process that has run gRPC calls forks children (subprocess with preexec_fn) whose grpc fork
# handlers can kill them between fork and exec ('epoll_wait error: Bad file descriptor', 2 children
# in 60). Our children exec a new program at once: they need no gRPC state from us.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


def pytest_configure(config):
    """Once per run, before any worker starts: the package's bytecode compiled where Python looks for it.

    The suite starts ~1,500 ``a2a-tape`` processes (and agents importing tests/support). Where
    ``PYTHONDONTWRITEBYTECODE`` is set (some CI images and containers set it), no process writes the bytecode
    of the package it imports, so every one of them compiled a2a-tape's modules again: ~0.05-0.08 s of CPU
    per process, a minute or more of the run on 2 cores. Compiling them once here (into ``__pycache__`` beside
    the sources, as Python does by default; only the files whose bytecode is missing or stale) lets every
    process read it. Without the variable, the first process writes it anyway: nothing to do.
    """
    if hasattr(config, "workerinput") or not sys.dont_write_bytecode:
        return
    import compileall

    package = config.rootpath / "a2a_tape"
    rooms = [p for p in package.iterdir() if p.is_dir() and p.is_symlink()]  # compileall does not follow links
    for directory in (package, *rooms, config.rootpath / "tests" / "support"):
        compileall.compile_dir(directory, quiet=1)


@pytest.fixture(autouse=True)
def _fresh_cli_consoles() -> None:
    """Each test's in-process CLI runs (CliRunner, tests/support/in_process.py) start with consoles made anew,
    as a new process would: a console keeps the ``COLUMNS`` it was made under, and a test that ran the CLI with
    ``COLUMNS=200`` left every later test of its worker a 200-column human view."""
    fresh_consoles()


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: two workers more than the cores. The oracles' modules hold a worker each for minutes at a
    fraction of a core (the old TCK's module used 32 s of CPU in 450-490 s, the other oracles 98 s in 505 s,
    load 15-26): the two extra workers run the other tests meanwhile."""
    return (os.cpu_count() or 1) + 2


def pytest_xdist_make_scheduler(config, log):
    """Under ``-n``: each oracle module on one worker, the two longest first; elsewhere a few neighbouring
    tests of one module at a time, wherever a worker is free (:func:`scope_of`).

    An oracle runs its suite once per module, in a module-scoped fixture (the TCK's nine runs, the JS SDK,
    opencode-a2a); a module split across two workers ran it on each. xdist's ``--dist loadgroup`` would do
    this from ``xdist_group`` marks, but it names an item's group by rewriting ``item._nodeid``, which pytest 9
    no longer reads (xdist 3.8): the groups are made here, from the node id, with the scheduler it uses. The
    scopes go out in collection order (:func:`pytest_collection_modifyitems` puts the longest oracles first),
    not xdist's largest-scope-first, which would send the old TCK's module (7 tests, 4-8 minutes) out after
    every full chunk."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class OracleModulesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid, self.collection or [])

    return OracleModulesTogether(config, log)


ORACLES_FIRST = ("tests/oracles/test_tck.py", "tests/oracles/test_tck1.py")
"""The oracle modules that hold a worker longest (the old TCK 4-8 minutes, TCK 1.0 2-3), longest first: they
start at once, never last. The other oracles (a minute or two each) keep their place."""


def pytest_collection_modifyitems(config, items):
    """:data:`ORACLES_FIRST` first, every other test after them in its own order."""

    def rank(item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return ORACLES_FIRST.index(path) if path in ORACLES_FIRST else len(ORACLES_FIRST)

    items.sort(key=rank)  # stable: each module's own order kept


CHUNK = 12
"""Neighbouring tests of one module a worker takes together (outside tests/oracles/). One test at a time spread
each module over every worker, and each worker built the module's fixtures (a Chromium, a recorded agent, a
served log) again."""

_chunks: dict[str, str] = {}


def scope_of(nodeid: str, collection: list[str]) -> str:
    """The xdist scope of a test: an oracle module whole; elsewhere its run of neighbours (:func:`chunks`)."""
    module = nodeid.split("::", 1)[0]
    if module.startswith("tests/oracles/"):
        return module
    if nodeid not in _chunks:
        _chunks.update(chunks(collection))
    return _chunks.get(nodeid, nodeid)


def chunks(collection: list[str]) -> dict[str, str]:
    """Each test's run of :data:`CHUNK` neighbouring tests of its module (``MODULE::K``): the module's
    fixtures built once per run, units small enough to keep the workers even."""
    seen: dict[str, int] = {}
    out: dict[str, str] = {}
    for item in collection:
        module = item.split("::", 1)[0]
        k = seen[module] = seen.get(module, -1) + 1
        out[item] = f"{module}::{k // CHUNK}"
    return out


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

    port = closed_port()  # nothing listens there; bound later by the server
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
