"""Record a live agent into a store with plain httpx (the helper the replay tests share).

``a2a-tape record`` is being written by another engineer; until it lands, the replay tests
record with this: one exchange per request, one event per SSE item (or per JSON body), in the
log before it is looked at, with the arrival offsets that ``--timing real`` replays.
"""

from __future__ import annotations

import time

import httpx
from httpx_sse import connect_sse

from a2a_tape import store
from a2a_tape.recorder.client import send_request, task_request
from a2a_tape.store import Exchange, NewEvent, decode_item
from a2a_tape.store.methods import OPERATIONS


def request_body(
    op: str, dialect: str, *, text: str | None = None, task_id: str | None = None, rpc_id: int | str = 1
) -> bytes:
    """A request of either dialect, built by the recorder's own client: a send (``stream`` /
    ``send``) when ``text`` is given, else ``get`` / ``cancel`` / ``subscribe`` of ``task_id``."""
    if text is not None:
        return send_request(dialect, text, stream=op == "stream", task_id=task_id, rpc_id=rpc_id).body  # type: ignore[arg-type]
    return task_request({"subscribe": "resubscribe"}.get(op, op), dialect, task_id or "", rpc_id=rpc_id).body  # type: ignore[arg-type]


def headers_for(dialect: str) -> dict[str, str]:
    h = {"content-type": "application/json"}
    if dialect == "1.0":
        h["A2A-Version"] = "1.0"
    return h


def record_card(st: store.SqliteStore, url: str) -> None:
    card_url = url.rstrip("/") + "/.well-known/agent-card.json"
    r = httpx.get(card_url)
    st.begin_exchange(
        Exchange(
            started_at=time.time(),
            ended_at=time.time(),
            url=card_url,
            http_method="GET",
            status=r.status_code,
            content_type=r.headers.get("content-type"),
            response_body=r.content,
            outcome="ok",
        )
    )


def record(
    st: store.SqliteStore,
    url: str,
    text: str | None = None,
    *,
    op: str = "stream",
    dialect: str = "1.0",
    task_id: str | None = None,
    rpc_id: int | str = 1,
    client: httpx.Client | None = None,
    max_items: int | None = None,
) -> tuple[str | None, list[bytes]]:
    """Send one request to ``url`` and record it; return (task id, the data payloads in order)."""
    body = request_body(op, dialect, text=text, task_id=task_id, rpc_id=rpc_id)
    method = OPERATIONS[{"subscribe": "resubscribe"}.get(op, op)][dialect]
    own = client is None
    client = client or httpx.Client(timeout=10)
    started, t0 = time.time(), time.monotonic()
    ex_id = st.begin_exchange(
        Exchange(
            started_at=started,
            url=url,
            rpc_method=method,
            dialect=dialect,
            streaming=op in ("stream", "subscribe"),
            request_headers=headers_for(dialect),
            request_body=body,
            task_id=task_id,
        )
    )
    payloads: list[bytes] = []
    tid = task_id

    def keep(payload: bytes, event: str | None) -> None:
        nonlocal tid
        tid = decode_item(payload).task_id or tid
        st.append(
            NewEvent(
                payload=payload,
                task_id=tid,
                exchange_id=ex_id,
                sse_event=event,
                received_at=time.time(),
                mono=time.monotonic() - t0,
            )
        )
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
