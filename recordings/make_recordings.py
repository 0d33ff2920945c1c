"""Regenerate the golden recordings: ``python recordings/make_recordings.py [FIXTURES_DIR]``.

Each case is appended to a fresh event log through the store API (exchanges + events, as the
recorder would write them), exported as a JSONL tape (``<name>.jsonl``, header time fixed so the
file is reproducible), and its projection written next to it as ``<name>.expected.json``: the
``a2a-tape channels --json`` of each task, one list per tape, in order of first appearance.
``projections.sha256`` is the digest of every projected view (``replay.views_digest``).

The a2a-sdk cases are parsed from the raw captures of a real a2a-sdk 1.3.0 agent (FIXTURES_DIR,
default ``../shared/fixtures/a2a-sdk-1.3.0``); the opencode cases are written here, after the
contracts of docs/design.md section 4 and the first user's four acceptance cases. Review the expected
files by eye after a regeneration: they are the spec the tests hold the projection to.
"""

from __future__ import annotations

import ast
import re
import sys
import tempfile
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from a2a_tape.store import Exchange, NewEvent, open_store  # noqa: E402
from a2a_tape.store.tape import TapeHeader, export_lines  # noqa: E402

T0 = 1796004536.0  # 2026-11-30T02:08:56Z, the capture session
URL = "http://127.0.0.1:8765/"
_enc = msgspec.json.Encoder()


class Case:
    """One tape under construction: exchanges and their events, in log order."""

    def __init__(self, name: str, description: str) -> None:
        self.name = name
        self.description = description
        self.steps: list[tuple[Exchange, list[tuple[str | None, bytes, str | None, str]]]] = []

    def exchange(
        self,
        *,
        rpc: str,
        dialect: str,
        task_id: str | None,
        context_id: str | None = None,
        streaming: bool = True,
        outcome: str = "closed",
        text: str = "hello",
    ) -> list[tuple[str | None, bytes, str | None, str]]:
        body = _enc.encode(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": rpc,
                "params": {"message": {"role": "user", "parts": [{"kind": "text", "text": text}]}},
            }
        )
        headers = {"A2A-Version": "1.0"} if dialect == "1.0" else {}
        ex = Exchange(
            url=URL,
            rpc_method=rpc,
            dialect=dialect,
            streaming=streaming,
            request_headers=headers,
            request_body=body,
            status=200,
            content_type="text/event-stream; charset=utf-8" if streaming else "application/json",
            outcome=outcome,
            task_id=task_id,
            context_id=context_id,
            role="client",
        )
        events: list[tuple[str | None, bytes, str | None, str]] = []
        self.steps.append((ex, events))
        return events

    def write(self) -> list[str]:
        """Build the log, export the tape; return the task ids in order of first appearance."""
        with tempfile.TemporaryDirectory() as tmp:
            st = open_store(Path(tmp) / "case.db")
            with st:
                clock = T0
                tasks: dict[str, None] = {}
                for ex, events in self.steps:
                    ex.started_at = clock
                    ex_id = st.begin_exchange(ex)
                    start = clock
                    for task_id, payload, sse_event, origin in events:
                        clock += 0.05
                        st.append(
                            NewEvent(
                                payload=payload,
                                task_id=task_id,
                                exchange_id=ex_id,
                                sse_event=sse_event,
                                received_at=round(clock, 3),
                                mono=round(clock - start, 3),
                                origin=origin,
                            )
                        )
                        if task_id is not None:
                            tasks[task_id] = None
                    clock += 0.05
                    st.update_exchange(ex_id, ended_at=round(clock, 3))
                    clock += 0.5
                lines = list(export_lines(st, source=f"recordings/make_recordings.py: {self.name}"))
        header = msgspec.json.decode(lines[0], type=TapeHeader)
        header.exported_at = 0.0
        lines[0] = msgspec.json.encode(header) + b"\n"
        (HERE / f"{self.name}.jsonl").write_bytes(b"".join(lines))
        return list(tasks)


# -- the a2a-sdk 1.3.0 captures ----------------------------------------------------------------


def _raw_payloads(block: str) -> list[tuple[bytes, str | None]]:
    """The ``data:`` payloads (and ``event:`` names) of a capture block, as the wire had them."""
    out: list[tuple[bytes, str | None]] = []
    event: str | None = None
    for m in re.finditer(r"(?:RAW|\] )\s*('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", block):
        line = ast.literal_eval(m.group(1)).rstrip("\r\n")
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            out.append((line[5:].strip().encode(), event))
            event = None
    return out


