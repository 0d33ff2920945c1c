"""``record --durability full`` while another process holds the log's write lock: its commits
wait on a worker thread and the reader goes on reading, but not past ``BATCHING.ahead`` events not yet
in the log, so a fast stream does not fill the memory for the whole busy timeout."""

from __future__ import annotations

import asyncio
import threading

import anyio
import httpx

from a2a_tape import store
from a2a_tape.recorder import record as rec
from a2a_tape.recorder.session import Session
from tests.support.locks import wait_for_a_lock_waiter, write_lock_held

TOTAL = 6 * rec.BATCHING.ahead
WORKING = b'data: {"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t-fast","contextId":"c","status":{"state":"working"},"final":false}}\n\n'
DONE = b'data: {"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t-fast","contextId":"c","status":{"state":"completed"},"final":true}}\n\n'


class _FastAgent(httpx.AsyncBaseTransport):
    """A card, then a stream of one event per chunk, as fast as it is read (a stand-in for a fast
    agent: a real server coalesces writes, so how many chunks arrive cannot be set)."""

    def __init__(self) -> None:
        self.sent = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            card = {
                "name": "fast",
                "url": "http://agent.test/",
                "protocolVersion": "0.3.0",
                "capabilities": {"streaming": True},
            }
            return httpx.Response(200, json=card)
        agent = self

        class Body(httpx.AsyncByteStream):
            async def __aiter__(self):
                while agent.sent < TOTAL:
                    agent.sent += 1
                    yield WORKING
                    await asyncio.sleep(0)
                yield DONE

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())


def test_what_record_reads_ahead_of_a_locked_log_is_bounded(db_path):
    store.open_store(db_path).close()
    agent = _FastAgent()
    with store.open_store(db_path, durability="full") as st:
        opts = rec.RecordOptions(url="http://agent.test/", text="go", stall_timeout=60, protocol="0.3", get_task=False)
        loop = asyncio.new_event_loop()
        done: list[object] = []

        def run() -> None:
            done.append(loop.run_until_complete(rec.record(Session(st), opts, transport=agent)))

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            while agent.sent < 100:  # the stream runs; then another process takes the lock
                assert thread.is_alive(), done
                anyio.run(anyio.sleep, 0.001)
            with write_lock_held(db_path):
                wait_for_a_lock_waiter()  # a commit waits for it, on a worker thread
                seen = [agent.sent]
                while len(seen) < 20 or seen[-1] != seen[-15]:  # until the reader stops (or reads it all)
                    assert len(seen) < 500, seen[-15:]  # 10 s
                    anyio.run(anyio.sleep, 0.02)
                    seen.append(agent.sent)
                assert seen[-1] < TOTAL / 2, seen[-15:]  # the reader waits, far from the end
            thread.join(timeout=60)
        finally:
            if thread.is_alive():
                loop.call_soon_threadsafe(lambda: [t.cancel() for t in asyncio.all_tasks(loop)])
                thread.join(timeout=10)
        (result,) = done
        assert result.state == "completed"  # type: ignore[attr-defined]
        assert st.count_events() == TOTAL + 1  # every event, once the lock was free
