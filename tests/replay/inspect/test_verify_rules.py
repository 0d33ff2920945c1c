"""What ``verify`` compares (:mod:`replay.inspect.verify_rules`), pure: stored events in, divergences out.

Hypothesis: the same behaviour with other ids (task, context, message, JSON-RPC), other timestamps
and other chunk boundaries, in either dialect, never diverges. A table: each change of the contract
is named by its rule, at the recorded event where it first shows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_tape.inspection.run_contract import Contract, contract
from a2a_tape.inspection.verify_rules import Rules, compare, similar
from a2a_tape.store import Exchange, StoredEvent
from tests.replay.inspect.builders import Items

ROOT = Path(__file__).resolve().parents[3]

ANSWER = "The answer is 42."
Build = Callable[[Items], list[bytes]]
META = {"opencode": {"channel": "final_answer", "message_id": "m1"}}


def _events(payloads: list[bytes], task_id: str, *, t0: float = 1000.0, gap: float = 0.01) -> list[StoredEvent]:
    return [
        StoredEvent(k + 1, task_id, k + 1, 1, None, p, t0 + k * gap, k * gap, "upstream")
        for k, p in enumerate(payloads)
    ]


def _contract(payloads: list[bytes], task_id: str, *, first: float = 0.0, took: float = 0.1) -> Contract:
    events = _events(payloads, task_id)
    if events:
        events[0] = StoredEvent(1, task_id, 1, 1, None, payloads[0], 1000.0, first, "upstream")
    ex = Exchange(id=1, started_at=1000.0, ended_at=1000.0 + took, rpc_method="SendStreamingMessage", binding="jsonrpc")
    return contract(f"{task_id}@1", task_id, events, [ex])


def _story(
    it: Items,
    chunks: list[str],
    *,
    states: tuple[str, ...] = ("working", "completed"),
    last: bool = True,
    answer_id: str | None = None,
    tool_status: str = "completed",
) -> list[bytes]:
    """A task: submitted, WORKING, a reasoning artifact, a tool call, the answer in ``chunks``, completed."""
    aid = answer_id or f"{it.task_id}:stream"
    meta = META
    out = [it.task(), it.status(states[0])]
    out.append(
        it.artifact(
            f"{it.task_id}:stream:reasoning",
            "thinking",
            metadata={"opencode": {"channel": "reasoning", "message_id": "m1"}},
        )
    )
    out.append(
        it.artifact(
            "tool-1",
            data={"tool": "search", "status": tool_status, "call_id": "c1"},
            metadata={"opencode": {"channel": "tool_call", "message_id": "m1"}},
        )
    )
    for k, chunk in enumerate(chunks):
        out.append(it.artifact(aid, chunk, append=k > 0, last=last and k == len(chunks) - 1, metadata=meta))
    out += [it.status(s) for s in states[1:]]
    return out


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(points, points[1:], strict=False) if a < b] or [text]


@settings(max_examples=60, deadline=None)
@given(
    dialect=st.sampled_from(["1.0", "0.3"]),
    cuts_a=st.lists(st.integers(0, 100), max_size=6),
    cuts_b=st.lists(st.integers(0, 100), max_size=6),
    first=st.floats(0.0, 0.05),
)
def test_ids_timestamps_and_chunk_boundaries_never_diverge(dialect: str, cuts_a, cuts_b, first: float) -> None:
    a = Items(dialect, f"task-{uuid.uuid4()}", context_id=str(uuid.uuid4()))
    b = Items(dialect, f"task-{uuid.uuid4()}", context_id=str(uuid.uuid4()), rpc_id=7)
    rec = _contract(_story(a, _split(ANSWER, cuts_a)), a.task_id)
    live = _contract(_story(b, _split(ANSWER, cuts_b)), b.task_id, first=first)
    assert compare(rec, live, Rules(text="exact", slower=3)) == []


def _drop_answer(it: Items) -> list[bytes]:
    return [p for p in _story(it, ["The answer ", "is 42."]) if b':stream"' not in p]


def _cases() -> dict[str, tuple[Build, str, int | None]]:
    """change -> (the live run's payloads, the rule named first, the recorded position it names)."""
    return {
        "state skipped": (lambda it: _story(it, [ANSWER], states=("completed",)), "states", 2),
        "input-required instead": (
            lambda it: _story(it, ["The answer ", "is 42."], states=("working", "input-required")),
            "states",
            7,
        ),
        "lastChunk missing": (lambda it: _story(it, ["The answer ", "is 42."], last=False), "closure", 5),
        "answer dropped": (_drop_answer, "artifacts", 5),
        "answer on a stable id": (lambda it: _story(it, [ANSWER], answer_id="answer"), "artifacts", 5),
        "tool status": (lambda it: _story(it, ["The answer ", "is 42."], tool_status="error"), "tool-calls", 4),
        "answer sent again": (
            lambda it: (
                [
                    *_story(it, ["The answer ", "is 42."])[:-1],
                    it.artifact(f"{it.task_id}:stream", "x", append=True, metadata=META),
                ]
                + [it.status("completed")]
            ),
            "closure",
            5,
        ),
    }


@pytest.mark.parametrize("change", sorted(_cases()))
@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_each_change_is_named_by_its_rule_at_its_first_event(change: str, dialect: str) -> None:
    build, rule, position = _cases()[change]
    a, b = Items(dialect, f"task-{uuid.uuid4()}"), Items(dialect, f"task-{uuid.uuid4()}")
    rec = _contract(_story(a, ["The answer ", "is 42."]), a.task_id)
    live = _contract(build(b), b.task_id)
    found = compare(rec, live)
    assert found, change
    assert (found[0].rule, found[0].recorded.position) == (rule, position), found[0]
    assert found[0].recorded.run == f"{a.task_id}@1" and found[0].live.run == f"{b.task_id}@1"


def test_an_error_code_is_compared_with_its_binding() -> None:
    a, b = Items("1.0", "task-aaaa-1"), Items("1.0", "task-bbbb-2")

    def err(code: int) -> bytes:
        return f'{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"no"}}}}'.encode()

    rec = _contract([a.task(), a.status("working"), err(-32603)], a.task_id)
    same = _contract([b.task(), b.status("working"), err(-32603)], b.task_id)
    other = _contract([b.task(), b.status("working"), err(-32602)], b.task_id)
    assert compare(rec, same) == []
    (first, *_) = compare(rec, other)
    assert (
        first.rule == "errors" and first.recorded.what == "jsonrpc error -32603" and first.live.what.endswith("-32602")
    )


def test_text_is_compared_only_when_asked() -> None:
    a, b = Items("1.0", "task-aaaa-1"), Items("1.0", "task-bbbb-2")
    rec = _contract(_story(a, [ANSWER]), a.task_id)
    close = _contract(_story(b, ["The answer is 42!"]), b.task_id)
    far = _contract(_story(b, ["Something else entirely."]), b.task_id)
    assert compare(rec, far) == [] and compare(rec, far, Rules(text="ignore")) == []
    assert compare(rec, close, Rules(text="similar")) == []
    assert [d.rule for d in compare(rec, close, Rules(text="exact"))] == ["text"]
    assert [d.rule for d in compare(rec, far, Rules(text="similar"))] == ["text"]
    assert similar("abc", "abc") and not similar("abc", "xyz")


def test_times_by_a_factor_with_a_grace() -> None:
    a, b = Items("1.0", "task-aaaa-1"), Items("1.0", "task-bbbb-2")
    rec = _contract(_story(a, [ANSWER]), a.task_id, first=0.1, took=0.2)
    jitter = _contract(_story(b, [ANSWER]), b.task_id, first=0.3, took=0.4)  # 3x, but within the grace
    slow = _contract(_story(b, [ANSWER]), b.task_id, first=0.9, took=1.5)
    assert compare(rec, slow) == []  # off unless asked
    assert compare(rec, jitter, Rules(slower=2)) == []
    assert [d.rule for d in compare(rec, slow, Rules(slower=3))] == ["first-event", "total-time"]


def test_a_new_error_level_finding_of_doctor_diverges() -> None:
    a, b = Items("1.0", "task-aaaa-1"), Items("1.0", "task-bbbb-2")
    rec = _contract(_story(a, [ANSWER]), a.task_id)
    # completed, then working again: doctor's terminal-changed (an error)
    live = _contract([*_story(b, [ANSWER]), b.status("working")], b.task_id)
    rules = [d.rule for d in compare(rec, live)]
    assert "doctor" in rules and rules[0] == "states"


@pytest.mark.parametrize("tape", sorted((ROOT / "recordings").glob("*.jsonl")), ids=lambda p: p.name)
def test_every_golden_recording_verifies_against_its_own_replay(tape: Path, tmp_path: Path) -> None:
    """The recorded client of each golden tape, sent again to a replay of that tape (in process,
    no sockets): every task matches, resubscribes and hand-made requests included."""
    from a2a_tape.fold.runs import task_runs
    from a2a_tape.replay.serve.transport import ReplayTransport
    from a2a_tape.store import open_for_reading, open_store
    from a2a_tape.verify.live import VerifyOptions, verify

    with open_for_reading(tape) as source, open_store(str(tmp_path / "live.db"), create=True) as into:
        recorded = [task_runs(source, t.task_id)[0] for t in source.task_events()]
        opts = VerifyOptions(url="http://agent.test", rules=Rules(text="exact"))
        verdicts = anyio.run(lambda: verify(into, recorded, opts, transport=ReplayTransport(str(tape))))
    assert [(v.task_id, v.verdict, v.divergences) for v in verdicts] == [(r.task_id, "match", []) for r in recorded]