def _section(text: str, start: str, end: str | None) -> str:
    i = text.index(start)
    j = text.index(end, i) if end else len(text)
    return text[i:j]


def _task_of(payload: bytes) -> str | None:
    from a2a_tape.store import decode_item

    return decode_item(payload).task_id


def sdk_cases(fixtures: Path) -> list[Case]:
    cap1 = (fixtures / "capture1.txt").read_text()
    cases = []

    def stream_case(name: str, desc: str, block: str, rpc: str, dialect: str) -> Case:
        case = Case(name, desc)
        payloads = _raw_payloads(block)
        task = _task_of(payloads[0][0])
        evs = case.exchange(rpc=rpc, dialect=dialect, task_id=task)
        for p, sse in payloads:
            evs.append((task, p, sse, "upstream"))
        return case

    cases.append(
        stream_case(
            "sdk-v10-stream",
            "a2a-sdk 1.3.0, v1.0 SendStreamingMessage: submitted, working, 3 chunks, completed (capture1 T1)",
            _section(cap1, "===== T1 ", "===== T2 "),
            "SendStreamingMessage",
            "1.0",
        )
    )
    cases.append(
        stream_case(
            "sdk-v03-stream",
            "a2a-sdk 1.3.0, v0.3 message/stream: the same stream in the v0.3 dialect (capture1 T3)",
            _section(cap1, "===== T3 ", "===== T4 "),
            "message/stream",
            "0.3",
        )
    )

    case = Case(
        "sdk-input-required",
        "a2a-sdk 1.3.0, input-required in both dialects (capture1 T8 v1.0, T8b v0.3): interrupted, not failed",
    )
    for block, rpc, dialect in (
        (_section(cap1, "===== T8 ", "===== T8b "), "SendStreamingMessage", "1.0"),
        (_section(cap1, "===== T8b ", "===== T9a "), "message/stream", "0.3"),
    ):
        payloads = _raw_payloads(block)
        task = _task_of(payloads[0][0])
        evs = case.exchange(rpc=rpc, dialect=dialect, task_id=task, text="please ask me")
        evs.extend((task, p, sse, "upstream") for p, sse in payloads)
    cases.append(case)

    # resubscribe: S1 dropped after the first event, SUB = snapshot (replaces) + new chunks
    resub = (fixtures / "capture_resub.txt").read_text()
    case = Case(
        "sdk-resubscribe",
        "a2a-sdk 1.3.0: stream dropped after 1 event, SubscribeToTask snapshot replaces artifacts, then chunk-1/2 (capture_resub S1+SUB)",
    )
    s1 = [l for l in resub.splitlines() if " S1] 'data:" in l]
    sub = [l for l in resub.splitlines() if " SUB] 'data:" in l]
    p_s1 = _raw_payloads("\n".join(l.replace(" S1] ", "] ") for l in s1))
    p_sub = _raw_payloads("\n".join(l.replace(" SUB] ", "] ") for l in sub))
    task = _task_of(p_s1[0][0])
    evs = case.exchange(rpc="SendStreamingMessage", dialect="1.0", task_id=task, outcome="dropped")
    evs.extend((task, p, sse, "upstream") for p, sse in p_s1)
    evs = case.exchange(rpc="SubscribeToTask", dialect="1.0", task_id=task)
    evs.extend((task, p, sse, "upstream") for p, sse in p_sub)
    cases.append(case)

    boom = (fixtures / "capture_boom.txt").read_text()
    case = Case(
        "sdk-boom",
        "a2a-sdk 1.3.0: the agent raises mid-stream, v1.0 'event: error' then v0.3 plain data error (capture_boom)",
    )
    for tag, rpc, dialect in (("BOOM", "SendStreamingMessage", "1.0"), ("BOOM03", "message/stream", "0.3")):
        lines = [l.replace(f" {tag}] ", "] ") for l in boom.splitlines() if l.endswith("'") and f" {tag}] " in l]
        payloads = _raw_payloads("\n".join(lines))
        task = _task_of(payloads[0][0])
        evs = case.exchange(rpc=rpc, dialect=dialect, task_id=task, outcome="error", text="boom")
        evs.extend((task, p, sse, "upstream") for p, sse in payloads)  # the error event is keyed by its exchange's task
    cases.append(case)

    early = (fixtures / "capture_early.txt").read_text()
    case = Case(
        "sdk-closed-working",
        "a2a-sdk 1.3.0: the stream closed while WORKING, a GetTask still says WORKING (capture_early)",
    )
    payloads = _raw_payloads(early)
    task = _task_of(payloads[0][0])
    evs = case.exchange(rpc="SendStreamingMessage", dialect="1.0", task_id=task, outcome="closed")
    evs.extend((task, p, sse, "upstream") for p, sse in payloads)
    get_task = next(l for l in early.splitlines() if l.startswith('{"result"'))
    evs = case.exchange(rpc="GetTask", dialect="1.0", task_id=task, streaming=False, outcome="ok")
    evs.append((task, get_task.encode(), None, "upstream"))
    cases.append(case)
    return cases


