"""The index projections' store methods (issue 14), on every backend: the task index pages newest
first with its filters, search rows and findings rows move with their cursor in one transaction
(and not at all when the cursor moved meanwhile)."""

from __future__ import annotations

import pytest

from a2a_tape.store import NewEvent


def test_task_index_pages_newest_first_with_filters_and_counts(st):
    rows = [
        (f"t{i}", 10 * i, 1000.0 + i, "completed" if i % 2 else "working", "ctx" if i < 3 else None) for i in range(6)
    ]
    with st.transaction():
        st.task_index_upsert("tasks", rows[:4])
        st.task_index_upsert("tasks", rows[3:])  # t3 again: an update in place
        st.task_index_upsert("other", [("x", 1, 1.0, "working", None)])
    assert st.task_index_page("tasks", limit=3) == [("t5", 50), ("t4", 40), ("t3", 30)]
    assert st.task_index_page("tasks", limit=3, before=30) == [("t2", 20), ("t1", 10), ("t0", 0)]
    assert st.task_index_count("tasks") == 6 and st.task_index_count("other") == 1
    assert [k for k, _ in st.task_index_page("tasks", limit=9, states=["completed"])] == ["t5", "t3", "t1"]
    assert [k for k, _ in st.task_index_page("tasks", limit=9, context="ctx", states=["working"])] == ["t2", "t0"]
    assert st.task_index_count("tasks", since=1004.0) == 2 and st.task_index_count("tasks", states=[]) == 0
    st.task_index_upsert("tasks", [("t0", 60, 1006.0, "failed", None)])
    assert st.task_index_page("tasks", limit=1) == [("t0", 60)]
    st.task_index_reset("tasks")
    assert st.task_index_count("tasks") == 0 and st.task_index_count("other") == 1


def test_search_rows_move_with_their_cursor(st):
    rows = [
        (1, 0, "t1", 1, "artifact", "artifact a", "Hello Zebrafish world"),
        (1, 1, "t1", 1, "artifact", "artifact a name", "out"),
        (2, 0, "t2", 1, "status", "status message", "a zebrafish again"),
    ]
    assert st.search_commit(1, rows[:2], expect=0)
    assert not st.search_commit(2, rows[2:], expect=0)  # the cursor moved: nothing written
    assert st.projection_cursor("search") == 1
    assert st.search_commit(2, rows[2:], expect=1)
    assert list(st.search_match(None)) == rows
    assert [r[0] for r in st.search_match("zebrafish")] == [1, 2]  # a superset, case aside
    assert [r[0] for r in st.search_match("zebrafish", task_id="t2")] == [2]
    assert list(st.search_match("nowhere")) == []
    st.search_reset()
    assert list(st.search_match(None)) == [] and st.projection_cursor("search") == 0


def test_findings_rows_cursor_totals_and_unsettled(st):
    st.append_batch([NewEvent(payload=b"{}", task_id=t) for t in ("b", "a", "b", "c")])
    assert sorted(st.tasks_touched(0, 4)) == ["a", "b", "c"] and st.tasks_touched(2, 3) == ["b"]
    rows = [("b", 1, 1, 1, 1, b"\x92\x01\x02"), ("a", 2, 0, 0, 0, b"\x90"), ("c", 4, 1, 0, 2, b"\x90")]
    assert st.findings_commit(None, rows[:2], expect=0)  # rows without moving the cursor
    assert st.projection_cursor("doctor") == 0
    assert st.findings_commit(4, rows[2:], expect=0)
    assert not st.findings_commit(5, [], expect=0)
    assert st.projection_cursor("doctor") == 4
    assert st.findings_totals() == (3, 1, 3)
    assert st.findings_unsettled() == ["a"]
    assert [r[0] for r in st.findings_rows()] == ["b", "c"]
    assert list(st.findings_rows(faulty_only=False, batch=1)) == [rows[0], rows[1], rows[2]]
    assert (st.findings_counts("b"), st.findings_counts("c"), st.findings_counts("zz")) == ((1, 1), (0, 2), None)
    st.findings_reset()
    assert st.findings_totals() == (0, 0, 0) and st.projection_cursor("doctor") == 0


@pytest.mark.parametrize("text", ["zebra", "Zebrafish world"])
def test_search_finds_words_and_prefixes_on_both_backends(st, text):
    st.search_commit(1, [(1, 0, None, 1, "artifact", "artifact a", "Hello Zebrafish world")])
    assert [r[0] for r in st.search_match(text)] == [1]


def test_exchanges_open_within_a_window(st):
    from a2a_tape.store import Exchange

    def ex(start: float, end: float | None) -> int:
        return st.begin_exchange(Exchange(started_at=start, ended_at=end, url="http://127.0.0.1:1/", task_id="t"))

    before, across, inside, open_, after = ex(1.0, 2.0), ex(1.0, 6.0), ex(4.0, 5.0), ex(3.5, None), ex(7.0, 8.0)
    assert [e.id for e in st.exchanges_open_within(3.0, 6.5)] == [across, inside, open_]
    assert [e.id for e in st.exchanges_open_within(2.0, 2.0)] == [before, across]
    assert before not in {after}


def test_last_exchange_id(st):
    from a2a_tape.store import Exchange

    assert st.last_exchange_id() == 0
    ids = [st.begin_exchange(Exchange(started_at=float(k), url="http://127.0.0.1:1/")) for k in range(3)]
    assert st.last_exchange_id() == max(ids)


def test_exchanges_without_task(st):
    from a2a_tape.store import Exchange

    named = st.begin_exchange(Exchange(started_at=1.0, url="http://127.0.0.1:1/", task_id="t1"))
    lone = st.begin_exchange(Exchange(started_at=2.0, url="http://127.0.0.1:1/"))
    assert [ex.id for ex in st.exchanges_without_task()] == [lone] and named != lone
