"""The recording proxy in front of real a2a-sdk 1.3.0 agents: both dialects, streaming and not,
many concurrent streams, early client disconnects, credentials."""

from __future__ import annotations

import anyio
import httpx
import pytest

from a2a_tape import store
from a2a_tape.store.redact import REDACTED
from tests.recorder.proxy.conftest import SettleWatch, aread_sse, get_body, read_sse, running_proxy, send_body


def test_agent_card_points_at_the_proxy(proxied):
    agent, proxy = proxied
    card = httpx.get(proxy.url + "/.well-known/agent-card.json").content
    assert proxy.url.encode() in card
    assert agent.url.encode() not in card  # a client following the card must not bypass the proxy


@pytest.mark.parametrize("dialect", ["0.3", "1.0"])
def test_stream_is_recorded_then_forwarded_exactly(proxied, dialect):
    agent, proxy = proxied
    watch = SettleWatch(proxy.proxy)
    body, headers = send_body("hello", dialect=dialect)
    with httpx.stream("POST", proxy.url + "/", content=body, headers=headers) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        got = read_sse(r)
    watch.wait(1)
    assert len(got) == 6  # task, working, 3 chunks, completed
    ex = [e for e in proxy.store.exchanges() if e.rpc_method][0]
    assert ex.status == 200 and ex.outcome == "closed" and ex.streaming
    assert ex.dialect == dialect and ex.content_type.startswith("text/event-stream")
    events = proxy.store.read_exchange(ex.id)
    assert [bytes(e.payload) for e in events] == got  # the exact bytes, in order
    task_id = store.decode_item(got[0]).task_id
    assert ex.task_id == task_id and all(e.task_id == task_id for e in events)
    assert [e.seq for e in events] == list(range(1, 7))
    assert store.decode_item(events[-1].payload).body.state == "completed"


@pytest.mark.parametrize("dialect", ["0.3", "1.0"])
def test_non_streaming_send_and_get_are_recorded(proxied, dialect):
    agent, proxy = proxied
    body, headers = send_body("hello", dialect=dialect, stream=False)
    r = httpx.post(proxy.url + "/", content=body, headers=headers)
    assert r.status_code == 200
    item = store.decode_item(r.content)
    assert isinstance(item.body, store.TaskSnapshot) and item.dialect == dialect
    gbody, gheaders = get_body(item.task_id, dialect)
    g = httpx.post(proxy.url + "/", content=gbody, headers=gheaders)
    assert store.decode_item(g.content).body.state == "completed"
    stored = [bytes(e.payload) for e in proxy.store.read_task(item.task_id)]
    assert stored == [r.content, g.content]
    rows = {e.rpc_method: e for e in proxy.store.exchanges()}
    assert rows[("SendMessage" if dialect == "1.0" else "message/send")].outcome == "ok"


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_sixteen_concurrent_streams_all_recorded(sdk_agent, db_path, durability):
    with running_proxy(sdk_agent.url, db_path, durability=durability) as proxy:
        _sixteen_streams(sdk_agent, proxy)


def _sixteen_streams(agent, proxy):
    watch = SettleWatch(proxy.proxy)

    async def one(client: httpx.AsyncClient, i: int, results: dict) -> None:
        body, headers = send_body(f"many 25 #{i}", dialect="1.0" if i % 2 else "0.3")
        async with client.stream("POST", proxy.url + "/", content=body, headers=headers) as r:
            results[i] = await aread_sse(r)

    async def main() -> dict:
        results: dict[int, list[bytes]] = {}
        async with httpx.AsyncClient(timeout=30) as client:
            async with anyio.create_task_group() as tg:
                for i in range(16):
                    tg.start_soon(one, client, i, results)
        return results

    results = anyio.run(main)
    watch.wait(16)
    assert agent.executor.executions == 16
    assert proxy.store.count_events() == 16 * 28
    for items in results.values():
        assert len(items) == 28
        task_id = store.decode_item(items[0]).task_id
        assert [bytes(e.payload) for e in proxy.store.read_task(task_id)] == items


def test_client_that_disconnects_early_still_gets_the_whole_task_recorded(db_path):
    from tests.conftest import running_sdk_agent

    with running_sdk_agent(slow_delay=0.05) as agent, running_proxy(agent.url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, headers = send_body("slow many 6")
        with httpx.stream("POST", proxy.url + "/", content=body, headers=headers) as r:
            first = read_sse(r, limit=1)  # then the client goes away
        watch.wait(1)
        task_id = store.decode_item(first[0]).task_id
        events = proxy.store.read_task(task_id)
        assert len(events) == 9  # task, working, 6 chunks, completed: read to the end after the drop
        assert store.decode_item(events[-1].payload).body.state == "completed"
        assert bytes(events[0].payload) == first[0]


def test_credentials_forwarded_but_never_stored(proxied, db_path):
    agent, proxy = proxied
    watch = SettleWatch(proxy.proxy)
    body, headers = send_body("hello", stream=False)
    secret = "s3cr3t-upstream-credential"
    r = httpx.post(
        proxy.url + "/", content=body, headers={**headers, "Authorization": f"Bearer {secret}", "X-API-Key": secret}
    )
    assert r.status_code == 200
    watch.wait(1)
    ex = [e for e in proxy.store.exchanges() if e.rpc_method][0]
    assert ex.request_headers["authorization"] == REDACTED and ex.request_headers["x-api-key"] == REDACTED
    raw = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert secret.encode() not in raw


@pytest.mark.parametrize("dialect", ["0.3", "1.0"])
def test_agent_error_mid_stream_is_recorded_on_its_task(proxied, dialect):
    agent, proxy = proxied
    watch = SettleWatch(proxy.proxy)
    body, headers = send_body("boom", dialect=dialect)
    with httpx.stream("POST", proxy.url + "/", content=body, headers=headers) as r:
        got = read_sse(r)
    watch.wait(1)
    task_id = store.decode_item(got[0]).task_id
    events = proxy.store.read_task(task_id)
    assert [bytes(e.payload) for e in events] == got
    assert isinstance(store.decode_item(events[-1].payload).body, store.ErrorItem)
    if dialect == "1.0":
        assert events[-1].sse_event == "error"  # the SSE event name is kept


def test_resubscribe_through_the_proxy_is_recorded_to_the_end_after_the_client_leaves(db_path):
    from tests.conftest import running_sdk_agent

    # chunks 0.3 s apart: the task is still working when the resubscribe arrives, even on a loaded
    # machine (at 0.05 s it had ended under a load of 10, and the resubscribe got no stream)
    with running_sdk_agent(slow_delay=0.3) as agent, running_proxy(agent.url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, headers = send_body("slow many 6")
        with httpx.stream("POST", agent.url + "/", content=body, headers=headers) as r:  # directly, not proxied
            task_id = store.decode_item(read_sse(r, limit=1)[0]).task_id
        resub = b'{"jsonrpc":"2.0","id":9,"method":"tasks/resubscribe","params":{"id":"%s"}}' % task_id.encode()
        with httpx.stream("POST", proxy.url + "/", content=resub, headers=headers) as r:
            first = read_sse(r, limit=1)  # the snapshot; then the client goes away
        watch.wait(1)
        events = proxy.store.read_task(task_id)
        assert bytes(events[0].payload) == first[0]
        assert isinstance(store.decode_item(events[0].payload).body, store.TaskSnapshot)
        assert store.decode_item(events[-1].payload).body.state == "completed"
        ex = [e for e in proxy.store.exchanges() if e.rpc_method == "tasks/resubscribe"][0]
        assert ex.outcome == "closed" and ex.task_id == task_id
