"""The store's smaller readers and registries: narrow fold reader, exchange paging, prefixes,
idempotency release, projection rows paged by key."""

from __future__ import annotations

import pytest

from store import Exchange, IdempotencyRecord, NewEvent


@pytest.fixture
def log(st):
    ex = st.begin_exchange(Exchange(url="http://a/"))
    other = st.begin_exchange(Exchange(url="http://b/"))
    st.append_batch(
        [
            NewEvent(payload=b"p%d" % i, task_id=("task-a%d" % (i % 3)) if i != 4 else None,
                     exchange_id=ex if i % 2 == 0 else other, received_at=100.0 + i)
            for i in range(11)
        ]
    )
    return st, ex, other


@pytest.mark.parametrize("start, batch", [(0, 5000), (0, 3), (0, 1), (4, 4), (11, 2)])
def test_read_fold_rows_is_read_from_in_six_columns(log, start, batch):
    st, _, _ = log
    rows = [r for b in st.read_fold_rows(start, batch=batch) for r in b]
    expected = [(e.position, e.task_id, e.seq, e.exchange_id, e.received_at, e.payload) for e in st.read_from(start)]
    assert [tuple(r) for r in rows] == expected
    assert all(len(b) <= batch for b in st.read_fold_rows(start, batch=batch))


@pytest.mark.parametrize("batch", [1, 2, 5000])
def test_iter_exchange_pages_like_read_exchange(log, batch):
    st, ex, other = log
    for x in (ex, other):
        assert list(st.iter_exchange(x, batch=batch)) == st.read_exchange(x)
    assert list(st.iter_exchange(999, batch=batch)) == []


def test_task_ids_with_prefix(log):
    st, _, _ = log
    assert st.task_ids_with_prefix("task-a") == ["task-a0", "task-a1", "task-a2"]
    assert st.task_ids_with_prefix("task-a1") == ["task-a1"]
    assert st.task_ids_with_prefix("zzz") == []


def test_idem_release_frees_the_key(st):
    rec = IdempotencyRecord(key="m1", request_hash="h1", exchange_id=None, created_at=1000.0)
    st.idem_claim(rec)
    st.idem_release("m1")
    assert st.idem_get("m1", now=1001.0) is None
    held, claimed = st.idem_claim(IdempotencyRecord(key="m1", request_hash="h2", exchange_id=None, created_at=1002.0))
    assert claimed and held.request_hash == "h2"
    st.idem_release("never-claimed")  # no error


@pytest.mark.parametrize("batch", [1, 2, 3, 500])
def test_projection_rows_paged_by_key(st, batch):
    rows = {f"k{i:02d}": bytes([i]) for i in range(7)}
    st.projection_commit("p", 7, rows)
    st.projection_commit("q", 1, {"k00": b"other"})
    assert list(st.projection_rows("p", batch=batch)) == sorted(rows.items())


@pytest.mark.parametrize("parts", [2, 3])
def test_read_fold_rows_partitions_cover_the_log_once(backend, parts):
    """Every row with a task lands in exactly one partition (the rule of store.rows.partition_of,
    applied in SQL), rows without a task in all of them, and ``upto`` stops the read."""
    from store import NewEvent
    from store.rows import partition_of

    st = backend.open()
    tasks = ["a", "b", "c", "task-é", "t\u4e2d", "", "x9", "Z"]
    st.append_batch([NewEvent(payload=f"{i}".encode(), task_id=t) for i, t in enumerate(tasks * 3)])
    ex = st.begin_exchange(Exchange(url="u"))
    st.append(NewEvent(payload=b"no task", exchange_id=ex))
    everything = [tuple(r) for b in st.read_fold_rows(0) for r in b]
    seen: list[tuple] = []
    for k in range(parts):
        rows = [tuple(r) for b in st.read_fold_rows(0, batch=4, partition=(k, parts)) for r in b]
        assert all(r[1] is None or partition_of(r[1], parts) == k for r in rows)
        assert [r for r in rows if r[1] is None] == [r for r in everything if r[1] is None]
        seen += [r for r in rows if r[1] is not None]
    assert sorted(seen) == sorted(r for r in everything if r[1] is not None)
    assert [r[0] for b in st.read_fold_rows(0, upto=5) for r in b] == [1, 2, 3, 4, 5]
