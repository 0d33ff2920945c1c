"""The webhook swap of :mod:`recorder.proxy.push_configs`: what the agent is given, what the client gets back."""

from __future__ import annotations

import msgspec

from a2a_tape.recorder.proxy.push_configs import PUSH_PATH, Hooks, registered, restore, rewrite

BASE = "http://127.0.0.1:8080"


def _send(conf_key: str, url: str = "http://client/hook") -> bytes:
    return msgspec.json.encode(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": {"parts": []}, "configuration": {conf_key: {"url": url, "token": "t"}}},
        }
    )


def test_a_send_is_rewritten_in_place_and_restored():
    hooks = Hooks()
    body = _send("taskPushNotificationConfig")
    params = msgspec.json.encode(msgspec.json.decode(body)["params"])
    out, used = rewrite(body, params, "SendMessage", hooks, BASE)
    (hook,) = used
    assert out == body.replace(b"http://client/hook", f"{BASE}{PUSH_PATH}{hook.id}".encode())
    assert hook.url == "http://client/hook" and hook.token == "t"
    assert restore(out, hooks) == body  # an echo of the config names the client's webhook again


def test_the_same_webhook_is_one_hook():
    hooks = Hooks()
    for _ in range(3):
        body = _send("pushNotificationConfig")
        rewrite(body, msgspec.json.encode(msgspec.json.decode(body)["params"]), "message/send", hooks, BASE)
    assert len(hooks) == 1


def test_config_calls_of_both_versions_and_http_json():
    assert registered("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "u"}) == [{"taskId": "t", "url": "u"}]
    assert registered("tasks/pushNotificationConfig/set", {"pushNotificationConfig": {"url": "u"}}) == [{"url": "u"}]
    assert registered("GetTask", {"url": "u"}) == []  # only what registers a webhook


def test_an_escaped_url_is_rewritten_by_writing_the_document_again():
    hooks = Hooks()
    body = b'{"taskId":"t","url":"http:\\/\\/client\\/hook"}'  # an HTTP+JSON body: the params are the body
    out, (hook,) = rewrite(body, body, "CreateTaskPushNotificationConfig", hooks, BASE)
    assert msgspec.json.decode(out)["url"] == f"{BASE}{PUSH_PATH}{hook.id}"


def test_an_unknown_hook_is_left_as_it_is():
    body = f'{{"url":"{BASE}{PUSH_PATH}{"a" * 22}"}}'.encode()
    assert restore(body, Hooks()) == body
