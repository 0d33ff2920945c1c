"""The proxy's header and path rules, for any input (Hypothesis)."""

from __future__ import annotations

import httpx
from hypothesis import given
from hypothesis import strategies as st

from a2a_tape.recorder.proxy.plumbing import (
    RAW_CARD_PATHS,
    Upstream,
    is_public,
    request_headers,
    response_headers,
    rewrite_origin,
    token_presented,
)

TOKEN = "tok-Hx9"
_names = st.sampled_from(
    ["authorization", "proxy-authorization", "x-api-key", "accept", "connection", "te", "host", "x-trace", "cookie"]
)
_values = st.one_of(
    st.just(f"Bearer {TOKEN}"),
    st.just(f"bearer   {TOKEN}"),
    st.just("Bearer other"),
    st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=12),
)
_headers = st.lists(st.tuples(_names, _values), max_size=8)
_AUTH = ("authorization", "proxy-authorization")


def _carries(name: str, value: str) -> bool:
    words = value.split()
    return name in _AUTH and len(words) == 2 and words[0].lower() == "bearer" and words[1] == TOKEN


@given(_headers)
def test_the_token_never_crosses_and_every_other_end_to_end_header_does(headers):
    out = request_headers(headers, TOKEN)
    assert not any(_carries(k, v) for k, v in out)
    listed = {t.strip().lower() for k, v in headers if k == "connection" for t in v.split(",")}
    kept = [(k, v) for k, v in headers if k not in ("connection", "te", "host", *listed) and not _carries(k, v)]
    assert out == kept  # order and repeats kept


@given(_headers)
def test_the_token_is_presented_exactly_when_a_bearer_value_carries_it(headers):
    assert token_presented(headers, TOKEN) is any(_carries(k, v) for k, v in headers)


@given(
    st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE"]),
    st.binary(max_size=40) | st.sampled_from(sorted(RAW_CARD_PATHS)),
)
def test_public_is_exactly_a_read_of_a_card_path_at_the_root(method, raw_path):
    assert is_public(method, raw_path) is (method in ("GET", "HEAD") and raw_path in RAW_CARD_PATHS)


@given(
    st.sampled_from(["http", "https"]),
    st.sampled_from(["127.0.0.1:9", "agent.local", "127.0.0.1:10"]),
    st.text(alphabet="abc/?=&x", max_size=10),
)
def test_only_urls_on_the_upstream_origin_move_to_the_proxy(scheme, host, rest):
    url = f"{scheme}://{host}/{rest}"
    moved = rewrite_origin(url, "http://127.0.0.1:9", "http://127.0.0.1:8080")
    if f"{scheme}://{host}" == "http://127.0.0.1:9":
        assert moved == "http://127.0.0.1:8080/" + rest
    else:
        assert moved == url
    assert rewrite_origin("/" + rest, "http://127.0.0.1:9", "http://127.0.0.1:8080") == "/" + rest


def test_answer_headers_lose_hop_by_hop_and_framing_and_keep_repeats():
    h = httpx.Headers(
        [
            ("content-type", "text/plain"),
            ("content-length", "3"),
            ("content-encoding", "gzip"),
            ("connection", "x-hop"),
            ("x-hop", "1"),
            ("set-cookie", "a=1"),
            ("set-cookie", "b=2"),
            ("location", "http://127.0.0.1:9/next"),
            ("etag", '"e"'),
        ]
    )
    assert response_headers(h, "http://127.0.0.1:9", "http://p:1") == [
        ("content-type", "text/plain"),
        ("set-cookie", "a=1"),
        ("set-cookie", "b=2"),
        ("location", "http://p:1/next"),
        ("etag", '"e"'),
    ]


def test_the_upstream_credentials_leave_the_url():
    up = Upstream.parse("http://al%40ice:p%3Aw@127.0.0.1:9/base")
    assert up.origin == "http://127.0.0.1:9"
    assert up.auth is not None
    req = next(up.auth.auth_flow(httpx.Request("GET", "http://127.0.0.1:9/")))
    assert req.headers["authorization"] == httpx.BasicAuth("al@ice", "p:w")._auth_header
