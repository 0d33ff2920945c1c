"""doctor's push-notification checks (issue 33): a task's pushes against its stream and stored copy.

A push is an exchange row of its task (role ``push``, the agent's StreamResponse as its request
body; :mod:`recorder.proxy.push_receiver`), so these checks read the task's exchanges beside its
events:

- ``push-missed-state``: the task had a webhook (a push came, or a config call or a send
  registered one) and a state the agent streamed or stored was never pushed (a2a-python#218: an
  agent that pushes only in streaming mode; A2A#1372: pushes only after the initial return). An
  error when the missed state is the task's last (the client never learns the end), else a warning;
- ``push-after-terminal``: a push arrived after the one that carried a terminal state;
- ``push-without-token``: a push came without the config's token, or with another (the receiver
  noted it; the token itself is never stored);
- ``push-only`` (a warning): the log knows the task by its pushes alone (each push's note, no event
  of the agent's): the client's send, stream or GetTask went around the recorder, or was never
  answered. The task's state and channels are then the pushes' (``tasks``, ``channels``);
- ``push-other-task``: a push for this task came to a webhook no config of this task names (a
  send's configuration, a config call): the agent sent one task's updates to a webhook registered
  for another. Webhooks are compared without their query, userinfo and fragment (a push row's URL
  is redacted, a config's may be kept as sent), so two webhooks that differ only there count as
  one: the check may miss such a push, never names one that was registered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal
from urllib.parse import urlsplit

import msgspec

from a2a_tape.fold.codes import (
    PUSH_AFTER_TERMINAL,
    PUSH_MISSED_STATE,
    PUSH_ONLY,
    PUSH_OTHER_TASK,
    PUSH_WITHOUT_TOKEN,
)
from a2a_tape.inspection.steps import Step, is_terminal, state_of
from a2a_tape.store import Exchange, Note, StatusUpdate, TaskSnapshot, decode_item
from a2a_tape.store.json_values import decode_json
from a2a_tape.wire.push_configs import PUSH, registered

_CONFIG_WORDS = (b"pushNotificationConfig", b"PushNotificationConfig")
_TOKEN_NOTES = {"push-token-missing": "without the config's token", "push-token-wrong": "with another token"}

Add = Callable[[str, Literal["error", "warning"], str, Iterable[int]], None]


def pushed_states(exchanges: Iterable[Exchange]) -> list[tuple[float, str]]:
    """(arrival, state) of each push that carries a state, in arrival order."""
    found = []
    for ex in exchanges:
        if ex.role != PUSH:
            continue
        body = decode_item(ex.request_body).body
        if isinstance(body, (StatusUpdate, TaskSnapshot)):
            found.append((ex.started_at, body.state))
    return sorted(found)


def check_pushes(steps: Sequence[Step], exchanges: Sequence[Exchange], add: Add) -> None:
    """The push findings of one task (see the module's doc)."""
    for s in steps:
        body = s.item.body
        if s.local and isinstance(body, Note) and body.action in _TOKEN_NOTES:
            add(PUSH_WITHOUT_TOKEN, "error", f"a push came {_TOKEN_NOTES[body.action]}", [s.position])
    pushes = [ex for ex in exchanges if ex.role == PUSH]
    if not pushes and not any(w in ex.request_body for ex in exchanges for w in _CONFIG_WORDS):
        return  # no webhook: nothing was to be pushed
    if pushes and all(s.local for s in steps):
        add(
            PUSH_ONLY,
            "warning",
            f"the log knows this task by its {len(pushes)} push(es) alone: its send, stream or stored copy was"
            " never recorded (sent around the recorder, or never answered); its state is the last one pushed",
            [s.position for s in steps[:1]],
        )
    states = pushed_states(pushes)
    ends = [at for at, state in states if is_terminal(state)]
    late = [ex for ex in pushes if ends and ex.started_at > ends[0]]
    if late:
        add(PUSH_AFTER_TERMINAL, "warning", f"{len(late)} push(es) after the push of the terminal state", [])
    _other_task(pushes, exchanges, add)
    _missed(steps, {state for _, state in states}, add)


def webhook_key(url: str) -> str:
    """A webhook URL as the check compares it: scheme, host, port and path (lower-case scheme and
    host; no userinfo, query or fragment)."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return url
    return f"{parts.scheme.lower()}://{host}{port}{parts.path or '/'}"


def registered_webhooks(exchanges: Iterable[Exchange]) -> set[str]:
    """The webhooks (:func:`webhook_key`) the configs registered in ``exchanges`` name: a send's
    configuration, a config call (JSON-RPC params, or the body itself: HTTP+JSON, gRPC's JSON)."""
    found: set[str] = set()
    for ex in exchanges:
        if ex.role == PUSH or not ex.request_body or not ex.rpc_method:
            continue
        try:
            doc = decode_json(ex.request_body)
        except (msgspec.DecodeError, RecursionError):
            continue
        params = doc.get("params") if isinstance(doc, dict) and "params" in doc else doc
        found.update(webhook_key(c["url"]) for c in registered(ex.rpc_method, params))
    return found


def _other_task(pushes: Sequence[Exchange], exchanges: Sequence[Exchange], add: Add) -> None:
    """``push-other-task``: the task's pushes that came to a webhook none of its configs names."""
    named = registered_webhooks(exchanges)
    stray = [ex for ex in pushes if ex.outcome != "refused" and webhook_key(ex.url) not in named]
    if stray:
        where = ", ".join(sorted({webhook_key(ex.url) for ex in stray}))
        add(
            PUSH_OTHER_TASK,
            "error",
            f"{len(stray)} push(es) for this task came to a webhook no config of this task names ({where}):"
            " the agent sent this task's updates to a webhook registered for another",
            [],
        )


def _missed(steps: Sequence[Step], pushed: set[str], add: Add) -> None:
    """Each state the agent streamed or stored that no push carried, once, at its first position."""
    seen: dict[str, int] = {}
    last = None
    for s in steps:
        state = None if s.local else state_of(s)
        if state is not None:
            seen.setdefault(state, s.position)
            last = state
    for state, pos in seen.items():
        if state not in pushed:
            level: Literal["error", "warning"] = "error" if state == last else "warning"
            add(PUSH_MISSED_STATE, level, f"state {state} was streamed or stored but never pushed", [pos])
