"""Serving every golden recording in both dialects: the client rebuilds the same channels.

Each recorded send of ``recordings/*.jsonl`` is replayed through the transport as a v1.0 and as a
v0.3 request; the items the client receives, folded by the projection, give the same task state,
final answer, reasoning, tool calls and artifacts as the recording itself (converted or not).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import msgspec
import pytest
from httpx_sse import connect_sse

from a2a_tape.fold.projection import fold_events
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.transport import ReplayTransport
from a2a_tape.store import StoredEvent, decode_item
from tests.replay._record import headers_for

RECORDINGS = sorted((Path(__file__).resolve().parents[3] / "recordings").glob("*.jsonl"))


class _Req(msgspec.Struct):
    jsonrpc: str
    id: int
    method: str
    params: msgspec.Raw


def as_dialect(body: bytes, dialect: str) -> bytes:
    """The recorded request re-aimed at ``dialect`` (same params: the server reads both spellings)."""
    req = msgspec.json.decode(body, type=_Req)
    stream = req.method in ("message/stream", "SendStreamingMessage")
    method = {
        ("1.0", True): "SendStreamingMessage",
        ("1.0", False): "SendMessage",
        ("0.3", True): "message/stream",
        ("0.3", False): "message/send",
    }[(dialect, stream)]
    return msgspec.json.encode(_Req("2.0", 5, method, req.params))


def channels(views) -> dict:
    return {
        t: (
            v.state,
            v.final_answer,
            v.reasoning,
            [(c.call_id, c.status) for c in v.tool_calls],
            [(a.artifact_id, a.channel, a.text) for a in v.artifacts],
        )
        for t, v in views.items()
    }


def as_events(payloads: list[bytes]) -> list[StoredEvent]:
    return [
        StoredEvent(
            position=i + 1,
            task_id=decode_item(p).task_id,
            seq=i + 1,
            exchange_id=1,
            sse_event=None,
            payload=p,
            received_at=0.0,
            mono=None,
            origin="upstream",
        )
        for i, p in enumerate(payloads)
    ]


@pytest.mark.parametrize("tape", RECORDINGS, ids=[p.stem for p in RECORDINGS])
@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_golden_recordings_replay_to_the_same_channels_in_both_dialects(tape, dialect):
    lib = Library.open(tape)
    try:
        episodes = [ep for ep in lib.episodes if ep.operation == "stream"]
        if not episodes:
            pytest.skip("no streamed send in this recording")
        expected = channels(fold_events(as_events([s.recorded for ep in episodes for s in ep.served])))
        got: list[bytes] = []
        with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(lib, match="order"))) as c:
            for ep in episodes:
                with connect_sse(
                    c,
                    "POST",
                    "http://agent.test/",
                    content=as_dialect(ep.exchange.request_body, dialect),
                    headers=headers_for(dialect),
                ) as es:
                    got += [s.data.encode() for s in es.iter_sse()]
    finally:
        lib.close()
    items = [decode_item(p) for p in got]
    assert {i.dialect for i in items if i.kind not in ("error", "undecodable")} <= {dialect}
    assert channels(fold_events(as_events(got))) == expected