# -- opencode cases (the first user's contract, blocks and lanes) --------------------------------


def _v03(result: dict) -> bytes:
    return _enc.encode({"jsonrpc": "2.0", "id": 1, "result": result})


def _v10(kind: str, body: dict) -> bytes:
    return _enc.encode({"jsonrpc": "2.0", "id": 1, "result": {kind: body}})


def _task03(task: str, ctx: str, text: str) -> bytes:
    return _v03(
        {
            "kind": "task",
            "id": task,
            "contextId": ctx,
            "status": {"state": "submitted"},
            "history": [
                {
                    "kind": "message",
                    "role": "user",
                    "messageId": f"u-{task}",
                    "taskId": task,
                    "contextId": ctx,
                    "parts": [{"kind": "text", "text": text}],
                }
            ],
        }
    )


def _status03(task: str, ctx: str, state: str, final: bool = False, message: str | None = None) -> bytes:
    status: dict = {"state": state}
    if message is not None:
        status["message"] = {
            "kind": "message",
            "role": "agent",
            "messageId": f"s-{task}-{state}",
            "parts": [{"kind": "text", "text": message}],
        }
    return _v03({"kind": "status-update", "taskId": task, "contextId": ctx, "status": status, "final": final})


def _oc(
    task: str,
    ctx: str,
    aid: str,
    channel: str,
    text: str,
    *,
    append: bool,
    last: bool = False,
    source: str | None = None,
    message_id: str | None = "m1",
    role: str | None = None,
) -> bytes:
    meta: dict = {"channel": channel, "event_type": "delta"}
    if message_id is not None:
        meta["message_id"] = message_id
    if source is not None:
        meta["source"] = source
    if role is not None:
        meta["role"] = role
    return _v03(
        {
            "kind": "artifact-update",
            "taskId": task,
            "contextId": ctx,
            "append": append,
            "lastChunk": last,
            "artifact": {"artifactId": aid, "parts": [{"kind": "text", "text": text}], "metadata": {"opencode": meta}},
        }
    )


