"""Appending to the event log: positions, per-task sequence numbers, idempotency, atomicity."""

from __future__ import annotations

import pytest

from a2a_tape.store import AppendConflict, Exchange, NewEvent

from .payloads import v1_artifact, v1_status


def test_positions_are_gap_free_and_increasing_across_batches(st):
    stored = []
    for b in range(3):
        stored += st.append_batch(
            [NewEvent(payload=v1_artifact(f"t{i % 2}", b * 10 + i), task_id=f"t{i % 2}") for i in range(5)]
        )
    stored.append(st.append(NewEvent(payload=v1_status("t0"), task_id="t0")))
    positions = [e.position for e in stored]
    assert positions == list(range(1, 17))
    assert [e.position for e in st.read_from(0)] == positions
    assert st.last_position() == 16


def test_seq_is_assigned_per_task_from_one(st):
    evs = [NewEvent(payload=v1_artifact(t, n), task_id=t) for n in range(4) for t in ("a", "b", "c")]
    st.append_batch(evs[:5])
    st.append_batch(evs[5:])
    for t in ("a", "b", "c"):
        task = st.read_task(t)
        assert [e.seq for e in task] == [1, 2, 3, 4]
        assert [e.payload for e in task] == [v1_artifact(t, n) for n in range(4)]


def test_events_without_task_are_keyed_per_exchange(st):
    ex1 = st.begin_exchange(Exchange(url="http://a/", rpc_method="SendStreamingMessage"))
    ex2 = st.begin_exchange(Exchange(url="http://b/", rpc_method="message/stream"))
    err = b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32009, "message": "version"}}'
    a = st.append_batch([NewEvent(payload=err, exchange_id=ex1), NewEvent(payload=err, exchange_id=ex2)])
    b = st.append_batch([NewEvent(payload=err + b" ", exchange_id=ex1)])
    assert [(e.exchange_id, e.seq, e.task_id) for e in a + b] == [(ex1, 1, None), (ex2, 1, None), (ex1, 2, None)]
    # a task's numbering is independent of the exchange's
    t = st.append(NewEvent(payload=v1_status("t1"), task_id="t1", exchange_id=ex1))
    assert t.seq == 1
    assert [e.seq for e in st.read_exchange(ex1)] == [1, 2, 1]


def test_same_key_same_bytes_is_a_noop_returning_the_stored_row(st):
    first = st.append_batch([NewEvent(payload=v1_artifact("t", n), task_id="t") for n in range(3)])
    again = st.append_batch([NewEvent(payload=v1_artifact("t", 1), task_id="t", seq=2, received_at=99.0)])
    assert again == [first[1]]  # the stored row, not the retry's fields
    assert st.count_events() == 3
    # a batch mixing a replayed event and a new one stores only the new one
    mixed = st.append_batch(
        [
            NewEvent(payload=v1_artifact("t", 2), task_id="t", seq=3),
            NewEvent(payload=v1_artifact("t", 3), task_id="t"),
        ]
    )
    assert mixed[0] == first[2]
    assert (mixed[1].seq, mixed[1].position) == (4, 4)
    assert st.count_events() == 4


def test_same_key_other_bytes_conflicts_and_writes_nothing_of_the_batch(st):
    st.append_batch([NewEvent(payload=v1_artifact("t", n), task_id="t") for n in range(2)])
    before = list(st.read_from(0))
    batch = [
        NewEvent(payload=v1_artifact("u", 0), task_id="u"),
        NewEvent(payload=v1_artifact("t", 5), task_id="t"),
        NewEvent(payload=v1_artifact("t", 99), task_id="t", seq=1),  # seq 1 holds chunk-0
    ]
    with pytest.raises(AppendConflict, match="task t seq 1"):
        st.append_batch(batch)
    assert list(st.read_from(0)) == before
    assert st.read_task("u") == []
    # and the store still works afterwards, with the same numbering
    nxt = st.append(NewEvent(payload=v1_artifact("t", 2), task_id="t"))
    assert (nxt.position, nxt.seq) == (3, 3)


def test_a_batch_fails_as_a_whole(st):
    """An event that cannot be stored (bad origin) takes its whole batch with it."""
    st.append(NewEvent(payload=b"{}", task_id="t"))
    with pytest.raises(Exception):
        st.append_batch(
            [NewEvent(payload=b"{}", task_id="t"), NewEvent(payload=b"{}", task_id="t", origin="elsewhere")]  # type: ignore[arg-type]
        )
    assert st.count_events() == 1
    assert st.append(NewEvent(payload=b"{}", task_id="t")).seq == 2


def test_explicit_seq_leaves_room_and_later_seqs_continue_after_it(st):
    st.append(NewEvent(payload=b"a", task_id="t", seq=5))
    nxt = st.append(NewEvent(payload=b"b", task_id="t"))
    assert nxt.seq == 6


