"""One rule, one place (issue 31 item 4): each rule below is written in one module of the product,
and every other module asks it. A second copy is caught here, by its text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.packaging.test_namespace import ROOMS

ROOT = Path(__file__).resolve().parents[2]

# (what the rule is, a text only its own module may hold, that module)
RULES = [
    ("the settled states", "TERMINAL_STATES | INTERRUPTED_STATES", "store/events.py"),
    ("the agent-card paths", "/.well-known/agent.json", "store/methods.py"),
    ("the agent-card paths", '"/.well-known/agent-card.json"', "store/methods.py"),
    ("the task-state names", '"input-required", "auth-required"', "store/events.py"),
    ("the task-state names", '"TASK_STATE_INPUT_REQUIRED"', "nowhere"),
    ("a task named by a prefix", ".task_ids_with_prefix(", "store/open_reading.py"),
    ("the header-name pattern", "0-9A-Za-z", "store/headers.py"),
    ("the hop-by-hop headers", '"keep-alive"', "store/headers.py"),
]


def _sources() -> dict[str, str]:
    return {str(f.relative_to(ROOT)): f.read_text() for room in ROOMS for f in sorted((ROOT / room).rglob("*.py"))}


# A local event (a decision of ours) is built in one place, which scrubs its text with the exchange's
# redactor; the store's removal note is the one other writer (its detail is task ids read from the log).
LOCAL_EVENT_HOMES = ["capture/notes.py", "store/removal.py"]


def test_a_local_event_is_built_in_one_place():
    holders = [path for path, src in _sources().items() if 'origin="local"' in src.replace('``origin="local"``', "")]
    assert sorted(holders) == LOCAL_EVENT_HOMES, f"a local event is built in {holders}, not only in {LOCAL_EVENT_HOMES}"


@pytest.mark.parametrize(("rule", "text", "home"), RULES, ids=[f"{r[0]}: {r[1]}" for r in RULES])
def test_each_rule_is_written_once(rule, text, home):
    holders = [path for path, src in _sources().items() if text in src]
    expected = [] if home == "nowhere" else [home]
    assert holders == expected, f"{rule}: {text!r} is written in {holders}, not only in {home}"


# A row of the log's exchanges is begun, committed to and ended through one sequence, the capture
# core's (capture/exchange.py: begin/claim, commit, note, end once, the observer stamped at the begin),
# which every recording driver runs: record and recovery, probe, serve's record modes and verify (the
# recorded-upstream client), RecordingTransport, both proxies, the push receiver and the gRPC
# interceptor. Only the capture room and the store (its backends, and store/tape.py's import, which
# copies finished rows of a tape and drives no live exchange) call the log's row writers. Not product
# code, so not checked here: recordings/make_recordings.py (writes the golden recordings from a
# script) and benchmarks/ (fill a log to measure it); neither drives a live exchange.
ROW_WRITERS = (".begin_exchange(", ".update_exchange(")
ROW_WRITER_ROOMS = ("capture/", "store/")


def _calls_a_row_writer(src: str) -> bool:
    """A call of the log's row writers, or a reference handed to something that calls it
    (``writer.write(st.begin_exchange, ex)``, ``functools.partial(log.update_exchange, ...)``)."""
    return any(w in src or f"{w[:-1]}," in src or f"{w[:-1]})" in src for w in ROW_WRITERS)


def test_only_the_capture_room_and_the_store_write_exchange_rows():
    writers = sorted(
        path for path, src in _sources().items() if _calls_a_row_writer(src) and not path.startswith(ROW_WRITER_ROOMS)
    )
    assert writers == [], (
        f"{writers} begin or end exchange rows themselves: record through the capture core's sequence "
        "(capture.exchange.Capture: begin_writes/claim_writes/whole_writes, commit_writes, end_writes)"
    )
