"""One test per contract rule (docs/design.md section 4), folded in memory with ``fold_events``."""

from __future__ import annotations

from a2a_tape.fold.profiles import BLOCKS, CHANNELS, GENERIC, LANES, classify
from a2a_tape.fold.projection import fold_events
from a2a_tape.store import decode_item, local_failed

from .builders import art03, blocks, oc, status03, status10, stored, task03, v10


def view(payloads, task="t1", **kw):
    return fold_events(stored(payloads, task, **kw))[task]


def texts(v):
    return {a.artifact_id: a.text for a in v.artifacts}


# -- generic A2A ---------------------------------------------------------------------------------


def test_generic_append_true_appends_and_absent_replaces():
    v = view(
        [art03("t1", "a", "one "), art03("t1", "a", "two", append=True), art03("t1", "b", "x"), art03("t1", "b", "y")]
    )
    assert texts(v) == {"a": "one two", "b": "y"}
    assert {a.channel for a in v.artifacts} == {"artifact"}
    assert v.profile == GENERIC


def test_generic_last_chunk_closes():
    v = view([art03("t1", "a", "x"), art03("t1", "b", "y", last=True)])
    assert {a.artifact_id: a.closed for a in v.artifacts} == {"a": False, "b": True}


def test_generic_final_answer_is_the_artifact_updated_last_never_joined():
    v = view([art03("t1", "a", "first"), art03("t1", "b", "second"), art03("t1", "a", "!", append=True)])
    assert v.final_answer == "first!"


def test_generic_message_only_reply_is_the_final_answer():
    msg = v10("message", {"messageId": "r1", "role": "ROLE_AGENT", "taskId": "t1", "parts": [{"text": "pong"}]})
    assert view([msg]).final_answer == "pong"


def test_text_after_last_chunk_is_a_fault():
    v = view([art03("t1", "a", "x", last=True), art03("t1", "a", "y", append=True)])
    assert texts(v) == {"a": "xy"}
    assert [f.code for f in v.faults] == ["after-last-chunk"]


# -- task snapshots ------------------------------------------------------------------------------


def test_task_snapshot_replaces_artifacts_instead_of_appending():
    snap = task03("t1", "working", artifacts=[{"artifactId": "a", "parts": [{"kind": "text", "text": "chunk-0 "}]}])
    v = view(
        [
            task03("t1"),
            art03("t1", "a", "chunk-0 "),
            art03("t1", "gone", "z"),
            snap,
            art03("t1", "a", "chunk-1", append=True),
        ]
    )
    assert texts(v) == {"a": "chunk-0 chunk-1"}  # not "chunk-0 chunk-0 ...", and "gone" is gone


def _stream_then_snapshot(snapshot: bytes, *, terminal: bool = True) -> list:
    """A stream (exchange 1) that ends the task or drops while working, then ``snapshot`` on exchange 2."""
    streamed = [task03("t1"), art03("t1", "a", "chunk-0 "), art03("t1", "a", "chunk-1", append=True)]
    if terminal:
        streamed.append(status03("t1", "completed"))
    return stored(streamed) + stored([snapshot], exchange=2, start=len(streamed) + 1)


def test_the_stored_copy_after_a_stream_ended_the_task_never_rewrites_its_channels():
    """Issue 30 item 2: a GetTask answer after the stream ended the task is evidence, compared."""
    doubled = task03(
        "t1", "completed", artifacts=[{"artifactId": "a", "parts": [{"kind": "text", "text": "chunk-0 chunk-1" * 2}]}]
    )
    v = fold_events(_stream_then_snapshot(doubled))["t1"]
    assert texts(v) == {"a": "chunk-0 chunk-1"} and v.final_answer == "chunk-0 chunk-1" and v.state == "completed"
    [fault] = [f for f in v.faults if f.code == "stored-copy-differs"]
    assert fault.positions == [4, 5] and "twice" in fault.message  # where the stream ended it, the copy
    same = task03(
        "t1", "completed", artifacts=[{"artifactId": "a", "parts": [{"kind": "text", "text": "chunk-0 chunk-1"}]}]
    )
    assert [f.code for f in fold_events(_stream_then_snapshot(same))["t1"].faults] == []
    other_state = task03("t1", "failed")
    v = fold_events(_stream_then_snapshot(other_state))["t1"]
    assert v.state == "completed" and "its state is failed" in v.faults[0].message