def test_same_key_twice_in_one_batch(st):
    """A retry inside one batch: same bytes stores it once, other bytes is a conflict."""
    p = v1_artifact("t", 0)
    out = st.append_batch([NewEvent(payload=p, task_id="t", seq=1), NewEvent(payload=p, task_id="t", seq=1)])
    assert out[0] == out[1]
    assert st.count_events() == 1
    with pytest.raises(AppendConflict):
        st.append_batch([NewEvent(payload=b"x", task_id="t", seq=2), NewEvent(payload=b"y", task_id="t", seq=2)])
    assert st.count_events() == 1


@pytest.mark.parametrize(
    "payload",
    [
        b"\xff\xfe\x00not utf-8\x80",
        b"nul\x00inside\x00",
        b'{"result": {}}\r\n',
        b"\r\n\r\n",
        b"",
        "caf\u00e9 \U0001f600".encode(),
        bytes(range(256)),
    ],
    ids=["non-utf8", "nul", "crlf-json", "crlf-only", "empty", "utf8-multibyte", "all-bytes"],
)
def test_payload_bytes_are_kept_exactly(st, payload):
    ex = st.begin_exchange(Exchange(url="http://x/"))
    stored = st.append(NewEvent(payload=payload, task_id="t", exchange_id=ex, sse_event="error"))
    assert stored.payload == payload
    for got in (st.read_task("t")[0], next(st.read_from(0)), st.read_exchange(ex)[0]):
        assert type(got.payload) is bytes and got.payload == payload
    # and the same bytes again are recognised as the same event
    assert st.append(NewEvent(payload=payload, task_id="t", seq=1)).position == stored.position


def test_event_fields_round_trip(st):
    ex = st.begin_exchange(Exchange(url="http://x/"))
    ev = NewEvent(
        payload=b"p",
        task_id="t",
        exchange_id=ex,
        sse_event="error",
        received_at=1796000000.123456,
        mono=0.25,
        origin="local",
    )
    stored = st.append(ev)
    got = st.read_task("t")[0]
    assert got == stored
    assert (got.exchange_id, got.sse_event, got.received_at, got.mono, got.origin) == (
        ex,
        "error",
        1796000000.123456,
        0.25,
        "local",
    )


def test_explicit_seq_matching_an_auto_seq_of_the_same_batch(st):
    out = st.append_batch([NewEvent(payload=b"a", task_id="t"), NewEvent(payload=b"a", task_id="t", seq=1)])
    assert out[0] == out[1] and st.count_events() == 1
    with pytest.raises(AppendConflict):
        st.append_batch([NewEvent(payload=b"b", task_id="t"), NewEvent(payload=b"c", task_id="t", seq=2)])
    assert st.count_events() == 1


def test_two_batches_in_one_outer_transaction(st):
    """Batches staged inside one outer transaction (as recovery does) are stored once each."""
    with st.transaction():
        a = st.append_batch([NewEvent(payload=b"a1", task_id="t"), NewEvent(payload=b"a2", task_id="t")])
        b = st.append_batch([NewEvent(payload=b"b1", task_id="t"), NewEvent(payload=b"b2", task_id="u")])
    assert [(e.position, e.task_id, e.seq) for e in a + b] == [(1, "t", 1), (2, "t", 2), (3, "t", 3), (4, "u", 1)]
    assert [bytes(e.payload) for e in st.read_from(0)] == [b"a1", b"a2", b"b1", b"b2"]


@pytest.mark.parametrize("size", [1, 2, 3, 63, 64, 65, 127, 200, 1000])
def test_batches_of_any_size_keep_order_positions_and_bytes(st, size):
    """SQLite writes a batch many rows per statement (blocks of 64, the rest in powers of two):
    whatever the size, every row is there once, in order, with its own bytes and seq."""
    st.append(NewEvent(payload=b"before", task_id="t0"))
    evs = [
        NewEvent(
            payload=f"p{i}".encode() + bytes([i % 256]),
            task_id=f"t{i % 3}",
            sse_event=None if i % 5 else "message",
            received_at=float(i),
            mono=i / 10 if i % 2 else None,
            origin="local" if i % 7 == 0 else "upstream",
        )
        for i in range(size)
    ]
    stored = st.append_batch(evs)
    assert [e.position for e in stored] == list(range(2, size + 2))
    back = list(st.read_from(1))
    assert back == stored
    assert [(e.payload, e.task_id, e.sse_event, e.received_at, e.mono, e.origin) for e in back] == [
        (e.payload, e.task_id, e.sse_event, e.received_at, e.mono, e.origin) for e in evs
    ]
    seqs: dict[str, int] = {"t0": 1}
    for e in back:
        seqs[e.task_id] = seqs.get(e.task_id, 0) + 1
        assert e.seq == seqs[e.task_id]
