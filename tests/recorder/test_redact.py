"""store.redact: which headers and JSON paths are replaced, and that nothing else changes."""

from __future__ import annotations

import msgspec
import pytest

from a2a_tape.store import StoreError
from a2a_tape.store.redact import REDACTED, Redactor, build_redactor, load_config


def test_default_headers_and_secret_looking_names():
    r = Redactor()
    got = r.headers_dict(
        [
            ("Authorization", "Bearer a"),
            ("Cookie", "c=1"),
            ("Set-Cookie", "s=2"),
            ("X-API-Key", "k"),
            ("X-Goog-Api-Key", "g"),
            ("X-Session-Token", "t"),
            ("Content-Type", "application/json"),
            ("A2A-Version", "1.0"),
        ]
    )
    assert got == {
        "authorization": REDACTED,
        "cookie": REDACTED,
        "set-cookie": REDACTED,
        "x-api-key": REDACTED,
        "x-goog-api-key": REDACTED,
        "x-session-token": REDACTED,
        "content-type": "application/json",
        "a2a-version": "1.0",
    }


def test_json_paths_with_wildcards_and_indexes():
    r = Redactor(json_paths=["params.message.metadata.token", "$.result.history[*].metadata.token", "a.0"])
    body = msgspec.json.encode(
        {
            "params": {"message": {"metadata": {"token": "s1", "other": "keep"}}},
            "result": {"history": [{"metadata": {"token": "s2"}}, {"metadata": {}}]},
            "a": ["s3", "keep2"],
        }
    )
    out = msgspec.json.decode(r.json_bytes(body))
    assert out["params"]["message"]["metadata"] == {"token": REDACTED, "other": "keep"}
    assert out["result"]["history"][0]["metadata"]["token"] == REDACTED
    assert out["a"] == [REDACTED, "keep2"]


def test_payload_without_a_match_keeps_its_exact_bytes():
    r = Redactor(json_paths=["params.secret"])
    body = b'{ "jsonrpc" : "2.0",   "result": {"x": 1.50} }'
    assert r.json_bytes(body) is body
    assert r.json_bytes(b"\xff not json") == b"\xff not json"


def test_config_and_options(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.a2a-tape]\nredact_headers = ["X-Tenant"]\nredact-json-paths = ["params.pin"]\n'
    )
    assert load_config(tmp_path) == (["X-Tenant"], ["params.pin"])
    r = build_redactor(["X-Other", "$.result.pin"], directory=tmp_path)
    assert r.is_secret_header("x-tenant") and r.is_secret_header("X-OTHER")
    assert len(r.json_paths) == 2


def test_bad_config_is_a_store_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.a2a-tape\n")
    with pytest.raises(StoreError, match="redaction config"):
        load_config(tmp_path)
