"""The store's smaller readers and registries: narrow fold reader, exchange and task paging, prefixes,
idempotency release, projection rows paged by key."""

from __future__ import annotations

import pytest

from a2a_tape.store import Exchange, IdempotencyRecord, NewEvent


@pytest.fixture
def log(st):
    ex = st.begin_exchange(Exchange(url="http://a/"))
    other = st.begin_exchange(Exchange(url="http://b/"))
    st.append_batch(
        [
            NewEvent(
                payload=b"p%d" % i,
                task_id=("task-a%d" % (i % 3)) if i != 4 else None,
                exchange_id=ex if i % 2 == 0 else other,
                received_at=100.0 + i,
                origin="local" if i == 7 else "upstream",  # the fold must know our own events
            )
            for i in range(11)
        ]
    )
    return st, ex, other


@pytest.mark.parametrize("start, batch", [(0, 5000), (0, 3), (0, 1), (4, 4), (11, 2)])
def test_read_fold_rows_is_read_from_in_seven_columns(log, start, batch):
    st, _, _ = log
    rows = [r for b in st.read_fold_rows(start, batch=batch) for r in b]
    expected = [
        (e.position, e.task_id, e.seq, e.exchange_id, e.received_at, e.payload, e.origin) for e in st.read_from(start)
    ]
    assert [tuple(r) for r in rows] == expected
    assert all(len(b) <= batch for b in st.read_fold_rows(start, batch=batch))


@pytest.mark.parametrize("batch", [1, 2, 5000])
def test_iter_exchange_pages_like_read_exchange(log, batch):
    st, ex, other = log
    for x in (ex, other):
        assert list(st.iter_exchange(x, batch=batch)) == st.read_exchange(x)
    assert list(st.iter_exchange(999, batch=batch)) == []


@pytest.mark.parametrize("batch", [1, 2, 5000])
def test_iter_task_pages_like_read_task(log, batch):
    st, _, _ = log
    for t in ("task-a0", "task-a1", "task-a2"):
        whole = st.read_task(t)
        assert list(st.iter_task(t, batch=batch)) == whole
        for k, ev in enumerate(whole):  # after any of its positions, at most limit
            assert list(st.iter_task(t, after=ev.position, batch=batch)) == whole[k + 1 :]
            assert list(st.iter_task(t, after=ev.position, limit=1, batch=batch)) == whole[k + 1 : k + 2]
    assert list(st.iter_task("no-such-task", batch=batch)) == []


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


@pytest.mark.parametrize("parts", [2, 3, 5])
def test_read_fold_rows_task_ranges_cover_the_log_once(backend, parts):
    """The store cuts the tasks into ranges (store.paging.split_ranges over a sample of the log);
    every row with a task lands in exactly one range, compared in Python's order (non-ASCII ids
    too: PostgreSQL must not sort by locale), rows without a task in all of them, and ``upto``
    stops the read."""
    from a2a_tape.store import NewEvent
    from a2a_tape.store.paging import in_range

    st = backend.open()
    tasks = ["a", "b", "c", "task-é", "t\u4e2d", "", "x9", "Z", "ß", "B", "_", "\U0001f600"]
    st.append_batch([NewEvent(payload=f"{i}".encode(), task_id=t) for i, t in enumerate(tasks * 3)])
    ex = st.begin_exchange(Exchange(url="u"))
    st.append(NewEvent(payload=b"no task", exchange_id=ex))
    everything = [tuple(r) for b in st.read_fold_rows(0) for r in b]
    ranges = st.task_ranges(parts)
    assert len(ranges) == parts and ranges[0][0] is None and ranges[-1][1] is None
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # contiguous
    seen: list[tuple] = []
    for rng in ranges:
        rows = [tuple(r) for b in st.read_fold_rows(0, batch=4, tasks=rng) for r in b]
        assert all(r[1] is None or in_range(r[1], rng) for r in rows)
        assert [r for r in rows if r[1] is None] == [r for r in everything if r[1] is None]
        seen += [r for r in rows if r[1] is not None]
    assert sorted(seen) == sorted(r for r in everything if r[1] is not None)
    assert [r[0] for b in st.read_fold_rows(0, upto=5) for r in b] == [1, 2, 3, 4, 5]


def test_task_ranges_balance_events_not_tasks(backend):
    """One task with most of the events gets a range of its own; an empty log is one range."""
    from a2a_tape.store import NewEvent

    st = backend.open()
    assert st.task_ranges(3) == [(None, None)]
    st.append_batch([NewEvent(payload=b"x", task_id="m-big") for _ in range(300)])
    st.append_batch([NewEvent(payload=b"x", task_id=f"t-{i:02d}") for i in range(30) for _ in range(3)])
    st.append_batch([NewEvent(payload=b"x", task_id=f"a-{i:02d}") for i in range(30) for _ in range(3)])
    ranges = st.task_ranges(3)
    big = [r for r in ranges if r[0] is not None and r[0] <= "m-big" and (r[1] is None or "m-big" < r[1])]
    assert big and big[0][0] == "m-big"  # the big task starts a range: the a-* tasks are not with it
    assert st.task_ranges(2, upto=300) == [(None, None)]  # only one task up to there: nothing to split


@pytest.mark.parametrize("parts,lead", [(2, 0.0), (2, 0.2), (3, 0.1), (4, 0.0)])
def test_split_ranges_shares(parts, lead):
    """Equal shares of the sample, the first one ``lead`` larger; ranges are contiguous."""
    from a2a_tape.store.paging import in_range, split_ranges

    sample = [f"t{i:04d}" for i in range(1000)]
    ranges = split_ranges(sample, parts, lead)
    counts = [sum(in_range(t, r) for t in sample) for r in ranges]
    assert sum(counts) == 1000 and len(ranges) == parts
    first = 1000 * (1 / parts + lead)
    assert abs(counts[0] - first) <= 2
    assert all(abs(c - (1000 - first) / (parts - 1)) <= 2 for c in counts[1:])
