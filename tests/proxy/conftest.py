"""Run the recording proxy in-process (uvicorn thread, lifespan on) in front of a real agent."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
import uvicorn

import store
from recorder.proxy import ProxyConfig, build_app
from tests.support.servers import bind_loopback


class RunningProxy:
    def __init__(self, url: str, proxy, st: store.SqliteStore) -> None:
        self.url = url
        self.proxy = proxy
        self.store = st


@contextlib.contextmanager
def running_proxy(upstream: str, db_path, **config) -> Iterator[RunningProxy]:
    """The proxy in front of ``upstream``, recording to ``db_path``; startup recovery off unless asked."""
    config.setdefault("recover_on_start", False)
    st = store.open_store(db_path, durability=config.get("durability", "full"))
    asgi, proxy = build_app(st, ProxyConfig(upstream=upstream, **config))
    sock = bind_loopback()
    host, port = sock.getsockname()[:2]
    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", lifespan="on", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield RunningProxy(f"http://{host}:{port}", proxy, st)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        st.close()


@pytest.fixture
def proxied(sdk_agent, db_path) -> Iterator[tuple[object, RunningProxy]]:
    """(agent, proxy): a real a2a-sdk agent behind the proxy."""
    with running_proxy(sdk_agent.url, db_path) as p:
        yield sdk_agent, p