def opencode_channel_cases() -> list[Case]:
    cases = []

    t, c = "oc-order-1", "ctx-oc-1"
    case = Case(
        "opencode-channels-order",
        "opencode channels: reasoning -> tool_call -> final_answer in order, three channels independent",
    )
    evs = case.exchange(rpc="message/stream", dialect="0.3", task_id=t, text="how many files?")
    evs += [
        (t, p, None, "upstream")
        for p in (
            _task03(t, c, "how many files?"),
            _status03(t, c, "working"),
            _oc(t, c, f"{t}:stream:reasoning", "reasoning", "I should list ", append=False),
            _oc(t, c, f"{t}:stream:reasoning", "reasoning", "the directory.", append=True),
            _oc(t, c, f"{t}:stream:tool_call", "tool_call", "ls -1 | wc -l", append=False),
            _oc(t, c, f"{t}:stream:tool_call", "tool_call", " -> 3", append=True, last=True),
            _oc(t, c, f"{t}:stream", "final_answer", "There are ", append=False),
            _oc(t, c, f"{t}:stream", "final_answer", "3 files.", append=True, last=True),
            _status03(t, c, "completed", final=True),
        )
    ]
    cases.append(case)

    case = Case(
        "opencode-final-snapshot",
        "opencode channels: final_answer deltas then a final_snapshot (append=false, then a second task with append=true): one answer, not two; a user echo and an event without message_id are ignored",
    )
    for t, c, snap_append in (("oc-snap-1", "ctx-oc-2", False), ("oc-snap-2", "ctx-oc-2", True)):
        evs = case.exchange(rpc="message/stream", dialect="0.3", task_id=t, text="say hello")
        evs += [
            (t, p, None, "upstream")
            for p in (
                _task03(t, c, "say hello"),
                _status03(t, c, "working"),
                _oc(t, c, f"{t}:stream", "final_answer", "say hello", append=False, role="user"),  # echo, role user
                _oc(t, c, f"{t}:stream", "final_answer", "Hel", append=False),
                _oc(t, c, f"{t}:stream", "final_answer", "lo", append=True, message_id=None),  # no message_id: ignored
                _oc(t, c, f"{t}:stream", "final_answer", "lo wor", append=True),
                _oc(
                    t,
                    c,
                    f"{t}:stream",
                    "final_answer",
                    "Hello world!",
                    append=snap_append,
                    last=True,
                    source="final_snapshot",
                ),
                _status03(t, c, "completed", final=True),
            )
        ]
    cases.append(case)

    t, c = "oc-mix-1", "ctx-oc-3"
    case = Case(
        "opencode-interleaved",
        "opencode channels: several artifacts of one task interleaved chunk by chunk (and a second final_answer artifact): every buffer stable, the last updated answer wins",
    )
    evs = case.exchange(rpc="message/stream", dialect="0.3", task_id=t, text="compare a and b")
    evs += [
        (t, p, None, "upstream")
        for p in (
            _task03(t, c, "compare a and b"),
            _status03(t, c, "working"),
            _oc(t, c, f"{t}:stream:reasoning", "reasoning", "a is ", append=False),
            _oc(t, c, f"{t}:stream", "final_answer", "Draft: ", append=False, message_id="m1"),
            _oc(t, c, f"{t}:stream:tool_call", "tool_call", "read a", append=False),
            _oc(t, c, f"{t}:stream:reasoning", "reasoning", "bigger", append=True),
            _oc(t, c, f"{t}:stream:draft", "final_answer", "(older answer)", append=False, message_id="m0"),
            _oc(t, c, f"{t}:stream", "final_answer", "a > b", append=True, message_id="m1"),
            _oc(t, c, f"{t}:stream:tool_call", "tool_call", "; read b", append=True),
            _oc(t, c, f"{t}:stream:reasoning", "reasoning", " than b.", append=True),
            _oc(t, c, f"{t}:stream", "final_answer", ".", append=True, last=True, message_id="m1"),
            _status03(t, c, "completed", final=True),
        )
    ]
    cases.append(case)

    t, c = "oc-reset-1", "ctx-oc-4"
    case = Case(
        "opencode-append-reset",
        "opencode channels: append=true chunks, then append=false resets the buffer, then append=true appends after the reset",
    )
    evs = case.exchange(rpc="message/stream", dialect="0.3", task_id=t, text="what is six times seven?")
    evs += [
        (t, p, None, "upstream")
        for p in (
            _task03(t, c, "what is six times seven?"),
            _status03(t, c, "working"),
            _oc(t, c, f"{t}:stream", "final_answer", "Let me ", append=False),
            _oc(t, c, f"{t}:stream", "final_answer", "think...", append=True),
            _oc(t, c, f"{t}:stream", "final_answer", "The answer is ", append=False),
            _oc(t, c, f"{t}:stream", "final_answer", "42", append=True, last=True),
            _status03(t, c, "completed", final=True),
        )
    ]
    cases.append(case)
    return cases


def _blk(
    task: str,
    ctx: str,
    aid: str,
    block: str,
    part: dict,
    *,
    seq: int,
    eid: str,
    append: bool,
    source: str | None = None,
    last: bool = False,
) -> bytes:
    hints: dict = {"block_type": block, "message_id": "msg-1", "event_id": eid, "sequence": seq}
    if source:
        hints["source"] = source
    body = {
        "taskId": task,
        "contextId": ctx,
        "artifact": {"artifactId": aid, "parts": [part], "metadata": {"shared": {"stream": hints}}},
    }
    if append:
        body["append"] = True
    if last:
        body["lastChunk"] = True
    return _v10("artifactUpdate", body)


