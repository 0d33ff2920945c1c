"""Black-box probes of any agent (or proxy), each exchange recorded for inspection.

Why: the reliability rules of docs/design.md section 5 are claims about an agent's behaviour; a probe
checks them from the outside, against the agent as deployed:

- ``duplicate-message``: the same ``messageId`` sent twice must not create a second task
  (a2a-sdk 1.3.0 alone fails this; behind ``a2a-tape proxy`` it passes);
- ``dropped-stream``: start a stream, read one event, drop it; resubscribe (or GetTask) must
  reach a terminal state of the same task;
- ``stall``: a task must not stay working forever where the agent offers a way out: the probe
  starts a task, asks to cancel it, and expects it to end (canceled, or finished on its own).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import httpx
import msgspec

from a2a_tape import store
from a2a_tape.recorder import client as a2a
from a2a_tape.recorder.recovery import is_open
from a2a_tape.recorder.upstream import Unreachable, Upstream
from a2a_tape.store.redact import Redactor, build_redactor
from a2a_tape.wire.bindings import client_of
from a2a_tape.wire.http_client import LazyTlsTransport


class ProbeResult(msgspec.Struct):
    name: str
    ok: bool
    detail: str


class ProbeReport(msgspec.Struct):
    ok: bool
    probes: list[ProbeResult]


def _task_id(item: store.Item) -> str | None:
    return item.task_id


def _state(item: store.Item) -> str | None:
    body = item.body
    if isinstance(body, (store.TaskSnapshot, store.StatusUpdate)):
        return body.state
    return None


def _error(item: store.Item) -> str | None:
    body = item.body
    if isinstance(body, store.ErrorItem):
        return f"error {body.code}: {body.message}"
    if isinstance(body, store.Undecodable):
        return f"undecodable answer: {body.reason}"
    return None


async def _until_ended(up: Upstream, dialect: a2a.Dialect, url: str, task_id: str, timeout: float) -> str | None:  # noqa: ASYNC109 - a deadline checked between recorded calls: none is cut off mid-exchange
    """GetTask with backoff until the task is no longer submitted/working; its state, or None."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        item = await up.call(a2a.task_request("get", dialect, task_id), url, task_id)
        state = _state(item)
        if state is not None and not is_open(state):
            return state
        if time.monotonic() + delay > deadline:
            return None
        await anyio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def probe_duplicate(up: Upstream, dialect: a2a.Dialect, url: str) -> ProbeResult:
    name = "duplicate-message"
    first = a2a.send_request(dialect, "a2a-tape probe: duplicate message", stream=False)
    again = a2a.send_request(dialect, "a2a-tape probe: duplicate message", stream=False, message_id=first.message_id)
    a = await up.call(first, url)
    if _error(a):
        return ProbeResult(name, False, f"the first message was refused ({_error(a)})")
    b = await up.call(again, url)
    if _error(b):
        return ProbeResult(name, False, f"the repeat was refused instead of answered ({_error(b)})")
    ta, tb = _task_id(a), _task_id(b)
    if ta is None and tb is None:
        ma = a.body.message.message_id if isinstance(a.body, store.MessageItem) else None
        mb = b.body.message.message_id if isinstance(b.body, store.MessageItem) else None
        if ma is not None and ma == mb:
            return ProbeResult(name, True, "the repeat got the same reply message")
        return ProbeResult(name, False, f"the repeat got another reply ({ma} then {mb})")
    if ta != tb:
        return ProbeResult(name, False, f"the same messageId created two tasks ({ta}, {tb})")
    return ProbeResult(name, True, f"the repeat was answered with the same task ({ta})")


