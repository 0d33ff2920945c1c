"""A run's contract (:mod:`inspection.run_contract`) is one promise whichever way the run's events
come to it, a parametrised property over each path:

- ``log``: a run read back from the log (:func:`contract`: each event decoded once, a plain text
  chunk only peeked);
- ``stream``: a live run as verify's sink hands it over while it is recorded (batches of any size,
  each item as the capture made it: a peeked chunk or a decoded item; the events filed under the
  recorded task while the payloads name the live agent's);
- ``decoded``: every event decoded in full, one batch (no fast path at all).

Hypothesis draws the runs: a Task, states, plain text chunks (appends, replaces, ``lastChunk``,
text after it, named and unnamed, opencode-lane ids the fast fold declines), chunks with opencode
metadata, errors, agent messages, a local note of a2a-tape's; in either dialect.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_tape.inspection.doctor import findings
from a2a_tape.inspection.run_contract import Contract, ContractBuilder, contract
from a2a_tape.store import Exchange, Item, StoredEvent
from a2a_tape.store.decode import TextChunk, decode_item, local_note, peek_text_chunk
from tests.replay.inspect.builders import Items

TASK = "task-0a1b"
FILED = "task-recorded"  # a live run is filed under the recorded task's id
EX = Exchange(id=1, started_at=1000.0, ended_at=1000.5, rpc_method="SendStreamingMessage", binding="jsonrpc")
META = {"opencode": {"channel": "final_answer", "message_id": "m1"}}


def _event(draw_kind: tuple, it: Items) -> bytes:
    kind, a, b, c = draw_kind
    if kind == "task":
        return it.task()
    if kind == "status":
        return it.status(a)
    if kind == "chunk":
        aid = {"answer": "answer", "lane": f"{TASK}:stream:text", "other": "notes"}[a]
        return it.artifact(aid, f"t{c} ", append=b[0], last=b[1], name="answer" if b[2] else None)
    if kind == "meta":
        return it.artifact(f"{TASK}:stream", f"m{c} ", append=b[0], last=b[1], metadata=META)
    if kind == "message":
        return it._wrap("message", {"messageId": "m-a", "role": "ROLE_AGENT", "parts": [it.part("hi")]}, "message")
    return f'{{"jsonrpc":"2.0","id":1,"error":{{"code":{a},"message":"no"}}}}'.encode()


_kinds = st.one_of(
    st.tuples(st.just("task"), st.none(), st.none(), st.none()),
    st.tuples(st.just("status"), st.sampled_from(["working", "completed", "input-required"]), st.none(), st.none()),
    *[
        st.tuples(
            st.just("chunk"),
            st.sampled_from(["answer", "lane", "other"]),
            st.tuples(st.booleans(), st.booleans(), st.booleans()),
            st.integers(0, 9),
        )
    ]
    * 4,
    st.tuples(st.just("meta"), st.none(), st.tuples(st.booleans(), st.booleans()), st.integers(0, 9)),
    st.tuples(st.just("message"), st.none(), st.none(), st.none()),
    st.tuples(st.just("error"), st.sampled_from([-32004, -32603]), st.none(), st.none()),
)


def _stored(payloads: list[bytes], task_id: str | None, local_at: int | None) -> list[StoredEvent]:
    out = []
    for k, p in enumerate(payloads):
        local = k == local_at
        out.append(
            StoredEvent(
                k + 1,
                task_id,
                k + 1,
                1,
                None,
                local_note("a note", "ours") if local else p,
                1000.0 + k * 0.01,
                k * 0.01,
                "local" if local else "upstream",
            )
        )
    return out


def _as_captured(ev: StoredEvent) -> Item | TextChunk:
    """The item the capture hands a peeking sink: the chunk it peeked, else the decoded item."""
    chunk = peek_text_chunk(ev.payload)
    return chunk if chunk is not None else decode_item(ev.payload)


def _path(path: str, events: Sequence[StoredEvent], cuts: list[int]) -> Contract:
    if path == "log":
        return contract(f"{TASK}@1", FILED, events, [EX])
    builder = ContractBuilder(FILED)
    if path == "decoded":
        builder.take(events, [decode_item(ev.payload) for ev in events])
    else:
        points = sorted({c % (len(events) + 1) for c in cuts} | {0, len(events)})
        for lo, hi in zip(points, points[1:], strict=False):
            builder.take(events[lo:hi], [_as_captured(ev) for ev in events[lo:hi]])
    return builder.contract(f"{TASK}@1", [EX])


@pytest.mark.parametrize("path", ["stream", "decoded"])
@settings(max_examples=150, deadline=None)
@given(
    dialect=st.sampled_from(["1.0", "0.3"]),
    kinds=st.lists(_kinds, min_size=1, max_size=25),
    cuts=st.lists(st.integers(0, 40), max_size=6),
    local_at=st.one_of(st.none(), st.integers(0, 24)),
)
def test_the_contract_is_the_same_whichever_way_the_events_come(path, dialect, kinds, cuts, local_at) -> None:
    it = Items(dialect, TASK)
    payloads = [_event(k, it) for k in kinds]
    events = _stored(payloads, FILED, local_at)
    expected = _path("log", events, [])
    assert _path(path, events, cuts) == expected
    # the contract's doctor entries are doctor's error-level findings, all of them
    full = findings(TASK, events, [EX])
    assert findings(TASK, events, [EX], errors_only=True) == [f for f in full if f.level == "error"]


def test_events_wait_for_the_one_that_names_the_task() -> None:
    """A first error or a message names no task: the fold waits for the event that does (the
    agent's task id, not the one the run is filed under), across batches."""
    it = Items("1.0", TASK)
    events = _stored(
        [
            it._wrap("message", {"messageId": "m", "role": "ROLE_AGENT", "parts": []}, "message"),
            it.task(),
            it.artifact(f"{TASK}:stream:text", "hi", last=True),
            it.status("completed"),
        ],
        FILED,
        None,
    )
    builder = ContractBuilder(FILED)
    builder.take(events[:1], [_as_captured(ev) for ev in events[:1]])
    assert builder.named is None and builder.fold is None
    builder.take(events[1:], [_as_captured(ev) for ev in events[1:]])
    got = builder.contract(f"{TASK}@1", [EX])
    assert got.task_id == TASK and got == contract(f"{TASK}@1", FILED, events, [EX])
    assert got.final_answer == "hi"  # the lane of the agent's task id, read as its channel


PAUSED = {"_take", "_facts", "_fold", "_contract", "_doctor"}
"""The builder's methods that read a batch and make the contract with the cyclic collector paused."""


@pytest.mark.parametrize("path", ["stream", "log", "decoded"])
@pytest.mark.parametrize("was_on", [True, False])
def test_the_collector_waits_while_a_run_is_read_and_is_set_back(path, was_on) -> None:
    """The builder makes no reference cycles: no cyclic collection runs while it reads a batch or
    makes the contract (a long run's objects would be walked again and again for nothing; the one
    due runs once it is done), and the collector is left as it was found, on or off, on each path."""
    it = Items("1.0", TASK)
    chunks = [it.artifact("answer", f"t{k} ", append=k > 0) for k in range(3000)]
    events = _stored([it.task(), *chunks, it.status("completed")], FILED, None)
    inside: list[str] = []

    def seen(phase: str, _info: dict[str, int]) -> None:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name in PAUSED and frame.f_code.co_filename.endswith("run_contract.py"):
                inside.append(frame.f_code.co_name)
            frame = frame.f_back

    gc.callbacks.append(seen)
    if not was_on:
        gc.disable()
    try:
        got = _path(path, events, [1000, 2000])
        assert gc.isenabled() is was_on
    finally:
        gc.callbacks.remove(seen)
        gc.enable()
    assert inside == []  # 3,000 events make tens of thousands of objects: collections would fall inside
    assert got.final_answer == "".join(f"t{k} " for k in range(3000))
