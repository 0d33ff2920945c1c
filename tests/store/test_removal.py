"""Removing tasks (store.removal, under ``a2a-tape rm`` and ``prune``) on both backends: what
stays of every projection equals a rebuild of the log that stays, and the log's last position
never goes back (the next append is past every position ever given)."""

from __future__ import annotations

from pathlib import Path

from a2a_tape import store
from a2a_tape.fold.projection import Projector
from a2a_tape.inspection.doctor_index import DoctorIndex
from a2a_tape.inspection.rebuild import rebuild_all
from a2a_tape.inspection.search_index import SearchIndex
from a2a_tape.store.removal import remove_tasks
from a2a_tape.store.tape import import_tape

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"


def _catch_up(st: store.Store) -> None:
    Projector(st).catch_up()
    SearchIndex(st).catch_up()
    DoctorIndex(st).catch_up()


def _projections(st: store.Store) -> dict[str, object]:
    views = {v.task_id: v for v in Projector(st).views()}
    return {
        "views": sorted(views),
        "rows": sorted(st.projection_rows("tasks")),
        "search": sorted(SearchIndex(st).rows()),
        "doctor": DoctorIndex(st).report(),
        "page": st.task_index_page("tasks", limit=100),
        "findings": sorted(st.findings_rows(faulty_only=False)),
    }


def test_what_stays_equals_a_rebuild(backend):
    st = backend.open()
    for tape in sorted(RECORDINGS.glob("*.jsonl")):
        with tape.open("rb") as fh:
            import_tape(st, fh)
    _catch_up(st)
    top = st.last_position()
    gone = ["eae94752-8d54-4221-873c-d1ce09cd1df2", "ob-1", "oc-snap-1"]  # the newest event among them
    assert all(st.has_task(t) for t in gone)
    removed = remove_tasks(st, gone, by="test")
    assert removed.task_ids == gone and removed.events > 0 and removed.exchanges > 0
    assert not any(st.has_task(t) for t in gone)
    assert st.last_position() == top + 1  # the note: no position given twice
    _catch_up(st)
    kept = _projections(st)
    assert not set(gone) & set(kept["views"])  # type: ignore[arg-type]
    rebuild_all(st)
    _catch_up(st)
    assert _projections(st) == kept