def test_a_snapshot_that_is_the_only_source_still_replaces():
    """A dropped stream recovered by GetTask: the snapshot is all there is of the rest."""
    rest = task03("t1", "completed", artifacts=[{"artifactId": "a", "parts": [{"kind": "text", "text": "whole"}]}])
    v = fold_events(_stream_then_snapshot(rest, terminal=False))["t1"]
    assert (texts(v), v.state) == ({"a": "whole"}, "completed")
    assert [f.code for f in v.faults] == ["closed-while-working"]  # the drop, not the snapshot


def test_snapshot_sets_state_and_context():
    v = view([task03("t1", "working")])
    assert (v.state, v.context_id) == ("working", "ctx")


# -- opencode channels ----------------------------------------------------------------------------


def test_channels_are_independent_buffers():
    v = view(
        [
            art03("t1", "t1:stream:reasoning", "think", meta=oc("reasoning")),
            art03("t1", "t1:stream:tool_call", "ls", meta=oc("tool_call")),
            art03("t1", "t1:stream", "answer", meta=oc("final_answer")),
            art03("t1", "t1:stream:reasoning", "ing", append=True, meta=oc("reasoning")),
        ]
    )
    assert (v.final_answer, v.reasoning) == ("answer", "thinking")
    assert [t.text for t in v.tool_calls] == ["ls"]
    assert v.profile == CHANNELS


def test_final_snapshot_overwrites_even_with_append_true():
    v = view(
        [
            art03("t1", "t1:stream", "Hel", meta=oc("final_answer")),
            art03("t1", "t1:stream", "lo", append=True, meta=oc("final_answer")),
            art03(
                "t1", "t1:stream", "Hello!", append=True, last=True, meta=oc("final_answer", source="final_snapshot")
            ),
        ]
    )
    assert v.final_answer == "Hello!"
    assert len([a for a in v.artifacts if a.channel == "final_answer"]) == 1


def test_event_without_message_id_is_ignored_and_counted():
    v = view(
        [
            art03("t1", "t1:stream", "a", meta=oc("final_answer")),
            art03("t1", "t1:stream", "XX", append=True, meta=oc("final_answer", message_id=None)),
            art03("t1", "t1:stream", "b", append=True, meta=oc("final_answer")),
        ]
    )
    assert v.final_answer == "ab"
    assert v.ignored_events == 1
    assert [(i.position, i.reason) for i in v.ignored] == [(2, "no message_id")]


def test_user_echo_by_role_is_not_an_answer():
    v = view(
        [
            art03("t1", "t1:stream", "hi there", meta=oc("final_answer", role="user")),
            art03("t1", "t1:stream", "Hello.", meta=oc("final_answer")),
        ]
    )
    assert v.final_answer == "Hello." and v.ignored_events == 1


def test_user_echo_first_chunk_equal_to_user_text_without_role():
    v = view(
        [
            task03("t1", user="what is 2+2?"),
            art03("t1", "t1:stream", "what is 2+2?", meta=oc("final_answer")),
            art03("t1", "t1:stream", "4", meta=oc("final_answer")),
        ]
    )
    assert v.final_answer == "4" and v.ignored_events == 1


def test_equal_text_later_in_a_stream_is_not_an_echo():
    v = view(
        [
            task03("t1", user="ha"),
            art03("t1", "t1:stream", "Ok: ", meta=oc("final_answer")),
            art03("t1", "t1:stream", "ha", append=True, meta=oc("final_answer")),
        ]
    )
    assert v.final_answer == "Ok: ha" and v.ignored_events == 0