async def probe_dropped_stream(up: Upstream, dialect: a2a.Dialect, url: str, timeout: float) -> ProbeResult:  # noqa: ASYNC109 - the stall bound of its recorded streams, not a cancel scope
    name = "dropped-stream"
    assert up.card is not None
    if not up.card.streaming:
        return ProbeResult(name, True, "skipped: the agent card does not offer streaming")
    items, _ = await up.stream(
        a2a.send_request(dialect, "a2a-tape probe: dropped stream", stream=True), url, None, stall=timeout, stop_after=1
    )
    if not items or _error(items[0]):
        return ProbeResult(name, False, f"the stream did not start ({_error(items[0]) if items else 'no event'})")
    task_id = _task_id(items[0])
    if task_id is None:
        return ProbeResult(name, True, "skipped: the agent answered without a task")
    if not is_open(_state(items[0])):
        return ProbeResult(name, True, f"task {task_id} ended before the drop ({_state(items[0])})")
    # dropped after one event: resubscribe, then GetTask until the task ends
    more, _ = await up.stream(a2a.task_request("resubscribe", dialect, task_id), url, task_id, stall=timeout)
    state = next((s for s in (_state(i) for i in reversed(more)) if s is not None), None)
    if state is None or is_open(state):
        state = await _until_ended(up, dialect, url, task_id, timeout)
    if state is None:
        return ProbeResult(name, False, f"task {task_id} was still submitted/working {timeout:g}s after the drop")
    return ProbeResult(name, True, f"task {task_id} reached '{state}' after the stream was dropped")


async def probe_stall(up: Upstream, dialect: a2a.Dialect, url: str, timeout: float) -> ProbeResult:  # noqa: ASYNC109 - as probe_dropped_stream
    name = "stall"
    assert up.card is not None
    if up.card.streaming:
        items, _ = await up.stream(
            a2a.send_request(dialect, "a2a-tape probe: stall", stream=True), url, None, stall=timeout, stop_after=1
        )
        first = items[0] if items else None
    else:
        first = await up.call(a2a.send_request(dialect, "a2a-tape probe: stall", stream=False), url)
    if first is None or _error(first):
        return ProbeResult(name, False, f"the task did not start ({_error(first) if first else 'no event'})")
    task_id = _task_id(first)
    if task_id is None:
        return ProbeResult(name, True, "skipped: the agent answered without a task (nothing can stall)")
    cancel = await up.call(a2a.task_request("cancel", dialect, task_id), url, task_id)
    state = await _until_ended(up, dialect, url, task_id, timeout)
    if state is None:
        why = _error(cancel) or "cancel accepted"
        return ProbeResult(name, False, f"task {task_id} stayed submitted/working after a cancel ({why})")
    return ProbeResult(name, True, f"task {task_id} did not stay working: '{state}' after a cancel request")


async def run_probes(
    st: store.RecordingStore,
    url: str,
    *,
    timeout: float = 20.0,  # noqa: ASYNC109 - each probe's bound (--timeout), given to the calls, not a cancel scope
    token: str | None = None,
    redactor: Redactor | None = None,
) -> ProbeReport:
    """Run every probe against ``url``; each exchange is recorded in ``st`` (role ``probe``),
    through the capture core, redacted by ``redactor`` (default: ``[tool.a2a-tape]``). Every call
    has connect, first-byte and read timeouts (:meth:`recorder.upstream.Upstream.timeouts`);
    every detail text is redacted as the disk is (the token, a URL's password or key)."""
    redactor = redactor or build_redactor()
    headers = {"authorization": f"Bearer {token}"} if token else {}
    limits = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=None)
    async with httpx.AsyncClient(transport=LazyTlsTransport(), headers=headers, timeout=limits) as http:
        up = Upstream(st, url, http, role="probe", redactor=redactor)
        up.call_timeout = timeout  # every call's head and reads: no probe waits past what it was given
        try:
            await up.load_card()
        except Unreachable as exc:
            return ProbeReport(False, [ProbeResult("agent-card", False, redactor.text(str(exc)))])
        ep = up.endpoint(None)  # the card's first interface a2a-tape speaks (HTTP+JSON, JSON-RPC)
        dialect, endpoint, up.binding = ep.dialect, ep.url, client_of(ep.binding)
        results: list[ProbeResult] = []
        probes: list[tuple[str, Callable[[], Awaitable[ProbeResult]]]] = [
            ("duplicate-message", lambda: probe_duplicate(up, dialect, endpoint)),
            ("dropped-stream", lambda: probe_dropped_stream(up, dialect, endpoint, timeout)),
            ("stall", lambda: probe_stall(up, dialect, endpoint, timeout)),
        ]
        for name, probe in probes:
            try:
                results.append(await probe())
            except Unreachable as exc:
                results.append(ProbeResult(name, False, str(exc)))
    secrets = [token] if token else []
    for r in results:
        r.detail = redactor.text(r.detail, secrets)
    return ProbeReport(all(r.ok for r in results), results)
