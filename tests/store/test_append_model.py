"""Appending, checked against a model: any mix of new events, retries and conflicts, in batches.

The model is a dict ``(key, seq) -> payload`` plus the log as a list; every backend must agree
with it after every batch: the same positions, seqs and bytes, and a rejected batch leaves no trace.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st_

from a2a_tape.store import AppendConflict, Exchange, NewEvent

_labels = itertools.count()

# an event: which key (3 tasks, or 2 exchanges without a task), explicit seq or not, which bytes
event = st_.tuples(
    st_.sampled_from(["t1", "t2", "t3", None, None]),
    st_.integers(min_value=0, max_value=1),  # exchange slot for task-less events
    st_.one_of(st_.none(), st_.integers(min_value=1, max_value=6)),
    st_.sampled_from([b"a", b"b", b"\x00\xff", b""]),
)


def _expand(runs: list[tuple]) -> list[tuple]:
    """Runs of events (one key, one exchange, seqs ours or counting up from a given one): the
    shape of a stream's or an import's batch, which the store plans by column."""
    out = []
    for task, slot, first, size, payload in runs:
        out += [(task, slot, None if first is None else first + k, payload) for k in range(size)]
    return out


run = st_.tuples(
    st_.sampled_from(["t1", "t2", None]),
    st_.integers(min_value=0, max_value=1),
    st_.one_of(st_.none(), st_.integers(min_value=1, max_value=8)),
    st_.integers(min_value=1, max_value=70),  # past one 64-row statement
    st_.sampled_from([b"a", b"b"]),
)
batch = st_.one_of(
    st_.lists(event, min_size=1, max_size=8),
    st_.lists(run, min_size=1, max_size=3).map(_expand),
)
batches = st_.lists(batch, min_size=1, max_size=6)


def model_append(model: dict, log: list, batch: list[tuple]) -> list[tuple] | None:
    """What the store must do with ``batch``: the stored rows, or None for a conflict."""
    trial = dict(model)
    new_rows: list[tuple] = []
    out: list[tuple] = []
    nxt: dict = {}
    for key, seq, payload in batch:
        if seq is None:
            seq = nxt.get(key) or 1 + max((s for (k, s) in trial if k == key), default=0)
            nxt[key] = seq + 1
        elif (key, seq) in trial:
            if trial[(key, seq)][0] != payload:
                return None
            out.append(trial[(key, seq)][1])
            continue
        else:
            nxt[key] = max(nxt.get(key) or 1 + max((s for (k, s) in trial if k == key), default=0), seq + 1)
        row = (len(log) + len(new_rows) + 1, key, seq, payload)
        trial[(key, seq)] = (payload, row)
        new_rows.append(row)
        out.append(row)
    model.clear()
    model.update(trial)
    log.extend(new_rows)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batches)
def test_append_agrees_with_the_model(backend, batches):
    st = backend.open(f"model{next(_labels)}")
    exchanges = [st.begin_exchange(Exchange(url=f"http://x/{i}")) for i in range(2)]
    model: dict = {}
    log: list = []
    for batch in batches:
        evs = []
        spec = []
        for task, slot, seq, payload in batch:
            ex = exchanges[slot]
            evs.append(NewEvent(payload=payload, task_id=task, exchange_id=ex, seq=seq))
            spec.append(((task, None) if task is not None else (None, ex), seq, payload))
        expected = model_append(model, log, spec)
        if expected is None:
            before = st.last_position()
            try:
                st.append_batch(evs)
            except AppendConflict:
                pass
            else:
                raise AssertionError(f"no conflict for {spec}")
            assert st.last_position() == before
        else:
            got = st.append_batch(evs)
            assert [(e.position, e.seq, e.payload) for e in got] == [(p, s, b) for p, _, s, b in expected]
    stored = list(st.read_from(0))
    assert [(e.position, e.seq, e.payload) for e in stored] == [(p, s, b) for p, _, s, b in log]
    assert [e.task_id if e.task_id is not None else (None, e.exchange_id) for e in stored] == [
        k[0] if k[0] is not None else k for _, k, _, _ in log
    ]