def test_several_final_answer_artifacts_last_by_log_position_wins():
    late_wallclock = stored([art03("t1", "t1:stream:b", "B", meta=oc("final_answer"))], start=1)
    early = stored([art03("t1", "t1:stream:a", "A", meta=oc("final_answer"))], start=2)
    # wall clock says b came later (it did not): position decides
    late_wallclock = [
        e.__class__(**{**{f: getattr(e, f) for f in e.__struct_fields__}, "received_at": 9e9}) for e in late_wallclock
    ]
    v = fold_events(late_wallclock + early)["t1"]
    assert v.final_answer == "A"


def test_append_false_resets_then_append_true_appends():
    v = view(
        [
            art03("t1", "t1:stream", "draft", meta=oc("final_answer")),
            art03("t1", "t1:stream", " more", append=True, meta=oc("final_answer")),
            art03("t1", "t1:stream", "Final: ", append=False, meta=oc("final_answer")),
            art03("t1", "t1:stream", "42", append=True, meta=oc("final_answer")),
        ]
    )
    assert v.final_answer == "Final: 42"


# -- opencode blocks ------------------------------------------------------------------------------


def test_blocks_dedup_by_event_id_never_by_text():
    v = view(
        [
            art03("t1", "t1:stream", "ha", meta=blocks("text", event_id="e1", sequence=1)),
            art03("t1", "t1:stream", "ha", append=True, meta=blocks("text", event_id="e2", sequence=2)),
            art03("t1", "t1:stream", "ha", append=True, meta=blocks("text", event_id="e1", sequence=1)),
        ]
    )
    assert v.final_answer == "haha"
    assert v.ignored_events == 1 and v.profile == BLOCKS


def test_blocks_dedup_by_sequence_when_no_event_id_float_sequence_too():
    v = view(
        [
            art03("t1", "t1:stream", "a", meta=blocks("text", sequence=1)),
            art03("t1", "t1:stream", "b", append=True, meta=blocks("text", sequence=2.0)),
            art03("t1", "t1:stream", "b", append=True, meta=blocks("text", sequence=2)),
        ]
    )
    assert v.final_answer == "ab"


def test_blocks_final_snapshot_with_append_true_and_full_text_replaces():
    v = view(
        [
            art03("t1", "t1:stream", "Hello ", meta=blocks("text", event_id="e1")),
            art03("t1", "t1:stream", "world", append=True, meta=blocks("text", event_id="e2")),
            art03(
                "t1",
                "t1:stream",
                "Hello world",
                append=True,
                meta=blocks("text", event_id="e3", source="final_snapshot"),
            ),
        ]
    )
    assert v.final_answer == "Hello world"


def test_blocks_tool_call_data_parts_last_state_wins():
    meta = blocks("tool_call")
    v = view(
        [
            art03(
                "t1",
                "t1:stream:tool_call",
                data={"call_id": "c1", "tool": "bash", "status": "running", "input": {"cmd": "ls"}},
                meta=meta,
            ),
            art03(
                "t1",
                "t1:stream:tool_call",
                data={"call_id": "c2", "tool": "read", "status": "running"},
                append=True,
                meta=meta,
            ),
            art03(
                "t1",
                "t1:stream:tool_call",
                data={"call_id": "c1", "tool": "bash", "status": "completed", "input": {"cmd": "ls"}, "output": "a\nb"},
                append=True,
                meta=meta,
            ),
        ]
    )
    calls = {t.call_id: t for t in v.tool_calls}
    assert calls["c1"].status == "completed" and calls["c1"].output == "a\nb" and calls["c1"].input == {"cmd": "ls"}
    assert calls["c2"].status == "running" and calls["c2"].tool == "read"


# -- opencode lanes -------------------------------------------------------------------------------


