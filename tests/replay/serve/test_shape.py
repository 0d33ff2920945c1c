"""The request shape matching compares (:mod:`replay.serve.shape`): rules under Hypothesis."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_tape.replay.serve.shape import first_difference, normalise_params, shape_of

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)
_texts = st.lists(st.text(max_size=8), min_size=1, max_size=3)
_v03_defaults = st.sampled_from([None, {}, {"blocking": True}, {"acceptedOutputModes": [], "blocking": True}])
_v1_defaults = st.sampled_from([None, {}, {"returnImmediately": False}, {"acceptedOutputModes": []}])


def _body(method: str, params: dict, rpc_id: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}).encode()


@settings(max_examples=80, deadline=None)
@given(texts=_texts, a=_v03_defaults, b=_v1_defaults, ids=st.tuples(st.uuids(), st.uuids()), rpc=st.integers())
def test_both_dialects_and_their_defaults_have_one_shape(texts, a, b, ids, rpc):
    v03: dict = {
        "message": {
            "kind": "message",
            "messageId": str(ids[0]),
            "role": "user",
            "parts": [{"kind": "text", "text": t} for t in texts],
        }
    }
    v1: dict = {"message": {"messageId": str(ids[1]), "role": "ROLE_USER", "parts": [{"text": t} for t in texts]}}
    if a is not None:
        v03["configuration"] = a
    if b is not None:
        v1["configuration"] = b
    one, two = shape_of(_body("message/stream", v03, rpc)), shape_of(_body("SendStreamingMessage", v1, "x"))
    assert one.key == two.key
    assert first_difference(one.params, two.params) is None


@settings(max_examples=150, deadline=None)
@given(a=_json, b=_json)
def test_a_first_difference_exists_exactly_when_the_shapes_differ(a, b):
    na, nb = normalise_params({"p": a}), normalise_params({"p": b})
    sa, sb = shape_of(_body("M", {"p": a}, 1)), shape_of(_body("M", {"p": b}, 2))
    assert (first_difference(na, nb) is None) == (sa.key == sb.key)


@settings(max_examples=100, deadline=None)
@given(params=st.dictionaries(st.sampled_from(["message", "configuration", "metadata", "id"]), _json, max_size=4))
def test_normalising_twice_changes_nothing(params):
    once = normalise_params(params)
    assert normalise_params(once) == once


def test_a_body_that_is_not_json_is_its_own_shape():
    assert shape_of(b"not json").key == b"raw:not json"
    assert shape_of(b"[1, 2]").key != shape_of(b"[2, 1]").key


def test_the_envelope_and_an_empty_message_are_part_of_the_shape():
    """TCK run against serve: ``{"jsonrpc": "aaa", "params": {}}`` (refused for its envelope) and a v1.0
    send of ``{"message": {"kind": "message"}}`` (refused for its fields) had one shape, so the second
    got the first's recorded answer (-32600 "'jsonrpc' must be exactly '2.0'") instead of its own -32602."""
    bad_envelope = shape_of(b'{"jsonrpc": "aaa", "method": "SendMessage", "params": {}}')
    empty_message = shape_of(
        b'{"jsonrpc": "2.0", "id": "a", "method": "SendMessage", "params": {"message": {"kind": "message"}}}'
    )
    no_message = shape_of(b'{"jsonrpc": "2.0", "id": "a", "method": "SendMessage", "params": {}}')
    assert len({bad_envelope.key, empty_message.key, no_message.key}) == 3
    # the id's value still does not matter, only whether there is one
    other_id = shape_of(
        b'{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {"kind": "message"}}}'
    )
    notification = shape_of(b'{"jsonrpc": "2.0", "method": "SendMessage", "params": {"message": {"kind": "message"}}}')
    assert other_id.key == empty_message.key and notification.key != empty_message.key
