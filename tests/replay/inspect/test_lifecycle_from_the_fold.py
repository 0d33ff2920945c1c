"""Lifecycle faults are the fold's (fold/fold.py): ``channels`` lists them, doctor reports the same
ones under the same codes (terminal-changed, events-after-terminal: fold/codes.py, the one table)
and adds only what a fold cannot see.

doctor kept its own copy of the rules, and the two had drifted:
- our own synthetic FAILED (origin local) made the fold blame the agent for going on afterwards
  (``after-terminal``, ``terminal-changed`` in ``channels``); doctor rightly did not;
- the same terminal status sent again on the stream that ended the task, and everything after a
  finished task went back to working, were events after the terminal state for doctor only;
- the fold's ``after-terminal`` was a warning, doctor's an error (the contract says a terminal
  state is final: an error);
- a status update with a state nobody knows, after the end, was a "terminal state change" for
  doctor only (it is an event after the terminal state).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_tape.fold.fold import fold_task_events
from a2a_tape.inspection.doctor import findings
from a2a_tape.store import Exchange, StoredEvent, local_failed
from tests.replay.inspect.builders import Tape, items
from tests.replay.inspect.conftest import cli

LIFECYCLE = {"terminal-changed": "terminal-changed", "events-after-terminal": "events-after-terminal"}


def both(tmp_path, build, dialect="1.0"):
    """(the fold's lifecycle faults as channels --json shows them, doctor's lifecycle findings)."""
    it = items(dialect)
    tape = Tape(tmp_path / "t.db")
    build(tape, it)
    tape.close()
    view = cli("channels", it.task_id, "--db", tmp_path / "t.db", "--json").json()
    doc = cli("doctor", it.task_id, "--db", tmp_path / "t.db", "--json").json()
    fold = {(f["code"], f["level"]): f["positions"] for f in view["faults"] if f["code"] in LIFECYCLE}
    doctor = {(f["code"], f["level"]): f["positions"] for f in doc["findings"] if f["code"] in LIFECYCLE.values()}
    assert {(LIFECYCLE[c], level) for c, level in fold} == set(doctor)  # the same faults, doctor's codes
    return fold, doctor


def stream(it, *tail):
    return [it.task("submitted"), it.status("working"), it.artifact("a1", "hi", last=True), *tail]


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_our_own_failed_is_no_fault_of_the_agent_that_goes_on(tmp_path, dialect):
    def build(t, it):
        ex = t.stream(it, stream(it)[:2])
        t.add(it.task_id, [local_failed(it.task_id, it.context_id, "stalled")], origin="local")
        t.add(it.task_id, [it.artifact("a1", "late", last=True), it.status("completed")], exchange_id=ex)

    assert both(tmp_path, build, dialect) == ({}, {})


def test_the_terminal_status_sent_again_on_its_stream_is_an_event_after_the_end(tmp_path):
    fold, _ = both(tmp_path, lambda t, it: t.stream(it, stream(it, it.status("completed"), it.status("completed"))))
    assert fold == {("events-after-terminal", "error"): [4, 5]}  # the end at 4; the repeat at 5


def test_a_repeat_by_another_exchange_is_fine(tmp_path):
    def build(t, it):
        t.stream(it, stream(it, it.status("completed")))
        t.add(it.task_id, [it.task("completed")], exchange_id=t.exchange(streaming=False, rpc_method="GetTask"))

    assert both(tmp_path, build) == ({}, {})


def test_what_follows_a_finished_task_that_went_back_is_after_its_end(tmp_path):
    fold, doctor = both(
        tmp_path,
        lambda t, it: t.stream(it, stream(it, it.status("completed"), it.status("working"), it.artifact("a2", "x"))),
    )
    assert fold == {("terminal-changed", "error"): [4, 5], ("events-after-terminal", "error"): [4, 6]}
    assert doctor == {("terminal-changed", "error"): [4, 5], ("events-after-terminal", "error"): [4, 6]}


def test_a_state_nobody_knows_after_the_end_is_an_event_after_it(tmp_path):
    def build(t, it):
        odd = it.status("completed").replace(b"TASK_STATE_COMPLETED", b"TASK_STATE_SOMETHING_NEW")
        t.stream(it, stream(it, it.status("completed"), odd))

    assert both(tmp_path, build)[1] == {("events-after-terminal", "error"): [4, 5]}


# -- the rule, on any sequence ----------------------------------------------------------------------

STEP = st.one_of(
    st.tuples(st.just("status"), st.sampled_from(["working", "input-required", "completed", "failed", "canceled"])),
    st.tuples(st.just("task"), st.sampled_from(["working", "completed", "failed"])),
    st.tuples(st.just("artifact"), st.just("")),
    st.tuples(st.just("message"), st.just("")),
    st.tuples(st.just("local-failed"), st.just("")),
)


def _payload(it, kind: str, state: str) -> bytes:
    if kind == "status":
        return it.status(state)
    if kind == "task":
        return it.task(state)
    if kind == "artifact":
        return it.artifact("a1", "x", append=True)
    return it._wrap("message", {"messageId": "m", "role": "ROLE_AGENT", "parts": []}, "message")


@settings(max_examples=300, deadline=None)  # a rule, not a timing: a loaded machine may take 200 ms for one example
@given(st.lists(st.tuples(STEP, st.sampled_from([1, 2])), max_size=12))
def test_doctor_reports_the_folds_lifecycle_faults_and_no_others(steps):
    it = items("1.0", "t-1")
    events, exchanges = [], [Exchange(id=n, url="http://a/", streaming=True, task_id="t-1") for n in (1, 2)]
    for pos, ((kind, state), ex) in enumerate(steps, 1):
        if kind == "local-failed":
            payload, origin, ex_id = local_failed("t-1", "ctx", "ours"), "local", None
        else:
            payload = _payload(it, kind, state)
            origin, ex_id = "upstream", ex
        events.append(StoredEvent(pos, "t-1", pos, ex_id, None, payload, float(pos), None, origin))
    view = fold_task_events("t-1", events).view()
    expected = sorted((LIFECYCLE[f.code], sorted(set(f.positions))) for f in view.faults if f.code in LIFECYCLE)
    found = sorted((f.code, f.positions) for f in findings("t-1", events, exchanges) if f.code in LIFECYCLE.values())
    assert found == expected
    locals_at = {e.position for e in events if e.origin == "local"}
    assert not any(set(p) <= locals_at for _, p in found)  # our own events are never the fault


# -- a stream open beside the one that ended the task -------------------------------------------------


def _beside(t, it, *after_end):
    """A stream (exchange 1) and a resubscribe opened beside it (exchange 2), each delivering the
    same updates at its own pace, as a proxy records them when it reads a dropped stream to its end
    (``a2a-tape probe``'s dropped-stream check through the proxy): the first ends the task first."""
    first = t.stream(it, [it.task("submitted"), it.status("working")])
    second = t.exchange(task_id=it.task_id, rpc_method="SubscribeToTask")
    t.add(it.task_id, [it.task("working")], exchange_id=second)
    t.add(it.task_id, [it.artifact("a1", "hi", last=True), it.status("completed")], exchange_id=first)
    t.add(it.task_id, [it.artifact("a1", "hi", last=True), it.status("completed"), *after_end], exchange_id=second)


def test_a_stream_open_beside_the_end_catches_up_without_a_fault(tmp_path):
    """Before: events-after-terminal (an error) for the resubscribe's copy of the last chunk, on a
    task the agent ran correctly (the README's proxy and probe block left it in agent.db)."""
    assert both(tmp_path, lambda t, it: _beside(t, it)) == ({}, {})


def test_once_caught_up_what_follows_on_it_is_after_the_end(tmp_path):
    fold, doctor = both(tmp_path, lambda t, it: _beside(t, it, it.artifact("a2", "late")))
    assert fold == {("events-after-terminal", "error"): [5, 8]}  # the end (on the first stream), the late one
    assert doctor == fold


def test_a_stream_opened_after_the_end_is_judged_at_once(tmp_path):
    def build(t, it):
        t.stream(it, stream(it, it.status("completed")))
        late = t.exchange(task_id=it.task_id, rpc_method="SubscribeToTask")
        t.add(it.task_id, [it.task("completed"), it.artifact("a2", "late")], exchange_id=late)

    fold, _ = both(tmp_path, build)
    assert fold == {("events-after-terminal", "error"): [4, 6]}
