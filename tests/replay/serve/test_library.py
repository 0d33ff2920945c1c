"""The library behind the replay: what it reads from a recording, and the store's batched read."""

from __future__ import annotations

from a2a_tape import store
from a2a_tape.replay.serve.library import Library
from a2a_tape.store import Exchange, NewEvent
from a2a_tape.wire.sse_frames import rewrite_id


def test_batched_exchange_read_and_served_items_match_the_log(db_path):
    st = store.open_store(db_path)
    ex = st.begin_exchange(
        Exchange(
            rpc_method="SendStreamingMessage",
            dialect="1.0",
            streaming=True,
            request_body=b'{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{}}',
        )
    )
    other = st.begin_exchange(Exchange(rpc_method="SendStreamingMessage", dialect="1.0", streaming=True))
    payloads = [
        b'{"result": {"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}}, "id": 1, "jsonrpc": "2.0"}',
        b'{"id":1,"jsonrpc":"2.0","result":{"kind":"task","id":"t"}}',
        b"not json at all",
        b'{"result": {"task": {"id": 1}}, "id": 1, "jsonrpc": "2.0"}',
    ]
    for i in range(11):  # interleaved with another exchange, one local note among them
        st.append(NewEvent(payload=payloads[i % 4], task_id="t", exchange_id=ex, mono=i * 0.1))
        st.append(NewEvent(payload=b"{}", task_id="u", exchange_id=other))
    st.append(NewEvent(payload=store.local_note("resubscribed"), task_id="t", exchange_id=ex, origin="local"))
    expected = st.read_exchange(ex)
    assert [e.position for e in st.iter_exchange(ex, batch=3)] == [e.position for e in expected]
    assert list(st.iter_exchange(12345, batch=3)) == []
    st.close()

    lib = Library.open(db_path)
    try:
        ep = [e for e in lib.episodes if e.id == ex][0]
        served = ep.served
        assert [s.position for s in served] == [e.position for e in expected if e.origin == "upstream"]
        assert all(s.payload(b'"q"') == rewrite_id(s.recorded, "q") for s in served)
        assert served[2].payload(b'"q"') == b"not json at all"
        assert [round(s.gap, 6) for s in served[:3]] == [0.0, 0.1, 0.1]
        frames = b"".join(b for batch in ep.iter_frames(b'"q"', batch=4) for b in batch)
        assert frames == b"".join(s.frame(b'"q"') for s in served)
    finally:
        lib.close()


def test_agent_card_is_the_recorded_one_or_made_up(db_path):
    """A recording without a card still answers the card request, with both dialects on our URL."""
    import httpx

    from a2a_tape.replay.serve.engine import ReplayEngine
    from a2a_tape.replay.serve.transport import ReplayTransport

    st = store.open_store(db_path)
    st.begin_exchange(
        Exchange(
            rpc_method="SendMessage",
            dialect="1.0",
            request_body=b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}',
        )
    )
    st.close()
    lib = Library.open(db_path)
    try:
        with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(lib))) as c:
            card = c.get("http://replay.test:9/.well-known/agent-card.json").json()
    finally:
        lib.close()
    assert card["name"] == "a2a-tape replay" and card["capabilities"]["streaming"] is True
    assert [(i["protocolBinding"], i["protocolVersion"], i["url"]) for i in card["supportedInterfaces"]] == [
        ("JSONRPC", "1.0", "http://replay.test:9/"),
        ("JSONRPC", "0.3", "http://replay.test:9/"),
        ("HTTP+JSON", "1.0", "http://replay.test:9"),
    ]
