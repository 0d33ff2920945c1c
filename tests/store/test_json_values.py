"""store/json_values.py: JSON as the agent wrote it, on every reader.

A number JSON allows and a float cannot hold (``1e999``, ``-1e999``, ``2e-400``), anywhere an
agent may put one (a data part, part metadata, an error's data, task metadata), costs nothing of
the item around it: the answer beside it is shown, folded, served and searched; what is sent on or
folded keeps the digits the agent wrote; redaction by JSON path still reads the payload as JSON.
``NaN`` is not JSON: its item stays unreadable, and says why. A document nested deeper than the
recursion limit is JSON we cannot read (a DecodeError), never a RecursionError."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

from a2a_tape.recorder.proxy.idempotency import request_hash
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.store import decode_item
from a2a_tape.store.json_values import decode_json
from a2a_tape.store.redact import REDACTED, build_redactor
from tests.replay.inspect.builders import Tape, items

NUMBERS = ["1e999", "-1e999", "123456789012345678901234567890.5e400"]  # past a float's range
UNDERFLOW = "2E-400"  # read as 0.0, as every JSON reader does
V03 = {"content-type": "application/json"}


def _artifact(number: str, where: str) -> bytes:
    data = {"kind": "data", "data": {"score": "<N>"}}
    text = {"kind": "text", "text": "the answer"}
    if where == "part metadata":
        text["metadata"] = {"weight": "<N>"}
    art = {"artifactId": "a1", "parts": [text, data], "metadata": {"w": "<N>"} if where == "metadata" else {}}
    frame = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"kind": "artifact-update", "taskId": "t-n", "contextId": "c-n", "artifact": art, "lastChunk": True},
    }
    return json.dumps(frame).replace('"<N>"', number).encode()


@pytest.mark.parametrize("where", ["data part", "part metadata", "metadata"])
@pytest.mark.parametrize("number", [*NUMBERS, UNDERFLOW])
def test_an_item_holding_a_number_out_of_range_is_read(number, where):
    item = decode_item(_artifact(number, where))
    assert item.kind == "artifact", item
    assert item.body.artifact.parts[0].text == "the answer"


def test_an_error_holding_a_number_out_of_range_is_read():
    item = decode_item(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"too big","data":{"n":1e999}}}')
    assert item.kind == "error" and item.body.message == "too big"


@pytest.mark.parametrize("number", NUMBERS)
def test_decoded_values_encode_as_written(number):
    doc = decode_json(b'{"a":[%s,1.5,2]}' % number.encode())
    assert msgspec.json.encode(doc) == b'{"a":[%s,1.5,2]}' % number.encode()


def test_nan_is_not_json_and_says_so():
    item = decode_item(_artifact("NaN", "data part"))
    assert item.kind == "undecodable" and "invalid JSON" in item.body.reason


def test_redaction_by_json_path_reads_the_payload_as_json():
    red = build_redactor(["$.result.artifact.metadata.secret"])
    payload = b'{"result":{"artifact":{"metadata":{"secret":"s3cr3t","w":1e999},"parts":[]}}}'
    out, note = red.payload(payload)
    assert note is None  # read as JSON, not at byte level as a payload that is not
    assert msgspec.json.decode(out.replace(b"1e999", b"0"))["result"]["artifact"]["metadata"]["secret"] == REDACTED
    assert b'"w":1e999' in out and b"s3cr3t" not in out


def test_equal_requests_holding_a_number_out_of_range_hash_equal():
    assert request_hash("message/send", b'{"b":1e999, "a":1}') == request_hash("message/send", b'{"a":1,"b":1e999}')


def _tape(path: Path, number: str) -> str:
    it = items("0.3", "t-n")
    answer = _artifact(number, "data part").replace(b'"c-n"', b'"%s"' % it.context_id.encode())
    payloads = [it.task("submitted", "hi"), answer, it.status("completed")]
    tape = Tape(path)
    tape.stream(it, payloads)
    tape.close()
    return it.task_id


@pytest.mark.parametrize("number", ["1e999", "-1e999"])
def test_a_replayed_task_keeps_the_number_and_the_answer(tmp_path, number):
    task_id = _tape(tmp_path / "n.db", number)
    lib = Library.open(tmp_path / "n.db")
    try:
        body = msgspec.json.encode({"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"id": task_id}})
        reply = anyio.run(ReplayEngine(lib).handle, "POST", "/", "", V03, body, "http://127.0.0.1:1")
    finally:
        lib.close()
    assert b'"score":' + number.encode() in reply.body  # the digits the agent sent, not null
    task = json.loads(reply.body)["result"]  # Python reads 1e999 as inf, as a client would
    assert [p.get("text") for p in task["artifacts"][0]["parts"]] == ["the answer", None]


def test_the_cli_shows_the_answer_beside_a_number_out_of_range(tmp_path):
    task_id = _tape(tmp_path / "n.db", "1e999")
    script = Path(sys.executable).with_name("a2a-tape")
    channels = subprocess.run(
        [str(script), "channels", task_id, "--db", str(tmp_path / "n.db"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert channels.returncode == 0, channels.stderr
    view = json.loads(channels.stdout)
    assert view["final_answer"] == "the answer" and view["undecodable"] == 0
    found = subprocess.run(
        [str(script), "grep", "answer", "--db", str(tmp_path / "n.db"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.returncode == 0 and task_id in found.stdout


def test_serve_reads_a_request_holding_a_number_out_of_range():
    """A real a2a-sdk agent takes it (Python reads Infinity); serve must not answer -32602."""
    from a2a_tape.replay.serve.rpc import parse_request

    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"metadata":{"budget":1e999},'
        b'"message":{"messageId":"m1","role":"user","kind":"message","parts":[{"kind":"text","text":"hi"}]}}}'
    )
    req = parse_request(body)
    assert req.params is not None and req.params.message is not None
    assert msgspec.json.encode(req.params.metadata) == b'{"budget":1e999}'


def test_json_nested_too_deep_is_a_decode_error_everywhere():
    """Past the recursion limit msgspec raises RecursionError; ours say it is JSON we cannot read."""
    from a2a_tape.store.a2a_structs import WireFrame
    from a2a_tape.store.json_values import TOO_DEEP, Decoder

    deep = b'{"result":{"kind":"task","metadata":{"d":' + b"[" * 5000 + b"]" * 5000 + b"}}}"
    with pytest.raises(msgspec.DecodeError, match="nested too deep"):
        decode_json(deep)
    with pytest.raises(msgspec.DecodeError, match="nested too deep"):
        Decoder(WireFrame).decode(deep)
    item = decode_item(deep)
    assert item.kind == "undecodable" and TOO_DEEP in item.body.reason
