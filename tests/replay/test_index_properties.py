"""Hypothesis properties of the index projections (issue 14): the search index, doctor's
findings and the task index kept incrementally at any cut hold the same rows as rebuilt from
nothing; grep through the index finds exactly what the regex scan finds."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_tape.fold.projection import Projector
from a2a_tape.inspection.doctor import diagnose
from a2a_tape.inspection.doctor_index import DoctorIndex
from a2a_tape.inspection.grep import grep
from a2a_tape.inspection.listing import newest
from a2a_tape.inspection.search_index import SearchIndex
from a2a_tape.store import open_store

from .test_properties import _new, _tmpdir, log_events

SOME = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _task_index(st) -> list[tuple]:
    return st._conn.execute(
        "SELECT projection, key, last_position, last_at, state, context_id FROM task_index ORDER BY key"
    ).fetchall()


@SOME
@given(events=log_events, cut=st.integers(0, 40), every=st.integers(1, 7), chunk=st.integers(1, 3))
def test_index_projections_incremental_at_any_cut_equal_a_rebuild(events, cut, every, chunk):
    cut = min(cut, len(events))
    with _tmpdir() as tmp:
        with (
            open_store(Path(tmp) / "inc.db", durability="normal") as a,
            open_store(Path(tmp) / "full.db", durability="normal") as b,
        ):
            a.append_batch([_new(e) for e in events[:cut]])
            search, doctor, proj = (
                SearchIndex(a, commit_every=every),
                DoctorIndex(a, chunk=chunk),
                Projector(a, commit_every=every),
            )
            search.catch_up(), doctor.catch_up(), proj.catch_up()
            a.append_batch([_new(e) for e in events[cut:]])
            search.catch_up(), doctor.catch_up(), proj.catch_up()
            assert SearchIndex(a).catch_up() == 0 and DoctorIndex(a).catch_up() == 0  # nothing left to do
            b.append_batch([_new(e) for e in events])
            full_search, full_doctor = SearchIndex(b), DoctorIndex(b)
            full_search.rebuild(), full_doctor.rebuild(), Projector(b).rebuild()
            assert search.rows() == full_search.rows()
            assert doctor.rows() == full_doctor.rows()
            assert _task_index(a) == _task_index(b)
            assert a.projection_cursor("search") == a.projection_cursor("doctor") == a.last_position()
            # the projection's report is the one doctor makes by examining every task
            assert doctor.report() == diagnose(b)
            assert [v.task_id for v in newest(a)] == [
                t.task_id for t in sorted(b.task_events(), key=lambda t: t.last_position, reverse=True)
            ]


@SOME
@given(events=log_events, word=st.text(alphabet="ab ✓", min_size=1, max_size=4), ignore_case=st.booleans())
def test_grep_through_the_index_finds_what_the_scan_finds(events, word, ignore_case):
    with _tmpdir() as tmp, open_store(Path(tmp) / "g.db", durability="normal") as s:
        s.append_batch([_new(e) for e in events])
        pattern = re.escape(word) if not word.isalnum() else word
        literal = word  # no regular-expression syntax in the alphabet
        assert grep(s, literal, ignore_case=ignore_case) == grep(s, pattern, ignore_case=ignore_case, regex=True)


def test_another_process_indexing_meanwhile_is_not_an_error_and_changes_no_row(tmp_path):
    events = [("t1", 1, "ab", True, 1), ("t2", 5, "zz", False, 1), ("t1", 2, "b", True, 2), ("t3", 0, "a", True, 1)]
    with open_store(tmp_path / "a.db") as a, open_store(tmp_path / "b.db") as b:
        for s in (a, b):
            s.append_batch([_new(e) for e in events])
        for index, other in (
            (SearchIndex(a, commit_every=1), SearchIndex(a)),
            (DoctorIndex(a, chunk=1), DoctorIndex(a)),
        ):
            interrupted: list[int] = []

            def other_process_runs(done: int, total: int, other=other, interrupted=interrupted) -> None:
                if not interrupted:  # after the first commit: another process catches up to the end
                    interrupted.append(done)
                    other.catch_up()

            index.catch_up(progress=other_process_runs)  # its next commit finds the cursor moved
            assert interrupted == [1]
        full_search, full_doctor = SearchIndex(b), DoctorIndex(b)
        full_search.rebuild(), full_doctor.rebuild()
        assert SearchIndex(a).rows() == full_search.rows() != []
        assert DoctorIndex(a).rows() == full_doctor.rows() != []


def test_doctor_shared_with_worker_processes_gives_the_rows_of_one_process(tmp_path, monkeypatch):
    from a2a_tape.inspection import doctor_index

    here: list[str] = []
    examine = doctor_index.task_row

    def counted(st, task_id):
        here.append(task_id)
        return examine(st, task_id)

    monkeypatch.setattr(doctor_index, "task_row", counted)  # this process only (workers are spawned)
    events = [(t, k, "ab", k % 2 == 0, 1) for k in range(11) for t in ("t1", "t2", "t3", "t4")]
    with open_store(tmp_path / "a.db") as a, open_store(tmp_path / "b.db") as b:
        for s in (a, b):
            s.append_batch([_new(e) for e in events])
        shared = DoctorIndex(a, chunk=1, workers=2, parallel_min=1)
        assert shared.catch_up() == 4
        assert len(here) == 2  # parts 0 and 2 here, 1 and 3 in the worker
        alone = DoctorIndex(b, chunk=1, workers=1)
        alone.catch_up()
        assert shared.rows() == alone.rows() and len(shared.rows()) == 4
        assert a.projection_cursor("doctor") == a.last_position()


def test_rebuild_all_drops_and_makes_every_projection_again(tmp_path):
    from a2a_tape.inspection.rebuild import rebuild_all

    events = [(t, k, "ab", True, 1) for k in (0, 1, 3, 5, 2) for t in ("t1", "t2")]
    with open_store(tmp_path / "a.db") as a:
        a.append_batch([_new(e) for e in events])
        search, doctor, proj = SearchIndex(a), DoctorIndex(a), Projector(a)
        search.catch_up(), doctor.catch_up(), proj.catch_up()
        before = (search.rows(), doctor.rows(), _task_index(a), list(a.projection_rows("tasks")))
        a.search_commit(a.last_position(), [(1, 0, "t1", 1, "artifact", "x", "stale")])
        a.findings_commit(None, [("t1", 1, 1, 9, 9, b"\x90")])
        seen: list[str] = []
        rebuild_all(a, progress=lambda what, done, total: seen.append(what))
        after = (search.rows(), doctor.rows(), _task_index(a), list(a.projection_rows("tasks")))
        assert after == before and {"search", "doctor"} <= set(seen)
