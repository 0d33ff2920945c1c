"""Issue 36, item 3: a repeated message/stream with a huge JSON-RPC id is answered one item at a
time. The proxy answers it from the log (or a live stream another client started) with the id
spliced into each recorded item; it used to splice every item kept into one chunk at once (a 2 MB
id times every item: ~1 GB). The memory figure is in benchmarks/bench_memory.py; here, the bound
itself: no chunk handed to the client holds more than one item."""

from __future__ import annotations

import anyio
import msgspec

from a2a_tape.recorder.proxy.relay import Live
from a2a_tape.wire.sse_frames import frame

ITEMS = 40
HUGE_ID = b'"' + b"i" * (1 << 20) + b'"'  # 1 MiB of id


def _item(n: int) -> tuple[bytes, bytes, None]:
    data = msgspec.json.encode({"jsonrpc": "2.0", "id": "recorded", "result": {"kind": "status-update", "n": n}})
    return frame(data), data, None


def test_a_huge_id_is_spliced_one_item_at_a_time():
    live = Live(None, "hash", None)  # answered from the log: every reader gets its own id
    live.start_sse(200, [("content-type", "text/event-stream")])
    live.publish([_item(n) for n in range(ITEMS)])
    live.finish()

    async def read() -> list[bytes]:
        return [chunk async for chunk in live.follow(HUGE_ID)]

    chunks = anyio.run(read)
    biggest_item = max(len(_item(n)[0]) for n in range(ITEMS))
    assert max(map(len, chunks)) <= len(HUGE_ID) + biggest_item + 64  # one item with the id, never all of them
    got = [msgspec.json.decode(line[5:]) for c in chunks for line in c.splitlines() if line.startswith(b"data:")]
    assert [g["result"]["n"] for g in got] == list(range(ITEMS))  # every item, in order
    assert all(g["id"] == HUGE_ID[1:-1].decode() for g in got)  # each answered to the client's own id


def test_the_clients_own_id_needs_no_splice_and_comes_in_one_chunk():
    live = Live(None, "hash", b'"recorded"')
    live.start_sse(200, [("content-type", "text/event-stream")])
    live.publish([_item(n) for n in range(ITEMS)])
    live.finish()

    async def read() -> list[bytes]:
        return [chunk async for chunk in live.follow(b'"recorded"')]

    assert anyio.run(read) == [b"".join(_item(n)[0] for n in range(ITEMS))]
