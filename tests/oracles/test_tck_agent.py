"""The TCK's system under test (tests/support/tck_agent.py) behaves as the TCK's own SUT does.

No TCK needed: plain JSON-RPC v1.0 over httpx against the agent on 127.0.0.1.
"""

from __future__ import annotations

import itertools
import uuid

import httpx
import pytest

from tests.oracles.tck import tck_agent

pytestmark = pytest.mark.oracle

HEADERS = {"A2A-Version": "1.0"}
_ids = itertools.count(1)


def rpc(client: httpx.Client, url: str, method: str, params: dict) -> dict:
    r = client.post(url + "/", json={"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params})
    assert r.status_code == 200, r.text
    return r.json()


def send(text: str, *, return_immediately: bool = False) -> dict:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"message": message, "configuration": {"returnImmediately": return_immediately}}


@pytest.fixture(scope="module")
def agent():
    with tck_agent() as url, httpx.Client(headers=HEADERS, timeout=10) as client:
        yield url, client


def test_a_message_makes_a_task_that_completes_with_one_artifact(agent):
    url, client = agent
    task = rpc(client, url, "SendMessage", send("hello"))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [p["text"] for a in task["artifacts"] for p in a["parts"]] == ["Hello World! You said: 'hello'."]


def test_cancel_is_allowed_while_working_and_refused_after(agent):
    url, client = agent
    task = rpc(client, url, "SendMessage", send("slow one", return_immediately=True))["result"]["task"]
    got = rpc(client, url, "GetTask", {"id": task["id"]})["result"]
    assert got["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    canceled = rpc(client, url, "CancelTask", {"id": task["id"]})["result"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    again = rpc(client, url, "CancelTask", {"id": task["id"]})
    assert again["error"]["code"] == -32002, again


def test_the_card_declares_streaming_and_security_schemes(agent):
    url, client = agent
    card = client.get(url + "/.well-known/agent-card.json").json()
    assert card["capabilities"]["streaming"] is True
    assert set(card["securitySchemes"]) == {"bearerAuth", "oauth2"}
    assert {p["protocolVersion"] for p in card["supportedInterfaces"]} == {"1.0", "0.3"}
