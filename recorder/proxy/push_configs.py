"""Push-notification configs through the proxy (issue 33): the webhook a client registers is
swapped for the proxy's receiver on the way to the agent, and swapped back on the way home.

A client registers a webhook in a send's ``configuration`` (``pushNotificationConfig`` in v0.3,
``taskPushNotificationConfig`` in v1.0) or by a config call (``tasks/pushNotificationConfig/set``,
``CreateTaskPushNotificationConfig``, ``POST /tasks/{id}/pushNotificationConfigs``). Each URL the
agent is given instead is the receiver's (``<receiver>/.a2a-tape/push/<hook>``), a hook being an
unguessable id the proxy maps to the client's URL and token (:class:`Hooks`); the token itself
goes to the agent as the client set it, so the agent sends it back and the client's webhook
checks it as it would without the proxy.

What the client is answered never names the receiver (:func:`restore`): every config the agent
echoes (get, list, set) carries the client's own URL again. The log keeps the conversation as
the client had it (the client's request, the answer it got), so a replay answers as the agent
would have without the proxy. The mapping lives in memory only: the token is a secret, never on
disk, and a proxy restarted forgets the hooks of the one before (a push to one is refused, 404,
and recorded).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

import msgspec

from a2a_tape.store.json_values import decode_json
from a2a_tape.wire.push_configs import registered

PUSH_PATH = "/.a2a-tape/push/"
"""Where the receiver takes an agent's POSTs, under the address it was given."""

_HOOK = re.compile(r"[A-Za-z0-9_-]{16,64}")
# a receiver's URL as a JSON string in an agent's answer: "http://host:port/.a2a-tape/push/<hook>"
_HOOK_URL = re.compile(rb'"https?://[^"\\\s]*' + re.escape(PUSH_PATH.encode()) + rb'([A-Za-z0-9_-]{16,64})"')
_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True)
class Hook:
    """One client webhook as the proxy stands in for it."""

    id: str
    url: str  # the client's webhook
    token: str | None  # the config's token as the client set it: memory only


class Hooks:
    """hook id <-> (client URL, token). The same URL and token get the same hook: repeats of one
    config (a client sending it with every message) do not grow the table."""

    def __init__(self) -> None:
        self._by_id: dict[str, Hook] = {}
        self._by_target: dict[tuple[str, str | None], Hook] = {}

    def add(self, url: str, token: str | None) -> Hook:
        found = self._by_target.get((url, token))
        if found is None:
            found = Hook(secrets.token_urlsafe(16), url, token)
            self._by_id[found.id] = self._by_target[(url, token)] = found
        return found

    def get(self, hook_id: str) -> Hook | None:
        return self._by_id.get(hook_id) if _HOOK.fullmatch(hook_id) else None

    def all(self) -> list[Hook]:
        return list(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)


def hook_of_path(path: str) -> str | None:
    """The hook id of a request path on the receiver (None: not a receiver path)."""
    return path[len(PUSH_PATH) :] if path.startswith(PUSH_PATH) else None


def rewrite(body: bytes, params_raw: bytes, method: str | None, hooks: Hooks, base: str) -> tuple[bytes, list[Hook]]:
    """``body`` as the agent gets it: each webhook URL registered in it replaced by the receiver's
    (``base`` is the receiver's origin). The bytes are kept but for the URL's string where it
    stands once; else the document is written again. Returns the hooks it used."""
    try:
        params = decode_json(params_raw) if params_raw and params_raw != b"null" else None
    except (msgspec.DecodeError, RecursionError):
        return body, []
    configs = registered(method, params)
    if not configs:
        return body, []
    used: list[Hook] = []
    for conf in configs:
        token = conf.get("token")
        hook = hooks.add(conf["url"], token if isinstance(token, str) and token else None)
        used.append(hook)
        old, new = _encode(conf["url"]), _encode(base + PUSH_PATH + hook.id)
        if body.count(old) == 1:
            body = body.replace(old, new)
            continue
        conf["url"] = base + PUSH_PATH + hook.id  # the URL elsewhere too, or escaped: the document again
        body = _reencoded(body, params_raw, params)
        params_raw = _encode(params)
    return body, used


def _reencoded(body: bytes, params_raw: bytes, params: Any) -> bytes:
    """``body`` with its params (``params_raw``, the body itself for HTTP+JSON) written again."""
    if body == params_raw:
        return _encode(params)
    try:
        doc = decode_json(body)
    except (msgspec.DecodeError, RecursionError):
        return body
    if isinstance(doc, dict):
        doc["params"] = params
        return _encode(doc)
    return body


def restore(body: bytes, hooks: Hooks) -> bytes:
    """An agent's answer as the client is given it: every receiver URL of a known hook back to the
    client's own webhook (a config echoed by get, list or set)."""
    if PUSH_PATH.encode() not in body:
        return body

    def back(m: re.Match[bytes]) -> bytes:
        hook = hooks.get(m.group(1).decode())
        return _encode(hook.url) if hook is not None else m.group(0)

    return _HOOK_URL.sub(back, body)
