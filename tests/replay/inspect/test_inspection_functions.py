"""The inspection functions the CLI prints (and a UI will show): typed rows from inspection,
called directly, without the command line."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a_tape import store
from a2a_tape.inspection import timeline
from a2a_tape.inspection.listing import TaskFilter, TaskRow, list_tasks, parse_states
from a2a_tape.inspection.messages import find_message, lone_messages
from a2a_tape.inspection.task_views import InMemoryProjection, task_projection, task_view
from a2a_tape.store import TERMINAL_STATES
from a2a_tape.store.events import ACTIVE_STATES, INTERRUPTED_STATES
from tests.replay.inspect.builders import Tape, items

STATES = sorted(TERMINAL_STATES | ACTIVE_STATES | INTERRUPTED_STATES)


@pytest.fixture
def log(tmp_path):
    """Two tasks (one completed, one input-required) and a lone Message reply, in that order."""
    tape = Tape(tmp_path / "t.db")
    a, b = items("1.0", "task-a"), items("0.3", "task-b")
    tape.stream(a, [a.task(), a.status("working"), a.artifact("x", "the answer", last=True), a.status("completed")])
    tape.stream(b, [b.task(), b.status("input-required", "which one?")])
    ex = tape.exchange(streaming=False, rpc_method="SendMessage")
    reply = a._wrap(
        "message", {"messageId": "m-1", "contextId": "c-9", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}, ""
    )
    tape.add(None, [reply], exchange_id=ex)
    tape.close()
    with store.open_store(tmp_path / "t.db") as st_:
        yield st_


def test_the_listing_is_typed_rows_newest_first_with_lone_messages(log):
    found = list_tasks(log, TaskFilter(), limit=None)
    rows = list(found.rows)
    assert found.total == 3 and all(isinstance(r, TaskRow) for r in rows)
    assert [(r.kind, r.task_id or r.message_id) for r in rows] == [
        ("message", "m-1"),
        ("task", "task-b"),
        ("task", "task-a"),
    ]
    assert rows[2].final_answer == "the answer" and rows[2].state == "completed"
    only = list_tasks(log, TaskFilter(states=frozenset({"input-required"})), limit=None)
    assert only.total == 1 and [r.task_id for r in only.rows] == ["task-b"]  # a state filter leaves messages out
    assert [r.kind for r in list_tasks(log, TaskFilter(context="c-9"), limit=None).rows] == ["message"]


def test_a_log_that_cannot_be_written_is_folded_in_memory_with_the_same_views(log, monkeypatch):
    kept = task_view(log, "task-a")
    monkeypatch.setattr("a2a_tape.fold.projection.Projector.catch_up", _read_only)
    assert isinstance(task_projection(log), InMemoryProjection)
    assert task_view(log, "task-a") == kept
    assert [r.task_id for r in list_tasks(log, TaskFilter(), limit=2).rows] == [None, "task-b"]


def _read_only(self: object) -> int:
    raise store.ReadOnlyStore("read-only")


def test_lone_messages_are_found_by_message_id_context_id_or_prefix(log):
    [m] = lone_messages(log)
    assert (m.key, m.context_id, m.text) == ("m-1", "c-9", "hi")
    assert find_message(log, "m-1") == find_message(log, "c-9") == find_message(log, "m-") == m
    assert find_message(log, "nope") is None and find_message(log, "") is None


@given(st.lists(st.sampled_from(STATES + [s.upper().replace("-", "_") for s in STATES]), min_size=1, max_size=4))
def test_states_are_read_in_either_spelling(words):
    assert parse_states([",".join(words)]) == tuple(dict.fromkeys(w.lower().replace("_", "-") for w in words))


def test_a_word_that_is_no_state_is_named():
    with pytest.raises(ValueError, match="unknown task state 'finished'"):
        parse_states(["completed,finished"])


def test_the_timeline_gives_each_event_its_row_channel_and_preview(log):
    events = log.read_task("task-a")
    wires = timeline.wires(log, "task-a", events)
    entries = list(timeline.entries("task-a", events, wires))
    assert [e.row.kind for e in entries] == ["task", "status", "artifact", "status"]
    assert {(e.row.binding, e.row.version) for e in entries} == {("jsonrpc", "1.0")}
    assert timeline.labels(wires) == ["JSONRPC 1.0"]
    assert entries[2].where == "x [artifact]" and entries[2].what == "replace, last chunk: 'the answer'"
    assert entries[3].what == "completed" and not any(e.local for e in entries)


def test_follow_ends_with_the_task_or_after_idle_seconds(log):
    events = log.read_task("task-a")
    assert list(timeline.follow(log, "task-a", events, idle=None)) == events  # completed already: no waiting
    waiting = log.read_task("task-b")
    assert list(timeline.follow(log, "task-b", waiting, idle=0.05)) == waiting  # input-required: idles out


@pytest.fixture
def working(tmp_path):
    """A task left working (two events), the writer that goes on with it, and a reader of the log."""
    it = items("1.0", "task-live")
    tape = Tape(tmp_path / "live.db")
    ex = tape.stream(it, [it.task(), it.status("working")])

    def finish() -> None:
        tape.add("task-live", [it.status("completed")], exchange_id=ex)

    with store.open_store(tmp_path / "live.db") as reader:
        yield reader, finish
    tape.close()


def test_follow_yields_what_another_writer_commits_until_the_task_ends(working):
    reader, finish = working
    followed = timeline.follow(reader, "task-live", reader.read_task("task-live"), idle=30)
    assert [next(followed).position for _ in range(2)] == [1, 2]
    writer = threading.Thread(target=finish)
    writer.start()
    rest = list(followed)  # waits on the store for the commit, then ends: the task is completed
    writer.join()
    assert [e.position for e in rest] == [3]


def test_follow_reads_what_was_committed_while_the_task_so_far_was_printed(working):
    """The events given are printed first; one committed meanwhile comes next, never skipped
    (follow went on from the log's end once they were printed: that event was lost)."""
    reader, finish = working
    followed = timeline.follow(reader, "task-live", reader.read_task("task-live"), idle=5)
    assert [next(followed).position for _ in range(2)] == [1, 2]
    finish()  # while the second was printed
    assert [e.position for e in followed] == [3]
