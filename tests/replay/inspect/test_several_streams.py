"""Several streams per task, recorded through the proxy from a real a2a-sdk 1.3.0 agent: the first
stream still open while a resubscribe opens, then a cancel. Inspection must see each stream end
when its exchange ends, and must not count the resubscribe snapshot or the cancel reply as a
second answer."""

from __future__ import annotations

import itertools
import json

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from a2a_tape.cli import app
from a2a_tape.recorder.client import task_request
from a2a_tape.store import decode_item
from a2a_tape.wire.sse_reader import SseParser
from tests.conftest import running_sdk_agent
from tests.recorder.proxy.conftest import SettleWatch, running_proxy, send_body
from tests.replay.inspect.builders import Tape, items

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
    assert "closed-while-working" not in codes, view["faults"]
    assert view["status_message"] is None

    res = runner.invoke(app, ["tasks", "--db", db, "--json"])
    row = next(r for r in json.loads(res.stdout) if r["task_id"] == task_id)
    assert row["faults"] == 0, row

    res = runner.invoke(app, ["doctor", task_id, "--db", db, "--json"])
    report = json.loads(res.stdout)
    codes = [f["code"] for f in report["findings"]]
    assert "answer-shown-twice" not in codes, report["findings"]


# -- the same rules on hand-built logs (both dialects) ------------------------------------------

DIALECTS = ["1.0", "0.3"]


def _channels(db, task_id):
    res = runner.invoke(app, ["channels", task_id, "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _doctor_codes(db, task_id):
    res = runner.invoke(app, ["doctor", task_id, "--db", str(db), "--json"])
    return {f["code"]: f["level"] for f in json.loads(res.stdout)["findings"]}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_interleaved_streams_end_with_their_exchanges(tmp_path, dialect):
    """Stream A still open when a resubscribe B opens, a cancel C answers, then A and B get the
    canceled status: no stream ended while the task was working."""
    it = items(dialect)
    tape = Tape(tmp_path / "t.db")
    a = tape.exchange(task_id=it.task_id, dialect=dialect)
    b = tape.exchange(task_id=it.task_id, dialect=dialect, rpc_method="SubscribeToTask")
    c = tape.exchange(task_id=it.task_id, dialect=dialect, rpc_method="CancelTask", streaming=False)
    tape.add(it.task_id, [it.task("submitted"), it.status("working", "working on it")], exchange_id=a)
    tape.add(it.task_id, [it.task("working")], exchange_id=b)
    tape.add(it.task_id, [it.artifact("art-1", "partial")], exchange_id=a)
    tape.add(it.task_id, [it.task("canceled")], exchange_id=c)
    tape.add(it.task_id, [it.status("canceled")], exchange_id=a)
    tape.add(it.task_id, [it.status("canceled")], exchange_id=b)
    tape.close()
    view = _channels(tmp_path / "t.db", it.task_id)
    assert view["state"] == "canceled"
    assert [f["code"] for f in view["faults"]] == []
    assert view["status_message"] is None  # the last status had no message: cleared


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_stream_that_ended_while_working_is_still_a_fault(tmp_path, dialect):
    it = items(dialect)
    tape = Tape(tmp_path / "t.db")
    a = tape.stream(it, [it.task("submitted"), it.status("working"), it.artifact("art-1", "part")])
    b = tape.exchange(task_id=it.task_id, dialect=dialect, rpc_method="SubscribeToTask")
    tape.add(it.task_id, [it.task("working"), it.status("completed")], exchange_id=b)
    tape.close()
    view = _channels(tmp_path / "t.db", it.task_id)
    assert [(f["code"], f["positions"]) for f in view["faults"]] == [("closed-while-working", [3])]
    assert a == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_status_message_follows_the_last_status(tmp_path, dialect):
    it = items(dialect)
    tape = Tape(tmp_path / "t.db")
    tape.stream(it, [it.task("submitted"), it.status("working", "working on it"), it.status("canceled")])
    it2 = items(dialect)
    tape.stream(it2, [it2.task("submitted"), it2.status("working", "first"), it2.status("failed", "it broke")])
    tape.close()
    assert _channels(tmp_path / "t.db", it.task_id)["status_message"] is None
    assert _channels(tmp_path / "t.db", it2.task_id)["status_message"] == "it broke"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_get_task_polls_and_a_cancel_reply_are_not_a_second_answer(tmp_path, dialect):
    it = items(dialect)
    tape = Tape(tmp_path / "t.db")
    tape.stream(
        it,
        [
            it.task("submitted"),
            it.status("working"),
            it.artifact("art-1", "hello "),
            it.artifact("art-1", "world", append=True, last=True),
            it.status("completed"),
        ],
    )
    done = it.task("completed", artifacts=[it.artifact_obj("art-1", "hello world")])
    for _ in range(3):  # a client polling GetTask after the stream
        ex = tape.exchange(task_id=it.task_id, dialect=dialect, rpc_method="GetTask", streaming=False)
        tape.add(it.task_id, [done], exchange_id=ex)
    tape.close()
    assert "answer-shown-twice" not in _doctor_codes(tmp_path / "t.db", it.task_id)
    assert _channels(tmp_path / "t.db", it.task_id)["final_answer"] == "hello world"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_snapshot_repeating_the_streamed_text_in_the_same_stream_is_still_caught(tmp_path, dialect):
    it = items(dialect)
    tape = Tape(tmp_path / "t.db")
    tape.stream(
        it,
        [
            it.task("submitted"),
            it.artifact("art-1", "hello "),
            it.artifact("art-1", "world", append=True),
            it.task("completed", artifacts=[it.artifact_obj("art-1", "hello world")]),
        ],
    )
    tape.close()
    assert _doctor_codes(tmp_path / "t.db", it.task_id).get("answer-shown-twice") == "warning"
