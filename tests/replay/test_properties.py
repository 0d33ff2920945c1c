"""Hypothesis properties of the projection (issue 2): order independence across artifacts,
idempotence under re-sent events, incremental == rebuild at any cut, no input can crash it."""

from __future__ import annotations

import os
import tempfile
from functools import partial
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_tape.fold.projection import Projector, encode_view, fold_events
from a2a_tape.store import NewEvent, open_store

from .builders import art03, blocks, oc, status03, stored, task03

# databases on tmpfs when there is one: these properties create hundreds of small logs
_tmpdir = partial(tempfile.TemporaryDirectory, dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(alphabet="ab \n✓", max_size=4)
# one artifact's stream: (text, append?, lastChunk?) chunks in its own order
chunks = st.lists(st.tuples(text, st.booleans(), st.booleans()), min_size=1, max_size=5)
streams = st.lists(chunks, min_size=1, max_size=4)
profiles = st.sampled_from(["generic", "channels", "blocks", "lanes"])


def _artifact_events(i: int, stream, profile: str):
    channel = ["final_answer", "reasoning", "tool_call", "final_answer"][i % 4]
    out = []
    for k, (t, append, last) in enumerate(stream):
        if profile == "generic":
            out.append(art03("t1", f"art-{i}", t, append=append, last=last))
        elif profile == "channels":
            out.append(art03("t1", f"t1:stream:{i}", t, append=append, last=last, meta=oc(channel)))
        elif profile == "blocks":
            out.append(
                art03(
                    "t1",
                    f"t1:stream:{i}",
                    t,
                    append=append,
                    last=last,
                    meta=blocks("text" if channel == "final_answer" else channel, event_id=f"{i}-{k}", sequence=k),
                )
            )
        else:
            lane = ["text", "reasoning", "tool:p1", "tool:p2"][i % 4]
            out.append(art03("t1", f"t1:stream:{lane}", t, append=append, last=last))
    return out


def _model(stream) -> str:
    buf = ""
    for t, append, _ in stream:
        buf = buf + t if append else t
    return buf


@FAST
@given(streams=streams, profile=profiles, data=st.data())
def test_any_interleaving_of_artifacts_gives_the_same_buffers(streams, profile, data):
    per_artifact = [_artifact_events(i, s, profile) for i, s in enumerate(streams)]
    # a random merge that keeps each artifact's own order
    queues = [list(q) for q in per_artifact]
    merged = []
    while any(queues):
        live = [q for q in queues if q]
        q = data.draw(st.sampled_from(live))
        merged.append(q.pop(0))
    sequential = fold_events(stored([p for q in per_artifact for p in q]))["t1"]
    interleaved = fold_events(stored(merged))["t1"]
    buffers = {a.artifact_id: a.text for a in interleaved.artifacts}
    assert buffers == {a.artifact_id: a.text for a in sequential.artifacts}
    assert sorted(buffers.values()) == sorted(_model(s) for s in streams)
    assert interleaved.reasoning == sequential.reasoning
    assert interleaved.ignored_events == 0


@FAST
@given(streams=streams, data=st.data())
def test_duplicated_events_with_an_event_id_change_nothing(streams, data):
    events = [p for i, s in enumerate(streams) for p in _artifact_events(i, s, "blocks")]
    with_dups = list(events)
    for _ in range(data.draw(st.integers(0, 6))):
        src = data.draw(st.integers(0, len(events) - 1))
        original_at = with_dups.index(events[src])
        at = data.draw(st.integers(original_at + 1, len(with_dups)))
        with_dups.insert(at, events[src])
    once = fold_events(stored(events))["t1"]
    twice = fold_events(stored(with_dups))["t1"]
    assert [msgspec.to_builtins(a) for a in twice.artifacts] == [msgspec.to_builtins(a) for a in once.artifacts]
    assert (twice.final_answer, twice.reasoning, twice.tool_calls) == (
        once.final_answer,
        once.reasoning,
        once.tool_calls,
    )
    assert twice.ignored_events == len(with_dups) - len(events)


# a log of several tasks, every kind of item (and garbage)
def _payload(task: str, kind: int, t: str, flag: bool) -> bytes:
    return [
        task03(task, "submitted", user=t or None),
        status03(task, "working"),
        status03(task, "completed" if flag else "failed"),
        art03(task, f"{task}:stream", t, append=flag, meta=oc("final_answer", message_id=None if t == "a" else "m")),
        art03(task, f"{task}:stream:reasoning", t, append=True, meta=oc("reasoning")),
        art03(task, "art-1", t, append=flag, last=not flag),
        art03(task, f"{task}:stream:tool:x", data={"call_id": "x", "status": t, "input": {"v": t}}, append=flag),
        art03(task, f"{task}:stream", t, append=True, meta=blocks("text", event_id=t or "e")),
        task03(task, "working", artifacts=[{"artifactId": "art-1", "parts": [{"kind": "text", "text": t}]}]),
        b'{"error": {"code": -32603, "message": "boom"}, "id": 1, "jsonrpc": "2.0"}',
        b"\xff not json " + t.encode(),
    ][kind]


log_events = st.lists(
    st.tuples(st.sampled_from(["t1", "t2", "t3", "t4"]), st.integers(0, 10), text, st.booleans(), st.integers(1, 3)),
    min_size=1,
    max_size=40,
)


def _new(ev) -> NewEvent:
    task, kind, t, flag, exchange = ev
    return NewEvent(
        payload=_payload(task, kind, t, flag),
        task_id=task,
        received_at=float(len(t)),
        exchange_id=None,
        mono=float(exchange),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=log_events, cut=st.integers(0, 40), cache=st.integers(1, 3), every=st.integers(1, 7))
def test_incremental_at_any_cut_equals_a_full_rebuild_byte_for_byte(events, cut, cache, every):
    cut = min(cut, len(events))
    with _tmpdir() as tmp:
        with (
            open_store(Path(tmp) / "inc.db", durability="normal") as a,
            open_store(Path(tmp) / "full.db", durability="normal") as b,
        ):
            a.append_batch([_new(e) for e in events[:cut]])
            inc = Projector(a, cache_size=cache, commit_every=every)
            inc.catch_up()
            a.append_batch([_new(e) for e in events[cut:]])
            inc.catch_up()
            Projector(a, cache_size=cache).catch_up()  # a second reader finds nothing left to do
            b.append_batch([_new(e) for e in events])
            full = Projector(b)
            full.rebuild()
            got = [encode_view(v) for v in Projector(a).views()]
            want = [encode_view(v) for v in full.views()]
            assert got == want
            assert a.projection_cursor("tasks") == a.last_position()
            # and both equal the pure in-memory fold
            mem = fold_events(b.read_from(0))
            assert want == [encode_view(mem[k]) for k in sorted(mem)]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "result",
                    "error",
                    "kind",
                    "artifact",
                    "artifactUpdate",
                    "statusUpdate",
                    "task",
                    "parts",
                    "text",
                    "data",
                    "metadata",
                    "opencode",
                    "shared",
                    "stream",
                    "append",
                    "status",
                    "state",
                    "artifacts",
                    "history",
                    "message",
                    "taskId",
                    "id",
                    "artifactId",
                    "sequence",
                    "event_id",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(payloads=st.lists(st.binary(max_size=40) | json_values.map(lambda v: msgspec.json.encode(v)), max_size=12))
def test_arbitrary_payloads_never_raise_out_of_the_projector(payloads):
    views = fold_events(stored(payloads))
    if payloads:
        assert views["t1"].events == len(payloads)
    with _tmpdir() as tmp, open_store(Path(tmp) / "x.db", durability="normal") as s:
        s.append_batch([NewEvent(payload=p, task_id="t1") for p in payloads])
        proj = Projector(s)
        assert proj.catch_up() == len(payloads)
        mem = fold_events(s.read_from(0))
        assert [encode_view(v) for v in proj.views()] == [encode_view(v) for v in mem.values()]