def _task10(task: str, ctx: str, text: str) -> bytes:
    return _v10(
        "task",
        {
            "id": task,
            "contextId": ctx,
            "status": {"state": "TASK_STATE_SUBMITTED"},
            "history": [{"messageId": f"u-{task}", "role": "ROLE_USER", "parts": [{"text": text}]}],
        },
    )


def _status10(task: str, ctx: str, state: str, text: str | None = None) -> bytes:
    status: dict = {"state": state}
    if text is not None:
        status["message"] = {"messageId": f"s-{task}", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    return _v10("statusUpdate", {"taskId": task, "contextId": ctx, "status": status})


def opencode_blocks_case() -> Case:
    t, c = "ob-1", "ctx-ob"
    case = Case(
        "opencode-blocks",
        "opencode blocks (metadata.shared.stream): dedup by event_id after a resubscribe, two equal chunks both kept, tool call as data parts (last state wins), final snapshot with append=true and the full text replaces",
    )
    tool = f"{t}:stream:tool_call"
    evs = case.exchange(rpc="SendStreamingMessage", dialect="1.0", task_id=t, outcome="dropped", text="laugh twice")
    first = [
        _task10(t, c, "laugh twice"),
        _status10(t, c, "TASK_STATE_WORKING"),
        _blk(
            t,
            c,
            f"{t}:stream:reasoning",
            "reasoning",
            {"text": "The user wants a laugh."},
            seq=1,
            eid="e1",
            append=False,
        ),
        _blk(
            t,
            c,
            tool,
            "tool_call",
            {"data": {"call_id": "call-1", "tool": "bash", "status": "running", "input": {"cmd": "echo ha"}}},
            seq=2,
            eid="e2",
            append=False,
        ),
        _blk(t, c, f"{t}:stream", "text", {"text": "ha"}, seq=3, eid="e3", append=False),
    ]
    evs += [(t, p, None, "upstream") for p in first]
    evs = case.exchange(rpc="SubscribeToTask", dialect="1.0", task_id=t, text="")
    snapshot = _v10(
        "task",
        {
            "id": t,
            "contextId": c,
            "status": {"state": "TASK_STATE_WORKING"},
            "artifacts": [
                {
                    "artifactId": f"{t}:stream:reasoning",
                    "parts": [{"text": "The user wants a laugh."}],
                    "metadata": {"shared": {"stream": {"block_type": "reasoning", "message_id": "msg-1"}}},
                },
                {
                    "artifactId": tool,
                    "parts": [
                        {
                            "data": {
                                "call_id": "call-1",
                                "tool": "bash",
                                "status": "running",
                                "input": {"cmd": "echo ha"},
                            }
                        }
                    ],
                    "metadata": {"shared": {"stream": {"block_type": "tool_call", "message_id": "msg-1"}}},
                },
                {
                    "artifactId": f"{t}:stream",
                    "parts": [{"text": "ha"}],
                    "metadata": {"shared": {"stream": {"block_type": "text", "message_id": "msg-1"}}},
                },
            ],
        },
    )
    evs += [
        (t, p, None, "upstream")
        for p in (
            snapshot,  # the resubscribe snapshot: replaces the artifacts with what the server folded so far
            first[4],  # re-sent after the resubscribe: same event_id, dropped
            _blk(
                t, c, f"{t}:stream", "text", {"text": "ha"}, seq=4, eid="e4", append=True
            ),  # equal text, new event: kept
            _blk(
                t,
                c,
                tool,
                "tool_call",
                {
                    "data": {
                        "call_id": "call-1",
                        "tool": "bash",
                        "status": "completed",
                        "input": {"cmd": "echo ha"},
                        "output": "ha",
                    }
                },
                seq=5,
                eid="e5",
                append=True,
            ),
            _blk(
                t,
                c,
                f"{t}:stream",
                "text",
                {"text": "haha"},
                seq=6,
                eid="e6",
                append=True,
                source="final_snapshot",
                last=True,
            ),
            _status10(t, c, "TASK_STATE_COMPLETED"),
        )
    ]
    return case


def _lane(task: str, ctx: str, aid: str, part: dict, *, first: bool, last: bool = False) -> bytes:
    body: dict = {"taskId": task, "contextId": ctx, "artifact": {"artifactId": aid, "parts": [part]}}
    if not first:
        body["append"] = True
    if last:
        body["lastChunk"] = True
    return _v10("artifactUpdate", body)


def opencode_lanes_case() -> Case:
    case = Case(
        "opencode-lanes",
        "opencode lanes (A2A 1.0, no metadata: the artifact id is the lane): text, reasoning, one tool lane per part with whole-state data parts; a second task fails with an error lane",
    )
    t, c = "ol-1", "ctx-ol"
    tool = f"{t}:stream:tool:prt_7"
    evs = case.exchange(rpc="SendStreamingMessage", dialect="1.0", task_id=t, text="read the readme")
    evs += [
        (t, p, None, "upstream")
        for p in (
            _task10(t, c, "read the readme"),
            _status10(t, c, "TASK_STATE_WORKING"),
            _lane(t, c, f"{t}:stream:reasoning", {"text": "Open README.md"}, first=True),
            _lane(t, c, f"{t}:stream:reasoning", {"text": " first."}, first=False),
            _lane(
                t,
                c,
                tool,
                {
                    "data": {
                        "call_id": "prt_7",
                        "tool": "read",
                        "status": "pending",
                        "title": "README.md",
                        "input": {"path": "README.md"},
                    }
                },
                first=True,
            ),
            _lane(
                t,
                c,
                tool,
                {
                    "data": {
                        "call_id": "prt_7",
                        "tool": "read",
                        "status": "completed",
                        "title": "README.md",
                        "input": {"path": "README.md"},
                        "output": "# a2a-tape",
                    }
                },
                first=False,
            ),
            _lane(t, c, f"{t}:stream:text", {"text": "It is the "}, first=True),
            _lane(t, c, f"{t}:stream:text", {"text": "a2a-tape readme."}, first=False),
            _status10(t, c, "TASK_STATE_COMPLETED"),
        )
    ]
    t2 = "ol-2"
    evs = case.exchange(rpc="SendStreamingMessage", dialect="1.0", task_id=t2, text="do the impossible")
    evs += [
        (t2, p, None, "upstream")
        for p in (
            _task10(t2, c, "do the impossible"),
            _status10(t2, c, "TASK_STATE_WORKING"),
            _lane(t2, c, f"{t2}:stream:text", {"text": "Trying"}, first=True),
            _lane(t2, c, f"{t2}:error", {"text": "ProviderAuthError: no API key"}, first=True),
            _status10(t2, c, "TASK_STATE_FAILED", "ProviderAuthError: no API key"),
        )
    ]
    return case


def main(argv: list[str]) -> int:
    fixtures = Path(argv[1]) if len(argv) > 1 else ROOT.parent / "shared" / "fixtures" / "a2a-sdk-1.3.0"
    cases = sdk_cases(fixtures) + opencode_channel_cases() + [opencode_blocks_case(), opencode_lanes_case()]
    from typer.testing import CliRunner

    from a2a_tape.cli import app
    from a2a_tape.fold.projection import TaskView, views_digest

    runner = CliRunner()
    all_views: list[TaskView] = []
    readme = [
        "# Golden recordings",
        "",
        "JSONL tapes (docs/tape-format.md) and, next to each, `<name>.expected.json`: the",
        "`a2a-tape channels --json` of each of its tasks. Regenerate with `python recordings/make_recordings.py`",
        "(then review the expected files); `tests/replay/test_golden.py` checks them, and `projections.sha256`",
        "is the digest of all projected views (a replay determinism check).",
        "",
    ]
    for case in cases:
        task_ids = case.write()
        with tempfile.TemporaryDirectory() as tmp:
            db = str(Path(tmp) / "g.db")
            res = runner.invoke(app, ["import", str(HERE / f"{case.name}.jsonl"), "--db", db])
            assert res.exit_code == 0, res.output
            views = []
            for tid in task_ids:
                res = runner.invoke(app, ["channels", tid, "--db", db, "--json"])
                assert res.exit_code == 0, res.output
                views.append(msgspec.json.decode(res.stdout))
                all_views.append(msgspec.json.decode(res.stdout, type=TaskView))
        (HERE / f"{case.name}.expected.json").write_bytes(
            msgspec.json.format(msgspec.json.encode(views), indent=2) + b"\n"
        )
        readme.append(f"- `{case.name}.jsonl`: {case.description}.")
    (HERE / "projections.sha256").write_text(views_digest(all_views) + "\n")
    (HERE / "README.md").write_text("\n".join(readme) + "\n")
    print(f"wrote {len(cases)} recordings to {HERE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