def test_lanes_from_artifact_ids_alone():
    v = view(
        [
            art03("t1", "t1:stream:reasoning", "hmm"),
            art03("t1", "t1:stream:text", "It "),
            art03("t1", "t1:stream:text", "works", append=True),
            art03("t1", "t1:stream:tool:prt_1", data={"call_id": "prt_1", "tool": "read", "status": "pending"}),
            art03(
                "t1",
                "t1:stream:tool:prt_1",
                data={"call_id": "prt_1", "tool": "read", "status": "completed", "output": "x"},
                append=True,
            ),
        ]
    )
    assert (v.final_answer, v.reasoning, v.profile) == ("It works", "hmm", LANES)
    assert [(t.call_id, t.status, t.output) for t in v.tool_calls] == [("prt_1", "completed", "x")]


def test_lanes_error_lane_becomes_the_error():
    v = view([art03("t1", "t1:error", "boom"), status03("t1", "failed")])
    assert v.error == "boom" and v.state == "failed"
    assert [a.channel for a in v.artifacts] == ["error"]


def test_profile_choice_per_event():
    def chunk(meta=None, aid="t1:stream:text"):
        return classify("t1", decode_item(art03("t1", aid, "x", meta=meta)).body)

    assert chunk(oc("final_answer")).profile == CHANNELS
    assert chunk(blocks("text")).profile == BLOCKS
    assert chunk().profile == LANES
    assert chunk(aid="other:stream:text").profile == GENERIC  # another task's id is no lane


# -- lifecycle ------------------------------------------------------------------------------------


def codes(v):
    return [f.code for f in v.faults]


def test_events_after_terminal_are_a_fault():
    v = view([status03("t1", "completed"), art03("t1", "a", "late")])
    assert "events-after-terminal" in codes(v)


def test_terminal_state_that_changes_is_a_fault():
    v = view([status03("t1", "completed"), status03("t1", "failed")])
    assert v.state == "failed" and "terminal-changed" in codes(v)


def test_finished_task_going_back_to_working_is_a_fault_in_both_dialects():
    assert "terminal-changed" in codes(view([status03("t1", "completed"), status03("t1", "working")]))
    v = view([status10("t1", "TASK_STATE_COMPLETED"), status10("t1", "TASK_STATE_WORKING")])
    assert "terminal-changed" in codes(v) and v.state == "working"


def test_repeated_terminal_state_is_not_a_fault():
    v = view([status03("t1", "completed"), task03("t1", "completed")])
    assert codes(v) == []


def test_log_ending_while_working_is_a_fault_but_input_required_is_not():
    assert codes(view([status03("t1", "working")])) == ["closed-while-working"]
    assert codes(view([status03("t1", "working"), status03("t1", "input-required", "more?")])) == []


def test_stream_closed_while_working_then_another_exchange():
    evs = stored([status03("t1", "working"), art03("t1", "a", "x")], exchange=1) + stored(
        [task03("t1", "completed")], exchange=2, start=3
    )
    v = fold_events(evs)["t1"]
    assert codes(v) == ["closed-while-working"] and v.faults[0].positions == [2]


def test_local_failed_folds_like_a_status_update():
    evs = stored([status03("t1", "working")]) + stored(
        [local_failed("t1", "ctx", "recorder restarted")], exchange=None, start=2, origin="local"
    )
    v = fold_events(evs)["t1"]
    assert v.state == "failed" and v.status_message == "recorder restarted"
    assert not any("the log ends" in f.message for f in v.faults)  # settled: the log does not end working


def test_rpc_error_mid_stream_is_a_fault_and_kept():
    err = b'{"error": {"code": -32603, "message": "agent exploded mid-stream"}, "id": 1, "jsonrpc": "2.0"}'
    v = view([status03("t1", "working"), art03("t1", "a", "chunk-0 "), err])
    assert v.error == "-32603 agent exploded mid-stream"
    assert codes(v) == ["rpc-error", "closed-while-working"] and v.final_answer == "chunk-0 "


def test_undecodable_payload_is_counted_never_raised():
    v = view([b"\xff\xfe not json", b"[1,2", status03("t1", "completed")])
    assert v.undecodable == 2 and v.state == "completed" and v.events == 3
    assert "undecodable" in codes(v)
