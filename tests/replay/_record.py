"""Record a live agent into a store with plain httpx (the helper the replay tests share).

``a2a-tape record`` is being written by another engineer; until it lands, the replay tests
record with this: one exchange per request, one event per SSE item (or per JSON body), in the
log before it is looked at, with the arrival offsets that ``--timing real`` replays.
"""

from __future__ import annotations

import time
import uuid

import httpx
import msgspec
from httpx_sse import connect_sse

import store
from store import Exchange, NewEvent, decode_item

V1 = {"stream": "SendStreamingMessage", "send": "SendMessage", "get": "GetTask", "subscribe": "SubscribeToTask",
      "cancel": "CancelTask"}
V03 = {"stream": "message/stream", "send": "message/send", "get": "tasks/get", "subscribe": "tasks/resubscribe",
       "cancel": "tasks/cancel"}


class _Part(msgspec.Struct, omit_defaults=True):
    text: str
    kind: str | None = None


class _Msg(msgspec.Struct, omit_defaults=True):
    messageId: str
    role: str
    parts: list[_Part]
    kind: str | None = None
    taskId: str | None = None


class _Params(msgspec.Struct, omit_defaults=True):
    message: _Msg | None = None
    id: str | None = None


class _Req(msgspec.Struct):
    jsonrpc: str
    id: int | str
    method: str
    params: _Params


def request_body(op: str, dialect: str, *, text: str | None = None, task_id: str | None = None, rpc_id: int | str = 1) -> bytes:
    v1 = dialect == "1.0"
    method = (V1 if v1 else V03)[op]
    if text is not None:
        msg = _Msg(messageId=str(uuid.uuid4()), role="ROLE_USER" if v1 else "user",
                   parts=[_Part(text=text, kind=None if v1 else "text")], kind=None if v1 else "message", taskId=task_id)
        params = _Params(message=msg)
    else:
        params = _Params(id=task_id)
    return msgspec.json.encode(_Req("2.0", rpc_id, method, params))


def headers_for(dialect: str) -> dict[str, str]:
    h = {"content-type": "application/json"}
    if dialect == "1.0":
        h["A2A-Version"] = "1.0"
    return h


def record_card(st: store.SqliteStore, url: str) -> None:
    card_url = url.rstrip("/") + "/.well-known/agent-card.json"
    r = httpx.get(card_url)
    st.begin_exchange(Exchange(started_at=time.time(), ended_at=time.time(), url=card_url, http_method="GET",
                               status=r.status_code, content_type=r.headers.get("content-type"),
                               response_body=r.content, outcome="ok"))


def record(st: store.SqliteStore, url: str, text: str | None = None, *, op: str = "stream", dialect: str = "1.0",
           task_id: str | None = None, rpc_id: int | str = 1, client: httpx.Client | None = None,
           max_items: int | None = None) -> tuple[str | None, list[bytes]]:
    """Send one request to ``url`` and record it; return (task id, the data payloads in order)."""
    body = request_body(op, dialect, text=text, task_id=task_id, rpc_id=rpc_id)
    method = (V1 if dialect == "1.0" else V03)[op]
    own = client is None
    client = client or httpx.Client(timeout=10)
    started, t0 = time.time(), time.monotonic()
    ex_id = st.begin_exchange(Exchange(started_at=started, url=url, rpc_method=method, dialect=dialect,
                                       streaming=op in ("stream", "subscribe"), request_headers=headers_for(dialect),
                                       request_body=body, task_id=task_id))
    payloads: list[bytes] = []
    tid = task_id

    def keep(payload: bytes, event: str | None) -> None:
        nonlocal tid
        tid = decode_item(payload).task_id or tid
        st.append(NewEvent(payload=payload, task_id=tid, exchange_id=ex_id, sse_event=event,
                           received_at=time.time(), mono=time.monotonic() - t0))
        payloads.append(payload)

    try:
        if op in ("stream", "subscribe"):
            with connect_sse(client, "POST", url, content=body, headers=headers_for(dialect)) as es:
                if es.response.headers.get("content-type", "").startswith("text/event-stream"):
                    for sse in es.iter_sse():
                        keep(sse.data.encode(), sse.event if sse.event != "message" else None)
                        if max_items is not None and len(payloads) >= max_items:
                            break
                else:
                    keep(es.response.read(), None)
        else:
            r = client.post(url, content=body, headers=headers_for(dialect))
            keep(r.content, None)
    finally:
        if own:
            client.close()
    st.update_exchange(ex_id, ended_at=time.time(), status=200, outcome="ok", task_id=tid)
    return tid, payloads
