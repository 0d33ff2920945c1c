"""The one sequence every recording driver writes an exchange row through (capture/exchange.py,
``Capture``'s writes): begin (or begin and claim, or a whole row) stamped with the observer, commits
only after the begin, notes scrubbed, the end written once. Run on real SQLite and PostgreSQL logs;
the drivers that use it are each a path of tests/capture/test_promises.py, and
tests/packaging/test_one_rule.py keeps every other module from writing a row itself."""

from __future__ import annotations

import time

import msgspec
import pytest

from a2a_tape import store
from a2a_tape.capture.exchange import Capture
from a2a_tape.store.observers import new_observer, process_observer
from a2a_tape.store.redact import Redactor
from a2a_tape.store.writer import run_writes

TOKEN = "s3cr3t-t0ken-value"


@pytest.fixture(params=["sqlite", "postgres"])
def log(request, tmp_path):
    """A fresh log of each backend (PostgreSQL: a schema of its own on the session's server)."""
    where = request.getfixturevalue("pg_url") if request.param == "postgres" else tmp_path / "log.db"
    st = store.open_store(where)
    try:
        yield st
    finally:
        st.close()


def _capture(**kw) -> Capture:
    return Capture(Redactor(), secrets=[f"Bearer {TOKEN}"], **kw)


def _request(cap: Capture, role: str = "client") -> store.Exchange:
    return cap.request(
        url="http://agent.example/",
        rpc_method="message/send",
        dialect="0.3",
        streaming=False,
        headers=[("authorization", f"Bearer {TOKEN}")],
        role=role,
    )


ANSWER = (
    b'{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t-live","contextId":"c-1","status":{"state":"completed"}}}'
)


def test_a_row_ends_once(log):
    cap = _capture()
    ex_id = run_writes(cap.begin_writes(log, _request(cap), new_observer("client")))
    first = run_writes(cap.end_writes(log, "ok"))
    again = run_writes(cap.end_writes(log, "error", "a second end"))
    assert first is not None and first["outcome"] == "ok"
    assert again is None  # nothing written: the first end stands
    row = log.get_exchange(ex_id)
    assert row is not None and (row.outcome, row.error) == ("ok", None)


def test_a_row_is_begun_once_and_committed_to_only_once_begun(log):
    cap = _capture()
    new, _ = cap.events([(ANSWER, None)])
    with pytest.raises(RuntimeError, match="before their exchange was begun"):
        run_writes(cap.commit_writes(log, new))
    with pytest.raises(RuntimeError, match="ended before it was begun"):
        run_writes(cap.end_writes(log, "ok"))
    run_writes(cap.begin_writes(log, _request(cap), None))
    with pytest.raises(RuntimeError, match="begun already"):
        run_writes(cap.begin_writes(log, _request(cap), None))


@pytest.mark.parametrize(
    ("role", "given", "source"),
    [
        ("client", True, "in-process"),  # a recorder's own observer
        ("client", False, "client"),  # none given: the process's for its role
        ("probe", False, "probe"),
        ("recovery", False, None),  # a recovery completes the run it recovers
        ("push", False, None),  # a push joins the run that relayed its task
    ],
)
def test_the_begin_stamps_the_observer(log, role, given, source):
    cap = _capture()
    observer = new_observer("in-process") if given else None
    ex_id = run_writes(cap.begin_writes(log, _request(cap, role), observer))
    row = log.get_exchange(ex_id)
    assert row is not None and row.source == source
    if given:
        assert observer is not None and row.observer == observer.id
    elif source is not None:
        assert row.observer == process_observer(role).id
    else:
        assert row.observer is None


def test_every_note_is_scrubbed(log):
    """A note's detail (an error text that quotes the request) loses the exchange's credentials,
    whichever step writes it: a note of the request at the begin, one between, a redaction note at the end."""
    cap = _capture()
    said = f"the agent said: bad header Authorization: Bearer {TOKEN}"
    run_writes(cap.begin_writes(log, _request(cap), None, notes=[("push-token-wrong", said)]))
    run_writes(cap.note_writes(log, "retry", said))
    cap.notes.append(said)
    run_writes(cap.end_writes(log, "error", said))
    events = [e for e in log.read_from(0) if e.origin == "local"]
    assert [msgspec.json.decode(e.payload)["a2a-tape"]["action"] for e in events] == [
        "push-token-wrong",
        "retry",
        "redacted",
    ]
    for e in events:
        assert TOKEN.encode() not in bytes(e.payload) and e.exchange_id == cap.exchange_id
    row = log.get_exchange(cap.exchange_id)
    assert row is not None and row.error is not None and TOKEN not in row.error


def test_a_claim_is_the_begins_transaction(log):
    """A claim that fails leaves no row: the begin and the claim are one commit."""
    cap = _capture()

    def claim(ex_id: int) -> str:
        raise RuntimeError(f"claim of {ex_id} refused")

    with pytest.raises(RuntimeError, match="refused"):
        run_writes(cap.claim_writes(log, _request(cap), None, claim))
    assert list(log.exchanges()) == []
    cap = _capture()
    ex_id, claimed = run_writes(cap.claim_writes(log, _request(cap), None, lambda i: f"claimed {i}"))
    assert claimed == f"claimed {ex_id}" and cap.exchange_id == ex_id


def test_a_whole_row_is_ended_at_its_begin(log):
    cap = _capture()
    open_row = _request(cap)
    with pytest.raises(ValueError, match="not a whole exchange"):
        run_writes(cap.whole_writes(log, open_row, None))
    whole = _request(cap)
    whole.ended_at, whole.outcome, whole.error = time.time(), "error", f"refused: Bearer {TOKEN}"
    ex_id = run_writes(cap.whole_writes(log, whole, None))
    assert run_writes(cap.end_writes(log, "ok")) is None
    row = log.get_exchange(ex_id)
    assert row is not None and row.outcome == "error" and row.error is not None and TOKEN not in row.error


def test_a_row_filed_under_a_task_keeps_every_write_there(log):
    """``filed_under`` (a verify run of a recorded task): the row, its events and notes are the
    recorded task's, whatever id the agent answered with; the payloads keep the agent's own."""
    cap = _capture(filed_under="t-recorded")
    run_writes(cap.begin_writes(log, _request(cap), None))
    new, _ = cap.events([(ANSWER, None)])
    run_writes(cap.commit_writes(log, new))
    run_writes(cap.note_writes(log, "retry", "once more"))
    run_writes(cap.end_writes(log, "ok"))
    row = log.get_exchange(cap.exchange_id)
    assert row is not None and row.task_id == "t-recorded"
    events = list(log.read_from(0))
    assert [e.task_id for e in events] == ["t-recorded", "t-recorded"]
    assert b"t-live" in bytes(events[0].payload)
