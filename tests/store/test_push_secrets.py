"""A push-notification config's secrets never reach the disk (issue 33): its ``token`` and its
``authentication.credentials``, wherever a JSON payload holds the config, with no configuration."""

from __future__ import annotations

import msgspec
import pytest

from a2a_tape.store.redact import REDACTED, Redactor

CASES = [
    # v1.0 send, JSON-RPC
    {"params": {"configuration": {"taskPushNotificationConfig": {"url": "http://h/x", "token": "s3"}}}},
    # v0.3 send
    {"params": {"configuration": {"pushNotificationConfig": {"url": "http://h/x", "token": "s3"}}}},
    # v1.0 CreateTaskPushNotificationConfig (and the HTTP+JSON body, bare)
    {"params": {"taskId": "t", "url": "http://h/x", "token": "s3"}},
    {"taskId": "t", "url": "http://h/x", "token": "s3", "authentication": {"scheme": "Bearer", "credentials": "s3"}},
    # v0.3 set, and answers: get / list
    {"params": {"taskId": "t", "pushNotificationConfig": {"url": "http://h/x", "token": "s3"}}},
    {"result": {"configs": [{"id": "c", "url": "http://h/x", "token": "s3"}]}, "id": 1, "jsonrpc": "2.0"},
]


@pytest.mark.parametrize("doc", CASES)
def test_push_config_secrets_are_redacted(doc):
    raw = msgspec.json.encode(doc)
    out = Redactor().json_bytes(raw)
    assert b"s3" not in out and REDACTED.encode() in out
    assert b"http://h/x" in out  # the webhook's URL is kept


def test_a_payload_without_a_push_config_keeps_its_exact_bytes():
    raw = b'{"artifactUpdate": {"artifact": {"parts": [{"text": "token"}]}, "token": "not a config"}}'
    assert Redactor().json_bytes(raw) is raw


def test_a_payload_without_the_words_is_not_even_read():
    assert Redactor().redacts(b'{"statusUpdate": {"taskId": "t"}}') is False
