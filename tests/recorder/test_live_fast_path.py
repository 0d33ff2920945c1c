"""The recorder's fast path (issue 3, record speed) shows exactly what the general path shows.

``record`` plans a stream's batches with ``peek`` (:meth:`capture.exchange.Capture.events`): a plain
text chunk is read with the narrow decoder and folded with ``TaskFold.apply_text``; without it
everything is decoded. Recording the same items both ways (the capture core's commit, then
``Session.apply``) must store the same rows and give the same live view, the same errors and the
same task id, on every committed recording, split into batches anywhere, and on hand-made edge cases.
"""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from a2a_tape.capture.exchange import Capture
from a2a_tape.fold.projection import encode_view
from a2a_tape.recorder.session import Session
from a2a_tape.store import open_store
from a2a_tape.store.redact import Redactor
from a2a_tape.store.tape import import_tape
from a2a_tape.store.writer import run_writes

from ..replay.test_fast_path import NOT_PLAIN, PLAIN, TAPES, _tmp_store


def _payload_groups() -> list[list[bytes]]:
    """Each recording's upstream payloads, one list per exchange (as a stream delivers them)."""
    groups: list[list[bytes]] = []
    for tape in TAPES:
        with _tmp_store() as st, tape.open("rb") as fh:
            import_tape(st, fh)
            by_exchange: dict[object, list[bytes]] = {}
            for ev in st.read_from(0):
                if ev.origin == "upstream":
                    by_exchange.setdefault(ev.exchange_id, []).append(ev.payload)
            groups.extend(by_exchange.values())
    return groups


GROUPS = _payload_groups()


def _begin(st, s: Session, method: str = "SendStreamingMessage") -> Capture:
    cap = Capture(Redactor())
    ex = cap.request(url="http://agent/", rpc_method=method, dialect="1.0", streaming=True, headers={})
    run_writes(cap.begin_writes(st, ex, None))
    return cap


def _commit(st, s: Session, cap: Capture, raw, *, peek: bool):
    """One batch as ``record`` commits it: planned (task ids learnt by the session), in the log,
    then folded."""
    new, items = cap.events(raw, peek=peek, ctx=s)
    stored = run_writes(cap.commit_writes(st, new))
    return stored, items, s.apply(stored, items)


def _record(tmp: Path, name: str, payloads: list[bytes], cuts: list[int], *, fast: bool):
    st = open_store(tmp / f"{name}.db")
    s = Session(st)
    cap = _begin(st, s)
    errors = []
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(payloads))), len(payloads)]
    for a, b in zip(bounds, bounds[1:]):
        raw = [(p, None) for p in payloads[a:b]]
        errors += _commit(st, s, cap, raw, peek=fast)[2]
    rows = [(e.task_id, e.seq, e.payload) for e in st.read_from(0)]
    view = s.fold.view()
    shown = None
    if view is not None:  # the wall clock of each run is its own
        shown = {k: v for k, v in msgspec.json.decode(encode_view(view)).items() if k not in ("first_at", "last_at")}
    out = (rows, s.task_id, s.context_id, s.state, s.events, s.fold.final_answer, shown, msgspec.json.encode(errors))
    st.close()
    return out


def test_recordings_recorded_both_ways_agree(tmp_path):
    assert len(GROUPS) >= 12
    rng = random.Random(5)
    for n, payloads in enumerate(GROUPS):
        cuts = rng.sample(range(len(payloads) + 1), k=min(3, len(payloads) + 1))
        assert _record(tmp_path, f"f{n}", payloads, cuts, fast=True) == _record(
            tmp_path, f"s{n}", payloads, cuts, fast=False
        )


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.sampled_from(PLAIN + NOT_PLAIN), min_size=1, max_size=12), hs.lists(hs.integers(0, 12), max_size=4))
def test_any_mix_of_chunks_and_other_items_agrees(payloads, cuts):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        assert _record(tmp, "fast", payloads, cuts, fast=True) == _record(tmp, "slow", payloads, cuts, fast=False)


def test_a_stream_of_plain_chunks_takes_the_fast_path(tmp_path, monkeypatch):
    """A broken fast path (one that decodes everything anyway) fails here."""
    from a2a_tape import store

    calls = []
    real = store.decode_item
    monkeypatch.setattr(store, "decode_item", lambda p: calls.append(p) or real(p))
    st = open_store(tmp_path / "t.db")
    s = Session(st)
    _commit(st, s, _begin(st, s), [(p, None) for p in PLAIN[:3]], peek=True)
    assert calls == [] and s.events == 3 and s.task_id == "t1"
    st.close()


@pytest.mark.parametrize("payload", PLAIN[:2])
def test_without_peek_the_items_come_back_decoded(tmp_path, payload):
    st = open_store(tmp_path / "t.db")
    s = Session(st)
    [ev], [item], _ = _commit(st, s, _begin(st, s, "SendMessage"), [(payload, None)], peek=False)
    assert item.kind == "artifact" and ev.payload == payload
    st.close()
