"""RecordingTransport in an asyncio application while another process holds the log's write
lock (an import, a rebuild, another recorder): the transport's writes wait on a worker thread,
so the application's event loop goes on serving everything else; once the lock is free the
exchange is recorded whole. The sync client waits where it is, as any sync call does."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine, Iterator
from typing import Any

import anyio
import httpx
import pytest

from a2a_tape import store
from a2a_tape.recorder.transport import RecordingTransport
from tests.conftest import running_sdk_agent
from tests.support.locks import wait_for_a_lock_waiter, write_lock_held


class _App:
    """The caller's application: an asyncio loop running in a thread of its own, so the test can
    ask it to do something else while one of its requests waits for the log."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@contextlib.contextmanager
def _app() -> Iterator[_App]:
    app = _App()
    try:
        yield app
    finally:
        app.close()


def _body(method: str) -> dict:
    message = {
        "messageId": f"m-lock-{method}",
        "role": "user",
        "kind": "message",
        "parts": [{"kind": "text", "text": "hi"}],
    }
    return {"jsonrpc": "2.0", "id": "r1", "method": method, "params": {"message": message}}


@pytest.mark.parametrize(
    ("locked_before", "method"),
    [
        ("the request", "message/stream"),  # the exchange row waits
        ("the items", "message/stream"),  # the head and the first items wait
        ("the items", "message/send"),  # the JSON answer waits
    ],
)
def test_a_locked_log_never_stops_the_callers_event_loop(db_path, locked_before, method):
    store.open_store(db_path).close()
    lock = contextlib.ExitStack()
    headers_in, go_on = threading.Event(), threading.Event()
    with running_sdk_agent() as agent, _app() as app, store.open_store(db_path) as st:
        transport = RecordingTransport(st)

        async def call() -> bytes:
            async with httpx.AsyncClient(transport=transport, timeout=60) as http:
                async with http.stream("POST", agent.url + "/", json=_body(method)) as resp:
                    headers_in.set()
                    await anyio.to_thread.run_sync(go_on.wait)
                    return await resp.aread()

        if locked_before == "the request":
            lock.enter_context(write_lock_held(db_path))
            go_on.set()
        with lock:
            answer = app.submit(call())
            if locked_before == "the items":
                assert headers_in.wait(30)
                lock.enter_context(write_lock_held(db_path))
                go_on.set()
            waiter = wait_for_a_lock_waiter()
            assert waiter != app.thread.ident, "the transport waited for the lock on the caller's event loop"
            # the loop is free: it answers at once, while the request still waits for the log
            assert app.submit(asyncio.sleep(0, result="free")).result(timeout=5) == "free"
            assert not answer.done()
        body = answer.result(timeout=60)  # the lock is gone: recorded, then handed up
        (ex,) = [x for x in st.exchanges() if x.rpc_method == method]
        assert ex.outcome == "ok" and ex.status == 200
        events = st.read_exchange(ex.id)
        assert events and all(e.payload in body for e in events)


class _Endless(httpx.AsyncByteStream):
    """An SSE body of one small event per chunk, without end (a fast agent; a stand-in for one:
    a real server coalesces writes, so how many chunks arrive cannot be set)."""

    def __init__(self) -> None:
        self.sent = 0

    async def __aiter__(self):
        while True:
            self.sent += 1
            yield b'data: {"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t"}}\n\n'
            await asyncio.sleep(0)

    async def aclose(self) -> None:
        pass


def test_what_is_read_ahead_of_a_locked_log_is_bounded(db_path):
    """While a write waits for the lock on a worker thread, the reader reads on, but not past
    _AHEAD chunks: a fast stream cannot fill the memory for the whole busy timeout."""
    from a2a_tape.recorder import transport as tr

    class Agent(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.body = _Endless()

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=self.body)

    store.open_store(db_path).close()
    agent = Agent()
    with _app() as app, store.open_store(db_path) as st:
        headers_in, go_on = threading.Event(), threading.Event()

        async def call() -> int:
            transport = RecordingTransport(st, transport=agent)
            async with httpx.AsyncClient(transport=transport) as http:
                async with http.stream("POST", "http://agent.test/", json=_body("message/stream")) as resp:
                    headers_in.set()
                    await anyio.to_thread.run_sync(go_on.wait)
                    async for _ in resp.aiter_raw():
                        break  # the first chunk comes once its item is in the log
            return agent.body.sent

        answer = app.submit(call())
        assert headers_in.wait(30)
        with write_lock_held(db_path):
            go_on.set()
            wait_for_a_lock_waiter()
            seen = [agent.body.sent]
            while len(seen) < 20 or seen[-1] != seen[-15]:  # the reader runs on the free loop until it parks
                assert len(seen) < 500, seen[-15:]  # 10 s
                seen.append(app.submit(asyncio.sleep(0.02, result=agent.body.sent)).result(timeout=5))
            assert seen[-1] <= tr._AHEAD + 1, seen[-15:]
        assert answer.result(timeout=60) >= 1
