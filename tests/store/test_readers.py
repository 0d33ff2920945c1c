"""Reading the log: from a position (projections), one task, one exchange, per-task summary."""

from __future__ import annotations

import pytest

from a2a_tape.store import Exchange, NewEvent

from .payloads import v1_artifact


@pytest.fixture
def filled(st):
    """23 events of three tasks, interleaved, over two exchanges, arrival times 100.0 + position."""
    ex_a = st.begin_exchange(Exchange(url="http://a/", task_id="a"))
    ex_b = st.begin_exchange(Exchange(url="http://b/"))
    evs = []
    for i in range(23):
        task = "abc"[i % 3] if i != 22 else None
        ex = ex_a if task == "a" else ex_b
        evs.append(NewEvent(payload=v1_artifact(task or "-", i), task_id=task, exchange_id=ex, received_at=101.0 + i))
    st.append_batch(evs[:10])
    for e in evs[10:]:
        st.append(e)
    return st, ex_a, ex_b


@pytest.mark.parametrize(
    "start, limit, batch, expected",
    [
        (0, None, 5000, list(range(1, 24))),
        (0, None, 4, list(range(1, 24))),  # batches that do not divide the log
        (0, None, 1, list(range(1, 24))),
        (5, 7, 3, list(range(6, 13))),
        (5, 7, 100, list(range(6, 13))),
        (20, 10, 2, [21, 22, 23]),
        (23, None, 5, []),
        (0, 0, 5, []),
        (99, None, 5, []),
    ],
)
def test_read_from_position(filled, start, limit, batch, expected):
    st, _, _ = filled
    got = list(st.read_from(start, limit=limit, batch=batch))
    assert [e.position for e in got] == expected


def test_read_from_sees_events_appended_between_batches(filled):
    """A projection catching up while the recorder appends: nothing is skipped or repeated."""
    st, _, _ = filled
    seen = []
    for e in st.read_from(0, batch=5):
        seen.append(e.position)
        if e.position == 7:
            st.append(NewEvent(payload=b"late", task_id="z"))
    assert seen == list(range(1, 25))


def test_read_task_in_log_order(filled):
    st, _, _ = filled
    for t in "abc":
        evs = st.read_task(t)
        assert [e.position for e in evs] == sorted(e.position for e in evs)
        assert [e.seq for e in evs] == list(range(1, len(evs) + 1))
        assert {e.task_id for e in evs} == {t}
    assert len(st.read_task("a")) == 8 and len(st.read_task("b")) == 7 and len(st.read_task("c")) == 7
    assert st.read_task("nope") == []


def test_read_exchange(filled):
    st, ex_a, ex_b = filled
    a = st.read_exchange(ex_a)
    b = st.read_exchange(ex_b)
    assert {e.task_id for e in a} == {"a"}
    assert {e.task_id for e in b} == {"b", "c", None}
    assert len(a) + len(b) == 23
    assert [e.position for e in b] == sorted(e.position for e in b)
    assert st.read_exchange(12345) == []


def test_task_events_summary(filled):
    st, _, _ = filled
    summary = {t.task_id: t for t in st.task_events()}
    assert [t.task_id for t in st.task_events()] == ["a", "b", "c"]  # order of first event
    assert None not in summary  # task-less events belong to their exchange, not to a task
    a = summary["a"]
    assert (a.events, a.first_position, a.last_position) == (8, 1, 22)
    assert (a.first_at, a.last_at) == (101.0, 122.0)
    assert summary["c"].events == 7


def test_exchanges_round_trip(st):
    ex = Exchange(
        started_at=1.5,
        url="http://x/",
        rpc_method="SendStreamingMessage",
        dialect="1.0",
        streaming=True,
        request_headers={"A2A-Version": "1.0"},
        request_body=b"\xff{}",
        status=200,
        content_type="text/event-stream",
        task_id="t",
        role="proxy",
    )
    ex_id = st.begin_exchange(ex)
    st.update_exchange(ex_id, outcome="dropped", ended_at=2.5, response_headers={"x": "y"})
    got = st.get_exchange(ex_id)
    assert got.id == ex_id and got.request_body == b"\xff{}" and got.request_headers == {"A2A-Version": "1.0"}
    assert (got.outcome, got.ended_at, got.response_headers, got.streaming, got.role) == (
        "dropped",
        2.5,
        {"x": "y"},
        True,
        "proxy",
    )
    assert st.get_exchange(ex_id + 1) is None
    assert [e.id for e in st.exchanges("t")] == [ex_id]
