"""doctor: each listed fault found in a recording made to have it, nothing in clean ones, both dialects."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.replay.inspect.builders import Tape, items
from tests.replay.inspect.conftest import cli

DIALECTS = ["1.0", "0.3"]


def codes(run) -> dict[str, str]:
    """fault code -> level, from ``doctor --json``."""
    return {f["code"]: f["level"] for f in run.json()["findings"]}


def doctor_json(db, *args):
    r = cli("doctor", *args, "--db", db, "--json")
    assert r.stderr == ""
    return r


# -- real agent ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_clean_live_recording_has_no_findings(live, dialect):
    for text in ("hello", "reply"):
        r = doctor_json(live.db, live.tasks[(dialect, text)])
        assert r.code == 0, r.stdout
        doc = r.json()
        assert doc["findings"] == [] and doc["ok"] is True and doc["tasks"] == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_live_input_required_is_a_warning_only(live, dialect):
    r = doctor_json(live.db, live.tasks[(dialect, "ask")])
    assert r.code == 0
    assert codes(r) == {"interrupted-no-follow-up": "warning"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_live_agent_crash_is_stream_closed_while_working(live, dialect):
    r = doctor_json(live.db, live.tasks[(dialect, "boom")])
    assert r.code == 1
    found = codes(r)
    assert found["closed-while-working"] == "error"
    assert found["artifact-not-closed"] == "warning"
    assert found["rpc-error"] == "error"  # the error item, noted by the projection's fold
    f = next(f for f in r.json()["findings"] if f["code"] == "closed-while-working")
    assert f["positions"] and f["task_id"] == live.tasks[(dialect, "boom")]


def test_doctor_without_task_checks_every_task_and_prints_a_table(live):
    r = cli("doctor", "--db", live.db)
    assert r.code == 1  # the two crashed tasks: stream closed while working + the error item, each
    assert "closed-while-working" in r.stdout and "interrupted-no-follow-up" in r.stdout
    assert "4 errors, 4 warnings" in r.stdout
    doc = doctor_json(live.db).json()
    assert doc["tasks"] == 8 and doc["errors"] == 4 and doc["ok"] is False


# -- hand-built faults --------------------------------------------------------------------------


def one_task(tmp_path, dialect, build):
    it = items(dialect)
    tape = Tape(tmp_path / "t.db")
    build(tape, it)
    tape.close()
    r = doctor_json(tmp_path / "t.db", it.task_id)
    return r, codes(r)


def clean_stream(it):
    return [
        it.task("submitted"),
        it.status("working"),
        it.artifact("art-1", "Hello "),
        it.artifact("art-1", "world", append=True, last=True),
        it.status("completed"),
    ]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_hand_built_clean_stream_is_clean(tmp_path, dialect):
    r, found = one_task(tmp_path, dialect, lambda t, it: t.stream(it, clean_stream(it)))
    assert (r.code, found) == (0, {})
    r = cli("doctor", "--db", tmp_path / "t.db")
    assert r.code == 0 and "no faults found" in r.stdout


@pytest.mark.parametrize("dialect", DIALECTS)
def test_terminal_state_that_goes_back_to_working_is_an_error(tmp_path, dialect):
    def build(t, it):
        t.stream(it, [*clean_stream(it), it.status("working"), it.artifact("art-1", " again", append=True)])

    r, found = one_task(tmp_path, dialect, build)
    assert r.code == 1
    assert found["terminal-changed"] == "error"
    assert found["events-after-terminal"] == "error"
    changed = next(f for f in r.json()["findings"] if f["code"] == "terminal-changed")
    assert changed["positions"] == [5, 6]  # completed at 5, working at 6
    assert "completed" in changed["message"] and "working" in changed["message"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_events_after_terminal(tmp_path, dialect):
    r, found = one_task(
        tmp_path, dialect, lambda t, it: t.stream(it, [*clean_stream(it), it.artifact("art-2", "late")])
    )
    assert r.code == 1 and found == {"events-after-terminal": "error", "artifact-not-closed": "warning"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_final_state_repeated_by_a_later_get_task_is_fine(tmp_path, dialect):
    def build(t, it):
        t.stream(it, clean_stream(it))
        ex = t.exchange(streaming=False, rpc_method="GetTask", task_id=it.task_id)
        t.add(it.task_id, [it.task("completed")], exchange_id=ex)

    r, found = one_task(tmp_path, dialect, build)
    assert (r.code, found) == (0, {})


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stream_closed_while_working(tmp_path, dialect):
    r, found = one_task(tmp_path, dialect, lambda t, it: t.stream(it, clean_stream(it)[:4]))
    assert r.code == 1 and found == {"closed-while-working": "error"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stream_closed_while_working_then_recovered_is_a_warning(tmp_path, dialect):
    """The agent's stream closed early; a resubscribe (snapshot first) then saw it complete."""

    def build(t, it):
        t.stream(it, clean_stream(it)[:3])
        ex = t.exchange(task_id=it.task_id, rpc_method="SubscribeToTask")
        art = it.artifact_obj("art-1", "Hello ")
        t.add(
            it.task_id,
            [
                it.task("working", artifacts=[art]),
                it.artifact("art-1", "world", append=True, last=True),
                it.status("completed"),
            ],
            exchange_id=ex,
        )

    r, found = one_task(tmp_path, dialect, build)
    assert r.code == 0 and found == {"closed-while-working": "warning"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_first_item_not_a_task(tmp_path, dialect):
    r, found = one_task(tmp_path, dialect, lambda t, it: t.stream(it, clean_stream(it)[1:]))
    assert r.code == 1 and found == {"first-item": "error"}
    assert r.json()["findings"][0]["positions"] == [1]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_artifact_never_closed(tmp_path, dialect):
    """The agent closes art-1 with lastChunk but never art-2."""

    def build(t, it):
        s = clean_stream(it)
        t.stream(it, [*s[:4], it.artifact("art-2", "notes"), s[4]])

    r, found = one_task(tmp_path, dialect, build)
    assert r.code == 0 and found == {"artifact-not-closed": "warning"}
    assert r.json()["findings"][0]["positions"] == [5] and "art-2" in r.json()["findings"][0]["message"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_contract_without_last_chunk_is_not_flagged_once_completed(tmp_path, dialect):
    """opencode never sends lastChunk: the completed status ends its artifacts."""

    def build(t, it):
        s = clean_stream(it)
        s[3] = it.artifact("art-1", "world", append=True)
        t.stream(it, s)

    r, found = one_task(tmp_path, dialect, build)
    assert (r.code, found) == (0, {})


@pytest.mark.parametrize("dialect", DIALECTS)
def test_two_equal_chunks_are_not_a_doubled_answer(tmp_path, dialect):
    def build(t, it):
        t.stream(
            it,
            [
                it.task(),
                it.status("working"),
                it.artifact("art-1", "ha"),
                it.artifact("art-1", "ha", append=True, last=True),
                it.status("completed"),
            ],
        )

    r, found = one_task(tmp_path, dialect, build)
    assert (r.code, found) == (0, {})


@pytest.mark.parametrize("dialect", DIALECTS)
def test_interrupted_with_no_follow_up(tmp_path, dialect):
    def build(t, it):
        t.stream(it, [it.task(), it.status("working"), it.status("input-required", "which file?")])

    r, found = one_task(tmp_path, dialect, build)
    assert r.code == 0 and found == {"interrupted-no-follow-up": "warning"}


def oc(it, channel, *, source=None, message_id="msg-1"):
    md = {"opencode": {"channel": channel}}
    if message_id:
        md["opencode"]["message_id"] = message_id
    if source:
        md["opencode"]["source"] = source
    return md


@pytest.mark.parametrize("dialect", DIALECTS)
def test_final_snapshot_would_show_the_answer_twice_to_a_naive_client(tmp_path, dialect):
    def build(t, it):
        sid = f"{it.task_id}:stream"
        t.stream(
            it,
            [
                it.task(),
                it.status("working"),
                it.artifact(sid, "The answer ", metadata=oc(it, "final_answer")),
                it.artifact(sid, "is 42.", append=True, metadata=oc(it, "final_answer")),
                it.artifact(
                    sid,
                    "The answer is 42.",
                    append=True,
                    last=True,
                    metadata=oc(it, "final_answer", source="final_snapshot"),
                ),
                it.status("completed"),
            ],
        )

    r, found = one_task(tmp_path, dialect, build)
    assert r.code == 0 and found == {"answer-shown-twice": "warning"}
    assert r.json()["findings"][0]["positions"] == [5]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_answer_doubled_by_the_agent_is_an_error(tmp_path, dialect):
    """No snapshot marker: an append of the whole text doubles the answer for every client."""

    def build(t, it):
        t.stream(
            it,
            [
                it.task(),
                it.status("working"),
                it.artifact("art-1", "The answer "),
                it.artifact("art-1", "is 42.", append=True),
                it.artifact("art-1", "The answer is 42.", append=True, last=True),
                it.status("completed"),
            ],
        )

    r, found = one_task(tmp_path, dialect, build)
    assert r.code == 1 and found == {"answer-shown-twice": "error"}
    assert r.json()["findings"][0]["positions"] == [5]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_text_crossing_channels(tmp_path, dialect):
    def build(t, it):
        t.stream(
            it,
            [
                it.task(),
                it.status("working"),
                it.artifact(f"{it.task_id}:stream:reasoning", "thinking", metadata=oc(it, "reasoning")),
                it.artifact(
                    f"{it.task_id}:stream:reasoning", "Answer", append=True, last=True, metadata=oc(it, "final_answer")
                ),
                it.status("completed"),
            ],
        )

    r, found = one_task(tmp_path, dialect, build)
    assert r.code == 1 and found == {"text-crosses-channels": "error"}
    positions = sorted({p for f in r.json()["findings"] for p in f["positions"]})
    assert positions == [3, 4]


def blocks(seq, event_id, block_type="text"):
    return {
        "shared": {"stream": {"block_type": block_type, "sequence": seq, "event_id": event_id, "message_id": "msg-1"}}
    }


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sequence_gap_and_repeat(tmp_path, dialect):
    def build(t, it):
        aid = f"{it.task_id}:stream"
        t.stream(
            it,
            [
                it.task(),
                it.status("working"),
                it.artifact(aid, "a", metadata=blocks(1, "e1")),
                it.artifact(aid, "b", append=True, metadata=blocks(2, "e2")),
                it.artifact(aid, "b", append=True, metadata=blocks(2, "e2")),  # repeat
                it.artifact(
                    aid, "d", append=True, last=True, metadata=blocks(4.0, "e4")
                ),  # gap: 3 missing (float on the wire)
                it.status("completed"),
            ],
        )

    r, found = one_task(tmp_path, dialect, build)
    assert r.code == 1
    assert found == {"sequence-repeat": "warning", "sequence-gap": "error"}
    gap = next(f for f in r.json()["findings"] if f["code"] == "sequence-gap")
    assert gap["positions"] == [4, 6]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_local_synthetic_failed_is_not_a_fault_of_the_agent(tmp_path, dialect):
    from a2a_tape.store import local_failed, local_note

    def build(t, it):
        t.stream(it, clean_stream(it)[:3])
        t.add(
            it.task_id,
            [
                local_note("gave-up", "stream lost", it.task_id),
                local_failed(it.task_id, it.context_id, "upstream lost the task"),
            ],
            origin="local",
        )

    r, found = one_task(tmp_path, dialect, build)
    # the agent's stream did close while working (a warning: our FAILED settled the task); no lifecycle error
    assert found == {"closed-while-working": "warning"}
    assert r.code == 0


def test_doctor_unknown_task_is_bad_input(tmp_path):
    tape = Tape(tmp_path / "t.db")
    tape.close()
    r = cli("doctor", "nope", "--db", tmp_path / "t.db")
    assert r.code == 2 and r.stderr.startswith("a2a-tape: error: unknown task") and r.stdout == ""


@pytest.mark.parametrize("dialect", DIALECTS)
def test_text_after_last_chunk_is_reported_from_the_fold(tmp_path, dialect):
    def build(t, it):
        s = clean_stream(it)
        t.stream(it, [*s[:4], it.artifact("art-1", "!", append=True), s[4]])

    r, found = one_task(tmp_path, dialect, build)
    assert r.code == 0 and found == {"after-last-chunk": "warning"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_message_that_is_not_alone_is_a_first_item_fault(tmp_path, dialect):
    def build(t, it):
        msg = it._wrap(
            "message",
            {
                "messageId": "m-1",
                "role": "ROLE_AGENT" if dialect == "1.0" else "agent",
                "taskId": it.task_id,
                "parts": [it.part("hi")],
            },
            "message",
        )
        t.stream(it, [msg, it.status("working"), it.status("completed")])

    r, found = one_task(tmp_path, dialect, build)
    assert r.code == 1 and found == {"first-item": "error"}
    assert r.json()["findings"][0]["positions"] == [1, 2]


@pytest.mark.parametrize(
    "tape",
    sorted((Path(__file__).resolve().parents[3] / "recordings").glob("*.jsonl")),
    ids=lambda p: p.stem,
)
def test_errors_only_is_the_error_level_findings_of_every_run(tape):
    """``findings(errors_only=True)`` (what verify compares) skips the walks that find warnings
    only: it is the error-level part of the full findings, on every run of every golden recording
    (sdk-boom and sdk-closed-working hold errors; the others warnings only)."""
    from a2a_tape.fold.runs import task_runs
    from a2a_tape.inspection.doctor import findings
    from a2a_tape.store import open_for_reading

    with open_for_reading(tape) as st:
        for t in st.task_events():
            for run in task_runs(st, t.task_id):
                full = findings(t.task_id, run.events, run.exchanges)
                errors = findings(t.task_id, run.events, run.exchanges, errors_only=True)
                assert errors == [f for f in full if f.level == "error"], (tape.stem, run.selector)
