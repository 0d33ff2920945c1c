"""Run the recording proxy in-process (uvicorn thread, lifespan on) in front of a real agent."""

from __future__ import annotations

import contextlib
import inspect
import itertools
import threading
from collections.abc import Iterator

import httpx
import pytest

from a2a_tape import store
from a2a_tape.recorder.client import dialect_headers, send_request, task_request
from a2a_tape.recorder.listen import serving
from a2a_tape.recorder.proxy.proxy_config import ProxyConfig
from a2a_tape.recorder.proxy.server import build_app
from a2a_tape.wire.sse_reader import SseParser


class RunningProxy:
    def __init__(self, url: str, proxy, st: store.SqliteStore, loop_thread: int) -> None:
        self.url = url
        self.proxy = proxy
        self.store = st
        self.loop_thread = loop_thread  # the ident of the thread running the proxy's event loop


def open_with_busy_timeout(db_path, seconds: float, durability: str = "full"):
    """A SQLite store whose writes wait ``seconds`` for another writer's lock (the argument's
    name differs before and after the store's busy-timeout option)."""
    params = inspect.signature(store.SqliteStore).parameters
    name = "busy_timeout" if "busy_timeout" in params else "timeout"
    return store.SqliteStore(db_path, durability=durability, **{name: seconds})


@contextlib.contextmanager
def running_proxy(upstream: str, db_path, *, busy_timeout: float | None = None, **config) -> Iterator[RunningProxy]:
    """The proxy in front of ``upstream``, recording to ``db_path``; startup recovery off unless asked."""
    config.setdefault("recover_on_start", False)
    durability = config.get("durability", "full")
    if busy_timeout is None:
        st = store.open_store(db_path, durability=durability)
    else:
        st = open_with_busy_timeout(db_path, busy_timeout, durability)
    asgi, proxy = build_app(st, ProxyConfig(upstream=upstream, **config))
    started = threading.Event()
    loop_thread: list[int] = []
    inner = asgi.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with inner(app):
            loop_thread.append(threading.get_ident())
            started.set()
            yield

    asgi.router.lifespan_context = lifespan
    try:
        with serving(asgi, lifespan="on") as url:
            # started: its startup's writes (the proxy's mark, the idempotency scope's key) are done. The
            # URL is usable before (the socket listens), but a test that takes the log's lock at once
            # raced them: the startup then waited for the lock on the loop, and nothing was served
            assert started.wait(30), "the proxy did not start"
            yield RunningProxy(url, proxy, st, loop_thread[0])
    finally:
        st.close()


@pytest.fixture
def proxied(sdk_agent, db_path) -> Iterator[tuple[object, RunningProxy]]:
    """(agent, proxy): a real a2a-sdk agent behind the proxy."""
    with running_proxy(sdk_agent.url, db_path) as p:
        yield sdk_agent, p


# -- client-side helpers (real bytes over real HTTP) -----------------------------------------

_ids = itertools.count(1)


def _headers(dialect: str) -> dict[str, str]:
    return {"content-type": "application/json", **dialect_headers(dialect)}  # type: ignore[arg-type]


def send_body(
    text: str, *, dialect: str = "0.3", stream: bool = True, message_id: str | None = None, rpc_id: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """A send request of either dialect (built by the recorder's own client) and its headers."""
    req = send_request(dialect, text, stream=stream, message_id=message_id, rpc_id=rpc_id or next(_ids))  # type: ignore[arg-type]
    return req.body, _headers(dialect)


def get_body(task_id: str, dialect: str = "0.3") -> tuple[bytes, dict[str, str]]:
    return task_request("get", dialect, task_id, rpc_id=next(_ids)).body, _headers(dialect)  # type: ignore[arg-type]


def read_sse(response: httpx.Response, limit: int | None = None) -> list[bytes]:
    """The ``data:`` payloads of an SSE response (stop after ``limit`` items)."""
    parser = SseParser()
    out: list[bytes] = []
    for chunk in response.iter_bytes():
        for it in parser.feed(chunk):
            if not it.comment:
                out.append(it.data)
                if limit is not None and len(out) >= limit:
                    return out
    return out


async def aread_sse(response: httpx.Response) -> list[bytes]:
    parser = SseParser()
    out: list[bytes] = []
    async for chunk in response.aiter_bytes():
        out.extend(it.data for it in parser.feed(chunk) if not it.comment)
    return out


class SettleWatch:
    """Counts exchanges the proxy finished relaying (its ``on_settled`` hook), so a test can wait
    for "the recording is complete" on a condition with a timeout instead of sleeping."""

    def __init__(self, proxy) -> None:
        self.settled: list[int] = []
        self._cond = threading.Condition()
        proxy.on_settled = self._hit

    def _hit(self, ex_id: int) -> None:
        with self._cond:
            self.settled.append(ex_id)
            self._cond.notify_all()

    def wait(self, count: int, timeout: float = 15.0) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.settled) >= count, timeout), (
                f"only {len(self.settled)} of {count} exchanges settled in {timeout}s"
            )
