"""The persisted projection: cursor and rows in one transaction, bounded cache, several readers."""

from __future__ import annotations

import pytest

from a2a_tape.fold.projection import Projector, encode_view, fold_events
from a2a_tape.store import NewEvent, open_store

from .builders import art03, oc, status03, task03


def _log(n_tasks: int, chunks: int = 3) -> list[NewEvent]:
    """Tasks streamed 4 at a time, interleaved, as a recorder sees them."""
    events: list[NewEvent] = []
    for base in range(0, n_tasks, 4):
        group = [f"task-{i:03d}" for i in range(base, min(base + 4, n_tasks))]
        for t in group:
            events.append(NewEvent(payload=task03(t, user="q"), task_id=t))
        for k in range(chunks):
            for t in group:
                events.append(
                    NewEvent(
                        payload=art03(t, f"{t}:stream", f"{t}/{k} ", append=k > 0, meta=oc("final_answer")), task_id=t
                    )
                )
        for t in group:
            events.append(NewEvent(payload=status03(t, "completed"), task_id=t))
    return events


def _views(proj: Projector) -> list[bytes]:
    return [encode_view(v) for v in proj.views()]


def test_catch_up_commits_cursor_and_rows_and_is_idempotent(db_path):
    with open_store(db_path) as st:
        st.append_batch(_log(10))
        proj = Projector(st)
        assert proj.catch_up() == st.last_position()
        assert st.projection_cursor("tasks") == st.last_position()
        assert proj.catch_up() == 0  # nothing new
        assert len(list(st.projection_rows("tasks"))) == 10
        view = proj.view("task-003")
        assert view is not None and view.final_answer == "task-003/0 task-003/1 task-003/2 "
        assert proj.view("no-such-task") is None


def test_small_cache_evicts_and_still_matches_the_pure_fold(db_path):
    with open_store(db_path) as st:
        st.append_batch(_log(40))
        proj = Projector(st, cache_size=2, commit_every=7)
        proj.catch_up()
        assert len(proj._cache) <= 2
        mem = fold_events(st.read_from(0))
        assert _views(proj) == [encode_view(mem[k]) for k in sorted(mem)]


def test_a_crash_between_commits_loses_nothing_and_applies_nothing_twice(db_path):
    """The second commit fails (as if the process died): the next run resumes from the first."""
    with open_store(db_path) as st:
        st.append_batch(_log(12))
        calls = 0
        real_commit = st.projection_commit

        def dying_commit(*a, **kw):
            nonlocal calls
            calls += 1
            if calls == 2:
                raise OSError("simulated crash")
            return real_commit(*a, **kw)

        st.projection_commit = dying_commit  # type: ignore[method-assign]
        with pytest.raises(OSError):
            Projector(st, commit_every=1).catch_up()
        st.projection_commit = real_commit  # type: ignore[method-assign]
        after_crash = st.projection_cursor("tasks")
        assert 0 < after_crash < st.last_position()
        Projector(st).catch_up()
        mem = fold_events(st.read_from(0))
        assert _views(Projector(st)) == [encode_view(mem[k]) for k in sorted(mem)]


def test_two_processes_folding_the_same_file_never_double_apply(db_path):
    with open_store(db_path) as a, open_store(db_path) as b:
        a.append_batch(_log(4))
        pa, pb = Projector(a), Projector(b)
        pa.catch_up()
        assert pb.catch_up() == 0  # b sees a's cursor
        b.append_batch(
            [
                NewEvent(
                    payload=art03("task-001", "task-001:stream", "+more", append=True, meta=oc("final_answer")),
                    task_id="task-001",
                )
            ]
        )
        pb.catch_up()
        # a's live folds are stale now; it must notice the moved cursor, not apply on top of old state
        a.append_batch(
            [
                NewEvent(
                    payload=art03("task-001", "task-001:stream", "+again", append=True, meta=oc("final_answer")),
                    task_id="task-001",
                )
            ]
        )
        pa.catch_up()
        view = pa.view("task-001")
        assert view is not None and view.final_answer.endswith("+more+again")
        mem = fold_events(a.read_from(0))
        assert _views(pa) == [encode_view(mem[k]) for k in sorted(mem)]


def test_rebuild_equals_incremental_byte_for_byte(db_path):
    with open_store(db_path) as st:
        log = _log(9)
        proj = Projector(st, cache_size=3, commit_every=5)
        for i in range(0, len(log), 11):
            st.append_batch(log[i : i + 11])
            proj.catch_up()
        incremental = _views(proj)
        proj.rebuild()
        assert _views(proj) == incremental


def test_rows_from_another_version_or_unreadable_are_rebuilt_from_the_log(db_path):
    with open_store(db_path) as st:
        st.append_batch(_log(4))
        Projector(st).catch_up()
        want = _views(Projector(st))
        # rows folded by another version of the rules: dropped and folded again
        st.set_meta("projection:tasks:version", "0")
        st.projection_commit("tasks", st.projection_cursor("tasks"), {"task-001": b"\x93stale"})
        assert Projector(st).catch_up() == st.last_position()
        assert _views(Projector(st)) == want
        # an unreadable row under the current version: same
        st.projection_commit("tasks", 3, {"task-002": b"\xc1 not msgpack"})
        Projector(st).catch_up()
        assert _views(Projector(st)) == want
        # ... even when no new event touches the unreadable row
        st.projection_commit("tasks", st.projection_cursor("tasks"), {"task-003": b"\xc1"})
        assert _views(Projector(st)) == want
        st.projection_commit("tasks", st.projection_cursor("tasks"), {"task-000": b"\xc1"})
        view = Projector(st).view("task-000")
        assert view is not None and encode_view(view) in want
