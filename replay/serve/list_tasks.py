"""ListTasks and GetTask's ``historyLength`` as an a2a-sdk 1.3.0 agent (its default request handler
and in-memory task store) answers them, for what no recording answers.

The rule, as the SDK behaves (checked side by side against a live agent in the tests):

- params it cannot read (``pageSize: "x"``, a timestamp that is not RFC 3339): -32602;
- ``historyLength`` below 0: -32602 ``history length must be non-negative``;
- ``pageSize`` given and below 1 or above 100: -32602 (0 counts as given); absent: 50;
- filters: ``contextId``, ``status`` (a v1.0 state name or number; an unknown one, or
  ``TASK_STATE_UNSPECIFIED``, filters nothing), ``statusTimestampAfter`` (tasks whose status
  timestamp is at or after it; a task with no timestamp is left out). Unknown params, such as
  ``lastUpdatedAfter``, are ignored, as the SDK ignores them;
- order: newest status timestamp first, tasks without one last, ties by task id (descending);
- ``pageToken``: the SDK's cursor (URL-safe base64 of ``{"ts":<ns>,"id":<task id>}``, padding
  stripped), the next page starting strictly after it; otherwise a legacy token (base64 of the
  first task id of the page). A token that is neither: -32602;
- ``nextPageToken`` is the cursor of the page's last task when more follow, else ``""``;
  ``pageSize`` is the size asked (or 50), ``totalSize`` the count after the filters;
- artifacts only with ``includeArtifacts: true``; ``historyLength`` keeps the last N messages.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import json
import re
from collections.abc import Sequence
from datetime import datetime

import msgspec

from a2a_tape.fold.views import RecordedTask
from a2a_tape.store.decode import V1_STATE_NAMES
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.json_values import Decoder

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100

# v1.0 TaskState names and numbers -> our (v0.3) spelling
_STATE_NAMES = {name: state for state, name in V1_STATE_NAMES.items() if state != "unknown"}
_STATE_NUMBERS = {1: "submitted", 2: "working", 3: "completed", 4: "failed", 5: "canceled"}
_STATE_NUMBERS |= {6: "input-required", 7: "rejected", 8: "auth-required"}

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


class ListingError(A2ATapeError):
    """Params the agent would refuse: answered with -32602 and this message."""


def timestamp_ns(value: str | None) -> int | None:
    """An RFC 3339 timestamp as nanoseconds since the epoch (None when absent or unreadable)."""
    if not value:
        return None
    m = _RFC3339.fullmatch(value.strip())
    if m is None:
        return None
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    try:
        datetime(y, mo, d, h, mi, s)
    except ValueError:
        return None
    secs = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    if m.group(9):
        offset = (int(m.group(10)) * 60 + int(m.group(11))) * 60
        secs -= offset if m.group(9) == "+" else -offset
    frac = (m.group(7) or "").ljust(9, "0")
    return secs * 1_000_000_000 + int(frac or 0)


class Listed(msgspec.Struct, frozen=True):
    """One task as the listing sees it: its snapshot and its status timestamp."""

    snapshot: RecordedTask
    timestamp_ns: int | None

    def sort_key(self) -> tuple[bool, int, str]:
        return (self.timestamp_ns is not None, self.timestamp_ns or 0, self.snapshot.task_id)


class Page(msgspec.Struct, frozen=True):
    tasks: list[Listed]
    next_page_token: str
    page_size: int
    total_size: int


class _Cursor(msgspec.Struct, forbid_unknown_fields=True):
    ts: int | None
    id: str


_cursor_decoder = Decoder(_Cursor)


def encode_cursor(timestamp: int | None, task_id: str) -> str:
    payload = '{"ts":' + ("null" if timestamp is None else str(timestamp)) + ',"id":' + json.dumps(task_id) + "}"
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode_cursor(token: str) -> tuple[bool, int, str] | None:
    padded = token + "=" * (-len(token) % 4)
    try:
        c = _cursor_decoder.decode(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not c.id:
        return None
    return (c.ts is not None, c.ts or 0, c.id)


def _legacy_task_id(token: str) -> str:
    padded = token + "=" * (-len(token) % 4)
    try:
        return base64.b64decode(padded.encode()).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ListingError("Token is not a valid base64-encoded cursor.") from None


def check_history_length(history_length: int | None) -> None:
    if history_length is not None and history_length < 0:
        raise ListingError("history length must be non-negative")


def with_history(snap: RecordedTask, history_length: int | None) -> RecordedTask:
    """The last ``history_length`` messages of the history (all when None, none for 0)."""
    if history_length is None or len(snap.history) <= history_length:
        return snap
    return msgspec.structs.replace(snap, history=snap.history[-history_length:] if history_length else ())


def _state_filter(status: str | int | None) -> str | None:
    if isinstance(status, bool):
        return None
    if isinstance(status, int):
        return _STATE_NUMBERS.get(status)
    if isinstance(status, str):
        return _STATE_NAMES.get(status)
    return None


def list_page(
    tasks: Sequence[Listed],
    *,
    context_id: str | None = None,
    status: str | int | None = None,
    page_size: int | None = None,
    page_token: str | None = None,
    history_length: int | None = None,
    status_timestamp_after: str | None = None,
) -> Page:
    """One ListTasks page; raise :class:`ListingError` for what the agent refuses."""
    after = None
    if status_timestamp_after is not None:
        after = timestamp_ns(status_timestamp_after)
        if after is None:
            raise ListingError("Invalid params: statusTimestampAfter is not an RFC 3339 timestamp")
    check_history_length(history_length)
    if page_size is not None:
        if page_size < 1:
            raise ListingError("minimum page size is 1")
        if page_size > MAX_PAGE_SIZE:
            raise ListingError(f"maximum page size is {MAX_PAGE_SIZE}")
    state = _state_filter(status)
    chosen = [
        t
        for t in tasks
        if (not context_id or t.snapshot.context_id == context_id)
        and (state is None or t.snapshot.state == state)
        and (after is None or (t.timestamp_ns is not None and t.timestamp_ns >= after))
    ]
    chosen.sort(key=Listed.sort_key, reverse=True)
    total = len(chosen)
    start = 0
    if page_token:
        cursor = decode_cursor(page_token)
        if cursor is None:
            first = _legacy_task_id(page_token)
            start = next((i for i, t in enumerate(chosen) if t.snapshot.task_id == first), -1)
            if start < 0:
                raise ListingError(f"Invalid page token: {page_token}")
        else:
            start = next((i for i, t in enumerate(chosen) if t.sort_key() < cursor), total)
    size = page_size or DEFAULT_PAGE_SIZE
    end = start + size
    token = ""
    if end < total:
        last = chosen[end - 1]
        token = encode_cursor(last.timestamp_ns, last.snapshot.task_id)
    page = [Listed(with_history(t.snapshot, history_length), t.timestamp_ns) for t in chosen[start:end]]
    return Page(page, token, size, total)
