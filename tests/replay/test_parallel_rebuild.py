"""A parallel rebuild (tasks folded by several processes, one partition each) gives exactly the
views of a one-process fold, and a rebuild that died half way is never trusted."""

from __future__ import annotations

import json
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from a2a_tape import store
from a2a_tape.fold.projection import ProjectionBusy, Projector, encode_view, fold_events
from a2a_tape.store import NewEvent


def _payload(task: str, kind: str, n: int, append: bool = True) -> bytes:
    if kind == "task":
        body = {"task": {"id": task, "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}
    elif kind == "done":
        body = {"statusUpdate": {"taskId": task, "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}
    else:
        body = {
            "artifactUpdate": {
                "taskId": task,
                "contextId": "c",
                "append": append,
                "artifact": {"artifactId": f"a{n % 2}", "parts": [{"text": f"{task}-{n} "}]},
            }
        }
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": body}).encode()


def _log(path, tasks: int = 40, chunks: int = 12, seed: int = 3):
    rng = random.Random(seed)
    ids = [f"task-{i:03d}{'abcdefgh'[i % 8]}" for i in range(tasks)]
    streams = {
        t: [_payload(t, "task", 0)]
        + [_payload(t, "chunk", n, append=n > 1) for n in range(chunks)]
        + [_payload(t, "done", 0)]
        for t in ids
    }
    events = []
    while streams:  # interleave the tasks, each in its own order
        t = rng.choice(sorted(streams))
        events.append(NewEvent(payload=streams[t].pop(0), task_id=t, exchange_id=None, received_at=len(events)))
        if not streams[t]:
            del streams[t]
    # an event with no task id on the row, naming its task inside the payload
    events.append(NewEvent(payload=_payload(ids[5], "chunk", 99), task_id=None, received_at=len(events)))
    st = store.open_store(path)
    for i in range(0, len(events), 100):
        st.append_batch(events[i : i + 100])
    return st


def _views(proj: Projector) -> list[bytes]:
    return [encode_view(v) for v in proj.views()]


@pytest.mark.parametrize("workers", [2, 3])
def test_parallel_rebuild_equals_one_process(tmp_path, workers):
    st = _log(tmp_path / "p.db")
    one = Projector(st)
    one.rebuild(workers=1)
    expected = _views(one)
    assert len(expected) == 40
    in_memory = fold_events(st.read_from(0))
    assert sorted(encode_view(v) for v in in_memory.values()) == sorted(expected)

    par = Projector(st, commit_every=97, cache_size=5)  # small: evictions and many commits
    par.rebuild(workers=workers, parallel_min=0)
    assert par.processes == workers  # not the one-process fallback
    assert _views(par) == expected
    assert st.projection_cursor("tasks") == st.last_position()
    assert st.get_meta("projection:tasks:rebuilding") == ""
    # and it goes on incrementally from there
    st.append(NewEvent(payload=_payload("task-000a", "chunk", 50), task_id="task-000a"))
    assert par.catch_up() == 1
    assert Projector(st).view("task-000a").events == 15


def test_a_rebuild_that_died_half_way_is_folded_again(tmp_path):
    st = _log(tmp_path / "d.db")
    good = Projector(st)
    good.rebuild(workers=1)
    expected = _views(good)
    # a dead rebuilder's marker, with partial rows and a cursor that looks complete
    st.set_meta("projection:tasks:rebuilding", f"{os.uname().nodename}:999999999")
    st.projection_commit("tasks", st.last_position(), {"task-000a": b"\x90"}, expect=None)
    again = Projector(st)
    again.catch_up()
    assert _views(again) == expected
    assert st.get_meta("projection:tasks:rebuilding") == ""


def test_a_live_rebuild_elsewhere_is_not_trampled(tmp_path):
    st = _log(tmp_path / "l.db")
    st.set_meta("projection:tasks:rebuilding", f"{os.uname().nodename}:{os.getppid()}")  # alive
    with pytest.raises(ProjectionBusy, match="being rebuilt by another process"):
        Projector(st).catch_up()


_IDS = hs.text(alphabet=hs.sampled_from("aAzZ09-_é中😀"), min_size=0, max_size=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ids=hs.lists(_IDS, min_size=1, max_size=8, unique=True),
    parts=hs.integers(2, 4),
    lead=hs.sampled_from([0.0, 0.03, 0.3]),
    seed=hs.integers(0, 1000),
)
def test_the_parts_of_any_split_fold_to_the_one_process_views(tmp_path_factory, ids, parts, lead, seed):
    """Whatever the task ids (empty, non-ASCII, ids that are prefixes of others) and wherever the
    sample cuts them, the parts of a parallel rebuild (folded here one after the other, each a
    Projector on one task range) give exactly the views of one fold of the whole log: no task
    lost at a boundary, none folded twice, the rows without a task id where they belong."""
    rng = random.Random(seed)
    path = tmp_path_factory.mktemp("split") / "s.db"
    st = store.open_store(path)
    events = []
    for n in range(rng.randint(len(ids), 40)):
        t = rng.choice(ids)
        events.append(NewEvent(payload=_payload(t, "chunk", n, append=n % 3 != 0), task_id=t))
    # a row with no task id, naming its task only inside the payload
    events.append(NewEvent(payload=_payload(rng.choice(ids), "chunk", 99), task_id=None))
    st.append_batch(events)
    one = Projector(st, name="one")
    one.rebuild(workers=1)
    expected = _views(one)
    end = st.last_position()
    ranges = st.task_ranges(parts, end, lead=lead)
    assert ranges[0][0] is None and ranges[-1][1] is None
    for r in ranges:
        Projector(st, name="split", tasks=r, upto=end)._catch_up()
    assert _views(Projector(st, name="split")) == expected
    st.close()


def test_parallel_rebuild_on_postgresql_equals_one_process(pg_url):
    """On PostgreSQL too, each worker with its own connection to the same schema."""
    st = _log(pg_url)
    try:
        one = Projector(st, name="one")
        one.rebuild(workers=1)
        expected = _views(one)
        assert len(expected) == 40
        par = Projector(st, name="par", commit_every=97, cache_size=5)
        par.rebuild(workers=2, parallel_min=0)
        assert par.processes == 2  # not the one-process fallback
        assert _views(par) == expected
        assert st.projection_cursor("par") == st.last_position()
        assert st.get_meta("projection:par:rebuilding") == ""
    finally:
        st.close()
