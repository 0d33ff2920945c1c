"""The binding modules' rules (wire/bindings.py and a module per binding), for any request: Hypothesis.

- HTTP+JSON: a call rendered as its route (:func:`http_json.render_request`) reads back (:func:`http_json.read`)
  as the same JSON-RPC method and params, under any path prefix; a recorded item converted to the JSON-RPC
  form and rendered back is the same bytes; an error's code survives the round trip through the binding's
  HTTP status and ErrorInfo.
- Every route of the spec is claimed by HTTP+JSON, a POST elsewhere by JSON-RPC, a card by neither.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a_tape.store.methods import ALL_METHODS
from a2a_tape.wire import a2a_errors as errors
from a2a_tape.wire import bindings, http_json

V1 = {"A2A-Version": "1.0"}
ids = st.text(st.characters(blacklist_characters="/", blacklist_categories=("Cs",)), min_size=1, max_size=12).filter(
    lambda s: not s.endswith((":cancel", ":subscribe")) and s.strip() == s and s not in (".", "..")
)
prefixes = st.sampled_from(["", "/v1", "/a2a/rest", "/tenant-1"])
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**31), 2**31), st.text(max_size=8))
json_obj = st.dictionaries(st.text(min_size=1, max_size=6), json_leaf, max_size=3)
message = st.fixed_dictionaries(
    {
        "messageId": ids,
        "role": st.just("ROLE_USER"),
        "parts": st.lists(st.fixed_dictionaries({"text": st.text()}), min_size=1, max_size=2),
    }
)


def calls() -> st.SearchStrategy[tuple[str, dict]]:
    return st.one_of(
        st.tuples(
            st.sampled_from(["SendMessage", "SendStreamingMessage"]),
            st.fixed_dictionaries({"message": message}, optional={"metadata": json_obj}),
        ),
        st.tuples(
            st.just("GetTask"), st.fixed_dictionaries({"id": ids}, optional={"historyLength": st.integers(0, 50)})
        ),
        st.tuples(
            st.just("CancelTask"), st.fixed_dictionaries({"id": ids}, optional={"metadata": json_obj.filter(bool)})
        ),
        st.tuples(st.just("SubscribeToTask"), st.fixed_dictionaries({"id": ids})),
        st.tuples(
            st.just("ListTasks"),
            st.fixed_dictionaries(
                {},
                optional={
                    "contextId": ids,
                    "pageSize": st.integers(1, 100),
                    "pageToken": ids,
                    "includeArtifacts": st.booleans(),
                    "status": st.just("TASK_STATE_WORKING"),
                },
            ),
        ),
        st.tuples(
            st.just("CreateTaskPushNotificationConfig"),
            st.fixed_dictionaries({"taskId": ids, "url": st.just("http://127.0.0.1:9/hook")}),
        ),
        st.tuples(
            st.sampled_from(["GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"]),
            st.fixed_dictionaries({"taskId": ids, "id": ids}),
        ),
        st.tuples(
            st.just("ListTaskPushNotificationConfigs"),
            st.fixed_dictionaries({"taskId": ids}, optional={"pageSize": st.integers(1, 9)}),
        ),
        st.tuples(st.just("GetExtendedAgentCard"), st.just({})),
    )


def _decoded_path(path_and_query: str) -> tuple[str, str]:
    from urllib.parse import unquote

    path, _, query = path_and_query.partition("?")
    return unquote(path), query  # as a server hands the path to the app


@given(calls(), prefixes)
def test_an_http_json_route_reads_back_as_the_call_it_renders(call, prefix):
    method, params = call
    http_method, path_and_query, body = http_json.render_request(method, params, prefix)
    path, query = _decoded_path(path_and_query)
    got = bindings.read(http_method, path, query, V1, body)
    assert got is not None and got.binding == "http+json" and got.version == "1.0"
    env = msgspec.json.decode(got.body)
    assert env["method"] == method and env["params"] == params


@given(st.sampled_from(sorted(ALL_METHODS)), ids)
def test_every_route_is_http_json_and_a_post_elsewhere_is_json_rpc(method, task_id):
    if ALL_METHODS[method][1] != "1.0":
        return
    params = {"id": task_id, "taskId": task_id} if method != "GetExtendedAgentCard" else {}
    if method in ("SendMessage", "SendStreamingMessage"):
        params = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}}
    http_method, path_and_query, body = http_json.render_request(method, params)
    assert bindings.read(http_method, *_decoded_path(path_and_query), V1, body).binding == "http+json"


@pytest.mark.parametrize("path", ["/", "/a2a/jsonrpc", "/api"])
def test_a_post_to_no_route_is_json_rpc_and_a_card_is_no_call(path):
    assert bindings.read("POST", path, "", {}, b"{}").binding == "jsonrpc"
    assert bindings.read("GET", "/.well-known/agent-card.json", "", {}, b"") is None


item = st.sampled_from(
    [
        b'{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}',
        b'{"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}}',
        b'{"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"a","parts":[{"text":"\\u00e9 x"}]},"append":true}}',
        b'{"id":"t","contextId":"c","status":{"state":"TASK_STATE_CANCELED"}}',
    ]
)


@given(item)
def test_a_recorded_item_round_trips_byte_for_byte(payload):
    status, body, failed = http_json.from_jsonrpc(http_json.to_jsonrpc(payload))
    assert (status, body, failed) == (200, payload, False)


@given(st.sampled_from(sorted(errors.BY_CODE)), st.text(max_size=20))
def test_an_error_keeps_its_code_and_details_through_the_binding(code, message):
    data = [errors.error_info(errors.kind_of(code).reason)]
    rpc_error = {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": message, "data": data}}
    status, rest_body, failed = http_json.from_jsonrpc(msgspec.json.encode(rpc_error))
    assert failed and status == errors.kind_of(code).http
    back = msgspec.json.decode(http_json.to_jsonrpc(rest_body))["error"]
    # a2a-sdk's HTTP+JSON side has no parse error: unreadable JSON is INVALID_REQUEST there
    expected = errors.BY_REASON["INVALID_REQUEST"].code if code == -32700 else code
    assert (back["code"], back["message"], back["data"]) == (expected, message, data)
