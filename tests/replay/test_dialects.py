"""Converting recorded JSON between the dialects: there and back loses only what docs/replay.md
lists (a text or data part's mediaType / filename going through v0.3, v0.3's ``final``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from a2a_tape.wire.dialects import item_in, part_to_v03, part_to_v1

_words = st.text(alphabet="abc xyz", min_size=1, max_size=6)
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _words),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_words, inner, max_size=3)),
    max_leaves=6,
)
_meta = st.dictionaries(st.sampled_from(["a", "b"]), _json, min_size=1, max_size=2)


@st.composite
def v1_part(draw) -> dict[str, Any]:
    content = draw(st.sampled_from(["text", "data", "raw", "url"]))
    p: dict[str, Any] = {
        "text": draw(_words),
        "data": draw(_json),
        "raw": "aGVsbG8=",
        "url": "https://example.invalid/f",
    }
    p = {content: p[content]}
    for field, values in (("mediaType", ["text/plain", "image/png"]), ("filename", ["a.txt", "b.png"])):
        if draw(st.booleans()):
            p[field] = draw(st.sampled_from(values))
    if draw(st.booleans()):
        p["metadata"] = draw(_meta)
    return p


@st.composite
def v03_part(draw) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "data", "file"]))
    if kind == "text":
        p: dict[str, Any] = {"kind": "text", "text": draw(_words)}
    elif kind == "data":
        p = {"kind": "data", "data": draw(st.dictionaries(_words, _json, max_size=3))}
    else:
        f: dict[str, Any] = draw(st.sampled_from([{"bytes": "aGVsbG8="}, {"uri": "https://example.invalid/f"}]))
        if draw(st.booleans()):
            f["name"] = "a.txt"
        if draw(st.booleans()):
            f["mimeType"] = "text/plain"
        p = {"kind": "file", "file": f}
    if draw(st.booleans()):
        p["metadata"] = draw(_meta)
    return p


@given(v1_part())
def test_a_v1_part_through_v03_and_back(p):
    back = part_to_v1(part_to_v03(p))
    if "text" in p or "data" in p:  # v0.3 text and data parts have no mediaType / filename
        p = {k: v for k, v in p.items() if k not in ("mediaType", "filename")}
    assert back == p


@given(v03_part())
def test_a_v03_part_through_v1_and_back(p):
    assert part_to_v03(part_to_v1(p)) == p


@given(st.lists(v1_part(), min_size=1, max_size=3), _meta, st.booleans(), st.booleans())
def test_stream_items_through_the_other_dialect_and_back(parts, meta, append, last):
    status = {
        "taskId": "t",
        "contextId": "c",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "timestamp": "2026-11-30T02:08:56.971Z",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": parts, "metadata": meta},
        },
        "metadata": meta,
    }
    v03 = item_in("status", status, "0.3")
    assert v03["kind"] == "status-update" and v03["final"] is True  # interrupted: the stream ends
    assert v03["status"]["state"] == "input-required" and v03["status"]["message"]["role"] == "agent"
    back = item_in("status", v03, "1.0")
    plain = [
        {k: v for k, v in p.items() if k not in ("mediaType", "filename")} if "raw" not in p and "url" not in p else p
        for p in parts
    ]
    assert back == {
        **status,
        "status": {**status["status"], "message": {**status["status"]["message"], "parts": plain}},
    }

    art = {
        "taskId": "t",
        "contextId": "c",
        "artifact": {"artifactId": "a", "parts": parts, "metadata": meta, "extensions": ["urn:x"]},
    }
    if append:
        art["append"] = True
    if last:
        art["lastChunk"] = True
    back = item_in("artifact", item_in("artifact", art, "0.3"), "1.0")
    assert back == {**art, "artifact": {**art["artifact"], "parts": plain}}
