"""The rule that joins calls without trace context (capture/lineage.py), on hand-made exchange rows: what it
must not join (a follow-up after the caller ended, a client's two sessions, two open sessions at one agent)."""

from __future__ import annotations

import json

from a2a_tape.capture.lineage import TRACE_EXTENSION, carried, infer
from a2a_tape.store import Exchange


def _ex(id_: int, task: str, agent: int, start: float, end: float, *, role="proxy", host="h", **message) -> Exchange:
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
    outlives = [_ex(1, "A", 1, 0.0, 2.0), _ex(2, "B", 2, 1.0, 3.0)]
    assert infer(outlives) == {}  # timing alone needs the call to end inside the caller's exchange
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
