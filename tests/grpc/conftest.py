"""gRPC fixtures: a real a2a-sdk agent over gRPC, the recording proxy (HTTP and gRPC) in front of it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest

from a2a_tape import store
from a2a_tape.recorder.listen import serving
from a2a_tape.recorder.proxy.grpc_server import attach
from a2a_tape.recorder.proxy.server import ProxyConfig, build_app
from tests.support.grpc_agents import GrpcAgent, running_grpc_agent

pytest.importorskip("grpc")


class RunningGrpcProxy:
    def __init__(self, url: str, target: str, proxy, st: store.SqliteStore) -> None:
        self.url = url  # the HTTP proxy (card, JSON-RPC)
        self.target = target  # HOST:PORT of the gRPC proxy
        self.proxy = proxy
        self.store = st
        self.settled: dict[int, threading.Event] = {}
        self._lock = threading.Lock()
        proxy.on_settled = self._settled

    def _settled(self, ex_id: int) -> None:
        self.event(ex_id).set()

    def event(self, ex_id: int) -> threading.Event:
        with self._lock:
            return self.settled.setdefault(ex_id, threading.Event())

    def wait_settled(self, ex_id: int, timeout: float = 10.0) -> None:
        assert self.event(ex_id).wait(timeout), f"exchange {ex_id} never settled"


@contextlib.contextmanager
def running_grpc_proxy(
    upstream_url: str, grpc_target: str, db_path, *, busy_timeout: float | None = None, **config
) -> Iterator[RunningGrpcProxy]:
    """The HTTP proxy with its gRPC side, in front of an agent; startup recovery off unless asked."""
    config.setdefault("recover_on_start", False)
    st = store.open_store(db_path, durability=config.get("durability", "full"), busy_timeout=busy_timeout)
    asgi, proxy = build_app(st, ProxyConfig(upstream=upstream_url, **config))
    attach(asgi, proxy, grpc_target, "127.0.0.1", 0)
    started = threading.Event()
    inner = asgi.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with inner(app):
            started.set()
            yield

    asgi.router.lifespan_context = lifespan
    try:
        with _uvicorn(asgi) as url:
            assert started.wait(10), "the proxy did not start"
            proxy.listen_url = url  # as `a2a-tape proxy` sets it once bound (the push receiver's address)
            yield RunningGrpcProxy(url, proxy.grpc_address, proxy, st)
    finally:
        st.close()


def _uvicorn(app) -> contextlib.AbstractContextManager[str]:
    """``app`` served by uvicorn (lifespan on) in a thread on 127.0.0.1; its base URL."""
    return serving(app, lifespan="on")


@pytest.fixture
def grpc_agent() -> Iterator[GrpcAgent]:
    with running_grpc_agent() as agent:
        yield agent


@pytest.fixture
def grpc_proxied(grpc_agent, db_path) -> Iterator[tuple[GrpcAgent, RunningGrpcProxy]]:
    with running_grpc_proxy(grpc_agent.url, grpc_agent.target, db_path) as p:
        yield grpc_agent, p


class RunningServe:
    def __init__(self, url: str, target: str, engine) -> None:
        self.url = url  # the HTTP side (card, JSON-RPC)
        self.target = target  # HOST:PORT of the gRPC side
        self.engine = engine


@contextlib.contextmanager
def running_serve(location, **engine_kw) -> Iterator[RunningServe]:
    """``a2a-tape serve --grpc-listen`` in-process over the recordings at ``location``."""
    from a2a_tape.replay.serve.engine import ReplayEngine
    from a2a_tape.replay.serve.grpc_server import attach as attach_replay
    from a2a_tape.replay.serve.library import Library
    from a2a_tape.replay.serve.server import create_app

    library = Library.open(location, readonly=True)
    engine = ReplayEngine(library, **engine_kw)
    app = create_app(engine)
    ready = threading.Event()
    attach_replay(app, engine, "127.0.0.1", 0, on_ready=lambda _at: ready.set())
    try:
        with _uvicorn(app) as url:
            assert ready.wait(10), "serve did not start"
            yield RunningServe(url, engine.grpc_address, engine)
    finally:
        library.close()
