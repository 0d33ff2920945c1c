"""Several streams per task, recorded through the proxy from a real a2a-sdk 1.3.0 agent: the first
stream still open while a resubscribe opens, then a cancel. Inspection must see each stream end
when its exchange ends, and must not count the resubscribe snapshot or the cancel reply as a
second answer."""

from __future__ import annotations

import itertools
import json

import anyio
import httpx
from typer.testing import CliRunner

from a2a_tape.recorder.cli import app
from a2a_tape.recorder.client import task_request
from a2a_tape.store import decode_item
from a2a_tape.store.sse import SseParser
from tests.conftest import running_sdk_agent
from tests.proxy.conftest import SettleWatch, running_proxy, send_body

runner = CliRunner()
_ids = itertools.count(100)
V1 = {"content-type": "application/json", "A2A-Version": "1.0"}


class _Reader:
    """An open SSE response read item by item (the stream stays open between reads)."""

    def __init__(self, response: httpx.Response) -> None:
        self.chunks = response.aiter_bytes()
        self.parser = SseParser()
        self.items: list[bytes] = []

    async def until(self, n: int) -> None:
        while len(self.items) < n:
            chunk = await self.chunks.__anext__()
            self.items += [it.data for it in self.parser.feed(chunk) if not it.comment]

    async def rest(self) -> None:
        async for chunk in self.chunks:
            self.items += [it.data for it in self.parser.feed(chunk) if not it.comment]


async def _resubscribe_then_cancel(url: str) -> tuple[str, int, int]:
    body, _ = send_body("slow many 40", dialect="1.0")
    async with httpx.AsyncClient(timeout=30) as c:
        async with c.stream("POST", url + "/", content=body, headers=V1) as first:
            a = _Reader(first)
            await a.until(3)  # the Task, working, a first chunk: the stream stays open
            task_id = decode_item(a.items[0]).task_id
            assert task_id
            sub = task_request("resubscribe", "1.0", task_id, rpc_id=next(_ids)).body
            async with c.stream("POST", url + "/", content=sub, headers=V1) as second:
                b = _Reader(second)
                await b.until(1)  # the snapshot, while the first stream is still open
                cancel = task_request("cancel", "1.0", task_id, rpc_id=next(_ids)).body
                reply = await c.post(url + "/", content=cancel, headers=V1)
                assert b"TASK_STATE_CANCELED" in reply.content, reply.content
                with anyio.fail_after(20):
                    await b.rest()
            with anyio.fail_after(20):
                await a.rest()
    return task_id, len(a.items), len(b.items)


def test_resubscribe_beside_an_open_stream_then_cancel_raises_no_false_fault(db_path):
    with running_sdk_agent(slow_delay=0.2) as agent, running_proxy(agent.url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        task_id, _, _ = anyio.run(_resubscribe_then_cancel, proxy.url)
        watch.wait(3)  # the send, the resubscribe and the cancel are all recorded to their end
    db = str(db_path)

    res = runner.invoke(app, ["channels", task_id, "--db", db, "--json"])
    assert res.exit_code == 0, res.output
    view = json.loads(res.stdout)
    assert view["state"] == "canceled"
    codes = [f["code"] for f in view["faults"]]
    assert "stream-closed-active" not in codes, view["faults"]
    assert view["status_message"] is None

    res = runner.invoke(app, ["tasks", "--db", db, "--json"])
    row = next(r for r in json.loads(res.stdout) if r["task_id"] == task_id)
    assert row["faults"] == 0, row

    res = runner.invoke(app, ["doctor", task_id, "--db", db, "--json"])
    report = json.loads(res.stdout)
    codes = [f["code"] for f in report["findings"]]
    assert "answer-shown-twice" not in codes, report["findings"]
