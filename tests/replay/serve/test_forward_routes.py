"""Serve's recording modes forward every HTTP+JSON route as the client sent it (issue 22): a ``GET``
stays a ``GET`` with its query (``historyLength``, a ListTasks filter), a ``DELETE`` a ``DELETE``;
the row names the binding, the method and the URL. Against a real a2a-sdk 1.3.0 agent whose
HTTP+JSON routes are under ``/a2a/rest``. (Before, every request went upstream as a ``POST`` of its
body without its query: the agent answered 405.)"""

from __future__ import annotations

import httpx

from a2a_tape import store
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.transport import ReplayTransport
from a2a_tape.store.methods import HTTP_JSON
from tests.support.sdk_agents import two_binding_agent

V1 = {"A2A-Version": "1.0"}
SEND = b'{"message":{"messageId":"m-fwd","role":"ROLE_USER","parts":[{"text":"hello"}]}}'


def test_get_and_delete_routes_are_forwarded_as_sent(db_path):
    store.open_store(db_path).close()
    with two_binding_agent() as agent:
        lib = Library.open(db_path)
        try:
            engine = ReplayEngine(lib, record_mode="all", upstream=agent)
            with httpx.Client(transport=ReplayTransport(engine=engine), base_url="http://r.test/a2a/rest") as c:
                sent = c.post("/message:send", content=SEND, headers={**V1, "content-type": "application/json"})
                assert sent.status_code == 200, sent.text
                task_id = sent.json()["task"]["id"]
                got = c.get(f"/tasks/{task_id}", params={"historyLength": "1"}, headers=V1)
                listed = c.get("/tasks", params={"pageSize": "5"}, headers=V1)
                deleted = c.delete(f"/tasks/{task_id}/pushNotificationConfigs/cfg-1", headers=V1)
        finally:
            lib.save()
            lib.close()
    assert got.status_code == 200, got.text
    assert got.json()["id"] == task_id and len(got.json()["history"]) == 1
    assert listed.status_code == 200 and any(t["id"] == task_id for t in listed.json()["tasks"])
    assert deleted.status_code != 405 and deleted.status_code >= 400  # the agent's own refusal (no push configs)
    st = store.open_store(db_path)
    try:
        rows = {ex.rpc_method: ex for ex in st.exchanges()}
    finally:
        st.close()
    assert rows["GetTask"].http_method == "GET" and rows["GetTask"].url.endswith(f"/tasks/{task_id}?historyLength=1")
    assert rows["ListTasks"].http_method == "GET" and rows["ListTasks"].url.endswith("/tasks?pageSize=5")
    assert rows["DeleteTaskPushNotificationConfig"].http_method == "DELETE"
    assert {ex.binding for ex in rows.values()} == {HTTP_JSON}
