"""The recorded client's requests, as ``verify`` sends them again (docs/verify.md, "What is sent").

Which of a recorded run's requests are sent (:func:`replayed`), and how each is made new: a new
JSON-RPC id and message ids, the live agent's task and context ids in place of the recorded ones
(:func:`rewrite`), the recorded headers less credentials and what a binding sets (:func:`sent_headers`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import msgspec

from a2a_tape.fold.runs import Run
from a2a_tape.recorder import client as a2a
from a2a_tape.store import Exchange
from a2a_tape.store.methods import METHODS
from a2a_tape.store.redact import REDACTED, Redactor
from a2a_tape.wire.bindings import recorded_call

REPLAYED: frozenset[str] = frozenset({"send", "stream", "get", "cancel", "resubscribe"})
"""The operations re-sent (push configs and cards are not). A resubscribe is a recovery: it is sent
again only while the live task is not settled (a live stream that ended where it should needs none)."""

DROPPED_HEADERS: frozenset[str] = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "accept",
        "accept-encoding",
        "connection",
        "transfer-encoding",
        "user-agent",
        "a2a-version",
        "idempotency-key",
        "cookie",
    }
)
"""Recorded request headers not sent again: the binding and httpx set them, or they name the
recorded call itself. Credentials (the redactor's secret headers) are never in a recording."""


def replayed(run: Run) -> list[Exchange]:
    """The recorded run's requests to send again, in order."""
    out = []
    for ex in run.exchanges:
        if ex.rpc_method is None or ex.rpc_method == "agent-card" or ex.role == "recovery":
            continue
        call = recorded_call(ex)
        method = method_of(call.body)
        if method in METHODS and METHODS[method][0] in REPLAYED:
            out.append(ex)
    return out


def method_of(body: bytes) -> str:
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return ""
    return str(doc.get("method", "")) if isinstance(doc, dict) else ""


def sent_headers(
    recorded: dict[str, str], redactor: Redactor, extra: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The recorded headers minus credentials and what the binding sets, then the user's."""
    given = {k.lower() for k, _ in extra}
    kept = [
        (k, v)
        for k, v in recorded.items()
        if k.lower() not in DROPPED_HEADERS
        and k.lower() not in given
        and REDACTED not in v
        and not redactor.is_secret_header(k)
    ]
    return kept + list(extra)


_rpc_ids = itertools.count(1)


def rewrite(body: bytes, ids: dict[str, str]) -> tuple[bytes, str | None]:
    """A recorded JSON-RPC request with a new JSON-RPC id, a new id for each message, and each
    recorded id of ``ids`` replaced by the live one; returns it and the first new message id."""
    doc = msgspec.json.decode(body)
    fresh: list[str] = []

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (_new_message_id(fresh) if k == "messageId" and isinstance(v, str) else walk(v))
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str):
            for old, new in ids.items():
                if old and old in value:
                    value = value.replace(old, new)
        return value

    doc = walk(doc)
    if isinstance(doc, dict):
        doc["id"] = f"a2a-tape-verify-{next(_rpc_ids)}"
    return msgspec.json.encode(doc), fresh[0] if fresh else None


def names_task(body: bytes, task_id: str) -> bytes:
    """A request about a task (GetTask, CancelTask, a resubscribe) that names none (a hand-made
    recording) asks about ``task_id``."""
    doc = msgspec.json.decode(body)
    params = doc.get("params") if isinstance(doc, dict) else None
    if isinstance(params, dict) and ("id" in params or "name" in params):
        return body
    doc["params"] = {"id": task_id}
    return msgspec.json.encode(doc)


def _new_message_id(fresh: list[str]) -> str:
    fresh.append(a2a.new_id())
    return fresh[-1]
