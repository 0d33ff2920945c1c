"""The projection's fast path (issue 2, rebuild speed) says exactly what the general path says.

``store.peek_text_chunk`` reads a plain text chunk without the full decode and
``TaskFold.apply_text`` folds it without building ``store.events`` objects. These tests check,
on every committed recording and on hand-made edge cases, that (1) whatever the peek accepts,
``decode_item`` decodes to the same ArtifactUpdate, and (2) folding with the fast path on gives
byte-identical views and projection rows to folding with it off.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as hs

import a2a_tape.fold.fold as fold
import a2a_tape.fold.projection as projection
from a2a_tape.fold.projection import Projector, encode_view, fold_events
from a2a_tape.store import ArtifactUpdate, StoredEvent, StreamMeta, open_store
from a2a_tape.store.decode import TextChunk, chunk_update, decode_item, peek_text_chunk
from a2a_tape.store.tape import import_tape

from .builders import art03, blocks, oc, status03, stored, task03

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
TAPES = sorted(RECORDINGS.glob("*.jsonl"))
_enc = msgspec.json.Encoder()


def _v1(update: dict, **frame) -> bytes:
    return _enc.encode({"result": {"artifactUpdate": update}, "id": 1, "jsonrpc": "2.0", **frame})


def _upd(text="hi", **kw) -> dict:
    art = {"artifactId": "a1", "name": "out", "parts": [{"text": text}]}
    art.update(kw.pop("artifact", {}))
    return {"taskId": "t1", "contextId": "c1", "artifact": art, **kw}


# payloads the peek must accept (a plain text chunk in either dialect, or HTTP+JSON's)
PLAIN = [
    _v1(_upd()),
    _v1(_upd(append=True, lastChunk=True)),
    _v1(_upd(append=False, lastChunk=False)),
    _v1(_upd(artifact={"parts": [{"text": "a"}, {"kind": "text", "text": "b"}]})),
    _v1(_upd(artifact={"parts": []})),
    _v1(_upd(artifact={"artifactId": None})),
    _v1({"artifact": {"parts": [{"text": "x"}]}}),  # no task id: named by the stored row only
    _enc.encode({"result": {"artifactUpdate": _upd(), "kind": "status-update"}, "id": "r", "jsonrpc": "2.0"}),
    art03("t1", "a1", "hello", append=True, last=True),
    art03("t1", "a1", "hello"),
    _enc.encode({"artifactUpdate": _upd()}),  # HTTP+JSON's bare StreamResponse (decode_item: a "rest" item)
    _enc.encode({"artifactUpdate": _upd(append=True, lastChunk=True)}),
]

# payloads the peek must leave to decode_item (anything but a plain text chunk)
NOT_PLAIN = [
    _v1(_upd(artifact={"metadata": {"opencode": {"channel": "reasoning", "message_id": "m"}}})),
    _v1(_upd(artifact={"metadata": {}})),
    _v1(_upd(metadata={"shared": {"stream": {"block_type": "text"}}})),
    _v1(_upd(artifact={"parts": [{"kind": "data", "data": {"x": 1}}]})),
    _v1(_upd(artifact={"parts": [{"kind": "file", "text": "f", "file": {"name": "n"}}]})),
    _v1(_upd(artifact={"parts": [{"kind": "weird", "text": "w"}]})),
    _v1(_upd(artifact={"parts": [{"text": None}]})),
    _v1(_upd(artifact={"parts": [{"text": "t", "metadata": {"a": 1}}]})),
    _v1(_upd(extra=1)),  # an unknown field: the general path (which ignores it) decides
    _v1(_upd(), error={"code": 1, "message": "m"}),
    _v1(_upd(), **{"a2a-tape": {"action": "resubscribed"}}),
    _enc.encode({"result": {"artifactUpdate": _upd(), "task": {"id": "t1"}}, "id": 1, "jsonrpc": "2.0"}),
    _enc.encode(
        {
            "result": {
                "kind": "artifact-update",
                "taskId": "t1",
                "artifact": {"parts": [{"text": "x"}]},
                "statusUpdate": {"taskId": "t1"},
            },
            "jsonrpc": "2.0",
        }
    ),
    _enc.encode({"result": {"kind": "artifact-update", "taskId": "t1"}, "jsonrpc": "2.0"}),
    _enc.encode({"result": {"artifactUpdate": {"taskId": "t1"}}, "jsonrpc": "2.0"}),
    _v1(_upd(append="yes")),  # a wrong type: undecodable for both
    _enc.encode({"result": {"artifactUpdate": _upd()}, "jsonrpc": 2}),
    art03("t1", "a1", "x", meta=oc("final_answer")),
    art03("t1", "a1", "x", meta=blocks("text", event_id="e1")),
    status03("t1", "working"),
    task03("t1", "submitted", user="hi"),
    b'{"result": ',
    b"\xff\xfe",
    b"[]",
    b"null",
]


def _recorded_payloads() -> list[bytes]:
    out: list[bytes] = []
    for tape in TAPES:
        with _tmp_store() as st, tape.open("rb") as fh:
            import_tape(st, fh)
            out.extend(ev.payload for ev in st.read_from(0))
    return out


class _tmp_store:
    """A throwaway store in a temporary directory (closed and removed on exit)."""

    def __enter__(self):
        import tempfile

        self._dir = tempfile.TemporaryDirectory()
        self._st = open_store(Path(self._dir.name) / "t.db")
        return self._st

    def __exit__(self, *exc):
        self._st.close()
        self._dir.cleanup()


def _same_as_decode_item(payload: bytes) -> None:
    chunk = peek_text_chunk(payload)
    if chunk is None:
        return
    item = decode_item(payload)
    body = item.body
    assert type(body) is ArtifactUpdate, payload
    assert body.task_id == chunk.taskId and body.context_id == chunk.contextId
    assert body.artifact.artifact_id == (chunk.artifact.artifactId or "")
    assert body.artifact.meta == StreamMeta()
    assert [p.kind for p in body.artifact.parts] == ["text"] * len(chunk.artifact.parts)
    assert [p.text for p in body.artifact.parts] == [p.text for p in chunk.artifact.parts]
    assert body.append is (chunk.append is True) and body.last_chunk is (chunk.lastChunk is True)
    assert chunk_update(chunk) == body, payload  # the general model, made from the chunk alone (verify's doctor)


@pytest.mark.parametrize("payload", PLAIN)
def test_plain_chunks_take_the_fast_path_and_agree(payload):
    assert peek_text_chunk(payload) is not None
    _same_as_decode_item(payload)


@pytest.mark.parametrize("payload", NOT_PLAIN)
def test_anything_else_goes_to_decode_item(payload):
    assert peek_text_chunk(payload) is None


def test_every_recorded_payload_agrees():
    payloads = _recorded_payloads()
    assert len(payloads) > 50
    peeked = 0
    for p in payloads:
        _same_as_decode_item(p)
        peeked += peek_text_chunk(p) is not None
    assert peeked > 10  # the sdk recordings' chunks take the fast path


def _fold_all(payload_sets, monkeypatch, fast: bool) -> list[bytes]:
    if not fast:
        monkeypatch.setattr(fold, "peek_text_chunk", lambda payload: None)
    out = []
    for evs in payload_sets:
        views = fold_events(evs)
        out.extend(encode_view(views[k]) for k in sorted(views))
    monkeypatch.undo()
    return out


def test_fold_with_and_without_the_fast_path_is_identical(monkeypatch):
    sets = []
    for tape in TAPES:
        with _tmp_store() as st, tape.open("rb") as fh:
            import_tape(st, fh)
            sets.append(list(st.read_from(0)))
    # edge cases a fold must see through the fast path: lane-like ids, text after lastChunk,
    # a chunk after the terminal state, a replace after append, no task id in the row
    edge = [
        task03("t1", "working", user="hi"),
        art03("t1", "a1", "one ", append=False),
        art03("t1", "a1", "two", append=True, last=True),
        art03("t1", "a1", "late", append=True),
        art03("t1", "t1:stream:text", "lane ", append=False),
        art03("t1", "t1:stream:text", "text", append=True),
        art03("t1", "t1-but-not-a-lane", "x"),
        status03("t1", "completed"),
        art03("t1", "a2", "after", append=False),
        *PLAIN,
    ]
    sets.append(stored(edge, "t1"))
    sets.append(stored(PLAIN, None, exchange=None))
    sets.append(stored([*edge[:3], *edge[3:]], "t1", exchange=2) + stored(edge, "t1", exchange=3, start=100))
    fast = _fold_all(sets, monkeypatch, True)
    slow = _fold_all(sets, monkeypatch, False)
    assert fast == slow
    assert len(fast) >= len(TAPES)


def test_projector_rows_with_and_without_the_fast_path_are_identical(tmp_path, monkeypatch):
    def rows(fast: bool, name: str) -> list[tuple[str, bytes]]:
        if not fast:
            monkeypatch.setattr(fold, "peek_text_chunk", lambda payload: None)
        with open_store(tmp_path / f"{name}.db") as st:
            for tape in TAPES:
                with tape.open("rb") as fh:
                    import_tape(st, fh)
            Projector(st, cache_size=3, commit_every=17).rebuild()
            got = list(st.projection_rows("tasks", batch=4))
        monkeypatch.undo()
        return got

    fast, slow = rows(True, "fast"), rows(False, "slow")
    assert fast == slow and len(fast) > 10


def test_rebuild_rows_do_not_depend_on_the_fresh_lookup_cap(tmp_path, monkeypatch):
    """A rebuild skips row lookups for tasks it has not held yet, up to a cap of task ids; past
    the cap it looks rows up again. Rows are the same either way (tiny cache: many reloads)."""

    def rows(cap: int, name: str) -> list[tuple[str, bytes]]:
        monkeypatch.setattr(projection, "_FRESH_MAX_TASKS", cap)
        with open_store(tmp_path / f"{name}.db") as st:
            for tape in TAPES:
                with tape.open("rb") as fh:
                    import_tape(st, fh)
            Projector(st, cache_size=2, commit_every=5).rebuild()
            got = list(st.projection_rows("tasks"))
        monkeypatch.undo()
        return got

    assert rows(2, "capped") == rows(1_000_000, "uncapped") != []


def _chunk_payload(aid: str | None, parts: int, append: bool | None, last: bool | None, ctx: str | None) -> bytes:
    update: dict = {"taskId": "t1", "artifact": {"parts": [{"text": f"p{k} "} for k in range(parts)]}}
    if aid is not None:
        update["artifact"]["artifactId"] = aid
    if ctx is not None:
        update["contextId"] = ctx
    if append is not None:
        update["append"] = append
    if last is not None:
        update["lastChunk"] = last
    return _v1(update)


# mostly the hot case (appends of one part to one artifact from one exchange), each variation rare
_text_event = hs.tuples(
    hs.builds(
        _chunk_payload,
        hs.sampled_from(["a1"] * 6 + ["a2", None, "t1:stream:text"]),
        hs.sampled_from([1] * 6 + [0, 2]),
        hs.sampled_from([True] * 6 + [False, None]),
        hs.sampled_from([None] * 6 + [False, True]),
        hs.sampled_from(["c1"] * 8 + [None]),
    ),
    hs.sampled_from([1] * 8 + [2, None]),
)
_other_event = hs.tuples(
    hs.sampled_from([status03("t1", "working"), status03("t1", "completed"), task03("t1", "working", user="hi")]),
    hs.sampled_from([1, 2]),
)
_A = _chunk_payload("a1", 1, True, None, "c1")  # the hot case


@settings(max_examples=400, deadline=None)
@given(hs.lists(hs.one_of(_text_event, _text_event, _text_event, _text_event, _other_event), min_size=1, max_size=60))
@example([(_A, 1)] * 3 + [(_chunk_payload("a1", 1, True, True, "c1"), 1)] + [(_A, 1)] * 3)  # text after lastChunk
@example([(_A, 1)] * 2 + [(status03("t1", "completed"), 1)] + [(_A, 1)] * 3)  # text after the terminal state
@example([(_chunk_payload("a1", 1, True, None, None), 1)] + [(_A, 1)] * 3)  # no context id at first
@example([(_A, 1)] * 2 + [(_A, 2)] * 2 + [(_A, None)] * 2 + [(_A, 1)])  # another exchange, none
@example([(_A, 1)] * 2 + [(_chunk_payload("a1", 2, True, None, "c1"), 1), (_A, 1)])  # two parts
@example([(_A, 1)] * 2 + [(_chunk_payload("a1", 1, False, None, "c1"), 1), (_A, 1)])  # a replace
@example([(_chunk_payload("t1:stream:text", 1, True, None, "c1"), 1)] * 3)  # lane-like ids
def test_a_batch_of_text_chunks_folds_as_one_chunk_at_a_time(events):
    """``TaskFold.apply_texts`` (the recorder folds a stream's batch with it) leaves the same state
    as one ``fold`` per event: appends to one artifact, replaces, lastChunk, text after lastChunk or
    after the terminal state, lane-like ids, several parts, another exchange, no context id yet."""
    evs = [
        StoredEvent(k + 1, "t1", k + 1, ex, None, p, 1000.0 + k, None, "upstream") for k, (p, ex) in enumerate(events)
    ]
    one = fold.TaskFold("t1")
    for ev in evs:
        _, chunk, item = fold.route(ev.task_id, ev.payload)
        one.fold(ev.position, ev.seq, ev.exchange_id, ev.received_at, ev.payload, chunk, item)
    batched = fold.TaskFold("t1")
    run: list[tuple[StoredEvent, TextChunk]] = []
    for ev in [*evs, None]:
        routed = fold.route(ev.task_id, ev.payload) if ev is not None else (None, None, None)
        if routed[1] is not None:
            run.append((ev, routed[1]))
            continue
        if run:
            batched.apply_texts([e for e, _ in run], [c for _, c in run])
            run = []
        if ev is not None:
            batched.fold(ev.position, ev.seq, ev.exchange_id, ev.received_at, ev.payload, None, routed[2])
    assert msgspec.json.encode(batched.s) == msgspec.json.encode(one.s)
    assert encode_view(batched.view()) == encode_view(one.view())
