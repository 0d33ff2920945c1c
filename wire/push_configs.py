"""Push-notification configs as a request carries them (issue 33): shared by the proxy, which
swaps the webhook for its receiver, and ``serve``, which delivers recorded pushes to the webhook
a replaying client registers."""

from __future__ import annotations

from typing import Any

from a2a_tape.store.methods import ALL_METHODS

PUSH = "push"
"""A recorded push's exchange role and rpc_method, and the action of the local note that gives the push
its place in its task's log (``capture.notes.push_event``)."""
TOKEN_HEADER = "x-a2a-notification-token"
"""The header an agent sends a config's token in, with each push (A2A)."""


def _field(doc: dict[str, Any], camel: str, snake: str) -> Any:
    """A field under either of its proto JSON names (a parser accepts both: the TCK sends ``task_id``)."""
    found = doc.get(camel)
    return found if found is not None else doc.get(snake)


def config_task(dialect: str | None, params: Any) -> str | None:
    """The task a push-config call's params name: ``taskId`` (v1.0, v0.3's set), or ``task_id`` (proto
    JSON's other spelling: the TCK sends it), else in v0.3 ``id`` (get, list, delete; in v1.0 ``id`` is
    the config's own)."""
    if not isinstance(params, dict):
        return None
    found = _field(params, "taskId", "task_id")
    if found is None and dialect == "0.3":
        found = params.get("id")
    return found if isinstance(found, str) and found else None


def registered(method: str | None, params: Any) -> list[dict[str, Any]]:
    """The push configs a request registers (each a JSON object with a string ``url``): a send's
    ``configuration`` (``pushNotificationConfig`` in v0.3, ``taskPushNotificationConfig`` in
    v1.0), or a config call's params (v1.0; one level down in v0.3)."""
    op = ALL_METHODS.get(method or "", ("", ""))[0]
    if not isinstance(params, dict) or op not in ("send", "stream", "push-set"):
        return []
    found: list[Any] = []
    if op == "push-set":  # v1.0 (JSON-RPC and HTTP+JSON): the config is the params; v0.3: one level down
        found += [params, _field(params, "pushNotificationConfig", "push_notification_config"), params.get("config")]
    else:
        conf = params.get("configuration")
        if isinstance(conf, dict):
            found += [
                _field(conf, "pushNotificationConfig", "push_notification_config"),
                _field(conf, "taskPushNotificationConfig", "task_push_notification_config"),
            ]
    return [c for c in found if isinstance(c, dict) and isinstance(c.get("url"), str) and c["url"]]
