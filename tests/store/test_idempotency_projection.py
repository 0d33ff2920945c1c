"""Idempotency records and projection cursors: the store's two small registries."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from a2a_tape import store
from a2a_tape.store import IdempotencyRecord, NewEvent


def rec(key="m1", h="h1", expires_at=None, created_at=1000.0):
    return IdempotencyRecord(key=key, request_hash=h, exchange_id=None, created_at=created_at, expires_at=expires_at)


def test_claim_then_second_claim_returns_the_held_record(st):
    held, claimed = st.idem_claim(rec())
    assert claimed and held.request_hash == "h1"
    held2, claimed2 = st.idem_claim(rec(h="h2", created_at=1001.0))
    assert not claimed2
    assert (held2.key, held2.request_hash, held2.state) == ("m1", "h1", "in_flight")
    assert st.idem_get("m1", now=1002.0).request_hash == "h1"
    assert st.idem_get("other", now=1002.0) is None


def test_update_marks_done_with_task(st):
    st.idem_claim(rec())
    st.idem_update("m1", task_id="t1", state="done")
    got = st.idem_get("m1", now=1001.0)
    assert (got.task_id, got.state, got.request_hash) == ("t1", "done", "h1")


def test_expired_record_is_not_held(st):
    st.idem_claim(rec(expires_at=1010.0))
    assert st.idem_get("m1", now=1005.0) is not None
    assert st.idem_get("m1", now=1010.0) is None  # expiry is exclusive
    held, claimed = st.idem_claim(rec(h="h2", created_at=1020.0, expires_at=1030.0))
    assert claimed and st.idem_get("m1", now=1021.0).request_hash == "h2"


def test_idem_expire_deletes_only_expired(st):
    st.idem_claim(rec("a", expires_at=1010.0))
    st.idem_claim(rec("b", expires_at=2000.0))
    st.idem_claim(rec("c"))  # never expires
    assert st.idem_expire(now=1500.0) == 1
    assert sorted(r.key for r in st.idem_all()) == ["b", "c"]


def test_projection_rows_and_cursor_commit_together(st):
    assert st.projection_cursor("tasks") == 0
    assert st.projection_commit("tasks", 10, {"t1": b"one", "t2": b"two"})
    assert st.projection_cursor("tasks") == 10
    assert list(st.projection_rows("tasks")) == [("t1", b"one"), ("t2", b"two")]
    assert st.projection_load("tasks", ["t2", "nope"]) == {"t2": b"two"}
    # projections are separate by name
    assert st.projection_cursor("channels") == 0 and list(st.projection_rows("channels")) == []


def test_projection_commit_expect_is_compare_and_set(st):
    st.projection_commit("p", 10, {"k": b"v10"})
    assert not st.projection_commit("p", 20, {"k": b"v20", "k2": b"x"}, expect=5)
    assert st.projection_cursor("p") == 10 and dict(st.projection_rows("p")) == {"k": b"v10"}
    assert st.projection_commit("p", 20, {"k": b"v20"}, expect=10)
    assert st.projection_cursor("p") == 20 and dict(st.projection_rows("p")) == {"k": b"v20"}
    assert st.projection_commit("fresh", 3, {}, expect=0)  # no cursor yet counts as 0


def test_failed_projection_commit_moves_neither_rows_nor_cursor(st):
    st.projection_commit("p", 10, {"k": b"v10"})
    with pytest.raises(Exception):
        st.projection_commit("p", 20, {"k": b"v20", "bad": None})  # type: ignore[dict-item]
    assert st.projection_cursor("p") == 10 and dict(st.projection_rows("p")) == {"k": b"v10"}


def test_projection_reset(st):
    st.projection_commit("p", 10, {"k": b"v"})
    st.projection_commit("q", 4, {"k": b"w"})
    st.projection_reset("p")
    assert st.projection_cursor("p") == 0 and list(st.projection_rows("p")) == []
    assert st.projection_cursor("q") == 4 and list(st.projection_rows("q")) == [("k", b"w")]
    st.projection_reset("q")  # the only projection left: every row goes
    assert st.projection_cursor("q") == 0 and list(st.projection_rows("q")) == []


def _race(stores: list[store.Store], attempt: Callable[[store.Store], bool]) -> int:
    """Every store (a connection of its own) attempts at once; how many won."""
    barrier = threading.Barrier(len(stores))
    wins: list[bool] = []

    def run(st: store.Store) -> None:
        barrier.wait(10)
        wins.append(attempt(st))

    threads = [threading.Thread(target=run, args=(st,)) for st in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(wins) == len(stores)
    return sum(wins)


@pytest.mark.parametrize(
    "attempt",
    [
        lambda st: st.projection_commit("p", 1, {"k": b"v"}, expect=0),
        lambda st: st.search_commit(1, [(1, 0, None, 1, "artifact", "a", "text")], expect=0),
        lambda st: st.findings_commit(1, [("t", 1, 1, 0, 0, b"\x90")], expect=0),
        lambda st: st.idem_claim(rec(expires_at=9e9))[1],
    ],
    ids=["projection", "search", "findings", "idempotency key"],
)
def test_a_guarded_commit_raced_by_several_connections_has_one_winner(backend, attempt):
    """Compare-and-set across connections (processes, hosts): of several writers that all saw the
    cursor at 0 (or the key free), exactly one commits. SQLite's write lock makes them take turns;
    PostgreSQL's transactions would not (each may read the old cursor before the other commits):
    its advisory lock on the name does."""
    stores = [backend.open() for _ in range(6)]
    assert _race(stores, attempt) == 1


def test_transaction_is_all_or_nothing(st):
    st.append(NewEvent(payload=b"a", task_id="t"))
    with pytest.raises(RuntimeError):
        with st.transaction():
            st.append_batch([NewEvent(payload=b"b", task_id="t"), NewEvent(payload=b"c", task_id="u")])
            st.projection_commit("p", 3, {"k": b"v"})
            raise RuntimeError("abort")
    assert st.count_events() == 1 and st.projection_cursor("p") == 0
    with st.transaction():
        st.append(NewEvent(payload=b"b", task_id="t"))
        st.projection_commit("p", 2, {"k": b"v"})
    assert st.count_events() == 2 and st.projection_cursor("p") == 2


def test_reopening_keeps_everything(backend):
    st = backend.open()
    st.append_batch([NewEvent(payload=bytes([i]) * 3, task_id=f"t{i % 2}") for i in range(6)])
    st.idem_claim(rec())
    st.projection_commit("p", 6, {"k": b"v"})
    before = list(st.read_from(0))
    st.close()
    again = backend.open()
    assert list(again.read_from(0)) == before
    assert again.idem_get("m1", now=1001.0).request_hash == "h1"
    assert again.projection_cursor("p") == 6
    assert again.append(NewEvent(payload=b"n", task_id="t0")).seq == 4
