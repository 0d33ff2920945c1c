"""The rule that joins calls without trace context (capture/lineage.py), on hand-made exchange rows: what it
must not join (a follow-up after the caller ended, a client's two sessions, two open sessions at one agent)."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_tape.capture.lineage import END_SLACK, TRACE_EXTENSION, carried, infer
from a2a_tape.store import Exchange


def _ex(
    id_: int, task: str, agent: int, start: float, end: float | None, *, role="proxy", host="h", **message
) -> Exchange:
    body = {"jsonrpc": "2.0", "id": id_, "method": "SendStreamingMessage", "params": {"message": message}}
    return Exchange(
        id=id_,
        task_id=task,
        started_at=start,
        ended_at=end,
        url=f"http://127.0.0.1:{agent}/",
        rpc_method="SendStreamingMessage",
        dialect="1.0",
        request_body=json.dumps(body).encode(),
        role=role,
        host=host,
        context_id=message.get("contextId"),
    )


def test_a_call_inside_one_open_exchange_at_another_agent_is_joined_to_the_innermost():
    rows = [_ex(1, "A", 1, 0.0, 10.0), _ex(2, "B", 2, 1.0, 9.0), _ex(3, "C", 3, 2.0, 8.0)]
    links = infer(rows)
    assert {k: (v.task_id, v.basis) for k, v in links.items()} == {2: ("A", "timing"), 3: ("B", "timing")}


def test_what_is_not_joined():
    after = [_ex(1, "A", 1, 0.0, 1.0), _ex(2, "B", 2, 2.0, 3.0, referenceTaskIds=["A"])]  # A had ended: a follow-up
    assert infer(after) == {}
    clients = [_ex(1, "A", 1, 0.0, 10.0, role="client"), _ex(2, "B", 2, 1.0, 2.0, role="client")]
    assert infer(clients) == {}  # timing alone needs the call to have come to an agent's door (a proxy)
    hosts = [_ex(1, "A", 1, 0.0, 10.0, host="x"), _ex(2, "B", 2, 1.0, 2.0, host="y")]
    assert infer(hosts) == {}  # timing alone needs one clock
    outlives = [_ex(1, "A", 1, 0.0, 2.0), _ex(2, "B", 2, 1.0, 2.0 + END_SLACK + 0.5)]
    assert infer(outlives) == {}  # timing alone needs the call to end inside the caller's exchange
    lagged = [_ex(1, "A", 1, 0.0, 2.0), _ex(2, "B", 2, 1.0, 2.0 + END_SLACK / 2)]
    assert infer(lagged)[2].basis == "timing"  # an inner end stamped a little after the caller's: inside
    two = [_ex(1, "A1", 1, 0.0, 10.0), _ex(2, "A2", 1, 0.5, 10.0), _ex(3, "B", 2, 1.0, 2.0)]
    assert infer(two) == {}  # two sessions open at agent 1: which one called is not in the log
    same_agent = [_ex(1, "A", 1, 0.0, 10.0), _ex(2, "B", 1, 1.0, 2.0)]
    assert infer(same_agent) == {}


def test_stronger_evidence_decides_over_timing():
    rows = [
        _ex(1, "A", 1, 0.0, 10.0, contextId="ctx-a"),
        _ex(2, "X", 3, 0.5, 10.0),  # another session, at another agent, open too
        _ex(3, "B", 2, 1.0, 2.0, contextId="ctx-a"),
    ]
    assert infer(rows)[3].task_id == "A" and infer(rows)[3].basis == "context_id"


def test_trace_context_in_message_metadata_is_read_when_no_header_carries_it():
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    ext = _ex(1, "A", 1, 0.0, 1.0, metadata={TRACE_EXTENSION: {"traceparent": tp, "tracestate": "k=v"}})
    found = carried(ext)
    assert found is not None and found.traceparent == tp and found.tracestate == "k=v" and found.metadata
    flat = _ex(2, "B", 1, 0.0, 1.0, metadata={"traceparent": tp})
    assert carried(flat) is not None and carried(flat).traceparent == tp  # type: ignore[union-attr]
    header = _ex(3, "C", 1, 0.0, 1.0, metadata={"traceparent": tp})
    header.request_headers = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    assert carried(header).traceparent.startswith("00-111")  # type: ignore[union-attr]  # the header wins
    assert infer([_ex(4, "A", 1, 0.0, 10.0), _ex(5, "B", 2, 1.0, 2.0, metadata={"traceparent": tp})]) == {}


# -- the live reading (capture/open_exchanges.py) gives the links the whole log gives ----------------------------

_rows = st.lists(
    st.tuples(
        st.integers(1, 3),  # agent
        st.floats(0.0, 40.0, allow_nan=False).map(lambda x: round(x, 1)),  # start
        st.floats(0.1, 30.0, allow_nan=False).map(lambda x: round(x, 1)),  # duration
        st.sampled_from([None, "ctx-1", "ctx-2"]),  # the message's contextId
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows, refreshes=st.lists(st.floats(0.0, 80.0, allow_nan=False), max_size=8))
def test_the_live_reading_joins_what_the_whole_log_joins(tmp_path_factory, rows, refreshes):
    """Exchanges begin and end over time in a real log; the live export refreshes its open rows now and then
    and looks up each call that ended since: the same caller as :func:`infer` over the finished log."""
    from a2a_tape.capture.open_exchanges import OpenExchanges
    from a2a_tape.capture.span_places import LogWindows
    from a2a_tape.store import open_store

    base = time.time()  # the refreshes' clock is the simulated one (forgotten rows: a scan of the log)
    steps = sorted(
        [(start, 0, k) for k, (_, start, _, _) in enumerate(rows)]
        + [(start + length, 1, k) for k, (_, start, length, _) in enumerate(rows)]
        + [(at, 2, -1) for at in refreshes]
    )
    db = tmp_path_factory.mktemp("live") / "live.db"
    with open_store(db) as log:
        tracker = OpenExchanges(base - 1.0)
        ids: dict[int, int] = {}
        pending: list[int] = []
        live: dict[int, object] = {}

        def look(now: float) -> None:
            tracker.refresh(log, keep_from=pending, now=now)
            windows = LogWindows(log, final=True, open_rows=tracker)
            for ex_id in pending:
                row = log.get_exchange(ex_id)
                assert row is not None
                live[ex_id] = windows.link(row)
            pending.clear()

        for at, kind, k in steps:
            if kind == 0:
                agent, start, _, ctx = rows[k]
                ex = _ex(0, f"t{k}", agent, base + start, None, **({"contextId": ctx} if ctx else {}))
                ex.id, ex.context_id = None, ctx
                ids[k] = log.begin_exchange(ex)
            elif kind == 1:
                log.update_exchange(ids[k], ended_at=base + at)
                pending.append(ids[k])
            else:
                look(base + at)
        look(base + 100.0)
        whole = infer(log.exchanges())
    assert live == {ex_id: whole.get(ex_id) for ex_id in live}


def test_a_live_call_waits_while_its_open_caller_has_not_named_its_task(tmp_path):
    """The live export builds a call's span only once every possible caller (open at another agent when the
    call began) has named its task: before that, :class:`NotYet`; after, the caller's span as its parent."""
    from a2a_tape.capture.otlp import exchange_span, settings
    from a2a_tape.capture.otlp_messages import values
    from a2a_tape.capture.span_places import LogWindows, NotYet
    from a2a_tape.store import NewEvent, open_store

    def event(task: str, ex_id: int, at: float) -> NewEvent:
        update = {"kind": "status-update", "taskId": task, "contextId": "c", "status": {"state": "working"}}
        doc = {"jsonrpc": "2.0", "id": 1, "result": {**update, "final": False}}
        return NewEvent(payload=json.dumps(doc).encode(), task_id=task, exchange_id=ex_id, received_at=at)

    with open_store(tmp_path / "live.db") as log:
        caller = _ex(0, "", 1, 10.0, None)
        caller.id, caller.task_id = None, None  # a blocking send: its task comes with its answer
        p = log.begin_exchange(caller)
        call = _ex(0, "C", 2, 11.0, 12.0)
        call.id = None
        c = log.begin_exchange(call)
        log.append(event("C", c, 11.5))
        s = settings("0", "live.db")
        with pytest.raises(NotYet):
            exchange_span(log, c, s, LogWindows(log))
        log.append(event("P", p, 12.5))  # the caller names its task
        span = exchange_span(log, c, s, LogWindows(log))
        final = exchange_span(log, c, s, LogWindows(log, final=True))
    assert span is not None and final is not None
    assert values(span["attributes"])["a2a_tape.trace_context.source"] == "inferred"
    (link,) = span["links"]
    assert values(link["attributes"])["a2a_tape.link.task.id"] == "P"
    assert span["parent_span_id"] == link["span_id"]
    assert (span["trace_id"], span["parent_span_id"]) == (final["trace_id"], final.get("parent_span_id"))
