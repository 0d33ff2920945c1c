"""Recorded push notifications, delivered by a replay to the webhook its client registers (issue 33).

A recording made through ``proxy`` (its push receiver on) holds each POST the agent made to a
client's webhook as a ``push`` exchange row: the agent's exact bytes, its arrival time, its task.
A replaying client registers its own webhook, in a send's ``configuration`` or by a config call
(:class:`Configs`, memory only: the token is the client's secret); when a send is replayed, the
pushes the agent made for that send's task (those that arrived from the send's start to the next
send of the task, to the first webhook the recording names) are POSTed to every webhook the
client has registered for the task by then (:class:`Run`), each with the token as the client set
it (``X-A2A-Notification-Token``) and the recorded bytes unchanged (recorded task ids included:
a replay answers with the recorded ids). Where the agent sent an ``Authorization`` header (the
config's ``authentication``: the recording keeps it redacted), the replay sends the one the
client's config makes, ``<scheme> <credentials>``, as a2a-sdk's sender does.

When: never before the client has the answer that starts the task. A whole-body answer (a
non-streaming send, where the agent pushed before it answered) lets them all go once it is sent;
a stream lets each push go once the items the agent had streamed before that push arrived are
sent (the recorded order of pushes and stream events is kept). ``--push-timing instant`` (the
default): no other wait; ``recorded``: besides, each push waits until as long after the replayed
send as it arrived after the recorded one. The send's faults (:mod:`.faults`) delay, duplicate,
drop or swap pushes.

Config calls (set, get, list, delete) are answered from what the replaying client registered
when the recording holds pushes (an agent that pushed); else as before, from the recording.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from a2a_tape.replay.serve.faults import Faults
from a2a_tape.replay.serve.modes import PushTiming
from a2a_tape.wire.push_configs import TOKEN_HEADER, config_task, registered

if TYPE_CHECKING:
    import httpx

    from a2a_tape.replay.serve.library import Episode, Library
    from a2a_tape.store import Exchange

_SET = ("tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig")  # (0.3, 1.0)
DELIVERY_TIMEOUT = 30.0  # seconds a webhook may take to answer one push


@dataclass
class Webhook:
    """One push config a replaying client registered, as it set it."""

    id: str
    url: str
    token: str | None
    authentication: Any = None

    def authorization(self) -> str | None:
        """The ``Authorization`` header this config's ``authentication`` makes (v1.0 ``scheme``, v0.3
        ``schemes``' first, with its ``credentials``), as a2a-sdk's sender makes it; None: none."""
        auth = self.authentication
        if not isinstance(auth, dict):
            return None
        scheme, credentials = auth.get("scheme"), auth.get("credentials")
        schemes = auth.get("schemes")
        if not scheme and isinstance(schemes, list) and schemes:
            scheme = schemes[0]
        if isinstance(scheme, str) and scheme and isinstance(credentials, str) and credentials:
            return f"{scheme} {credentials}"
        return None

    def as_result(self, task_id: str, dialect: str) -> dict[str, Any]:
        """The config as an a2a-sdk 1.3.0 agent echoes it (set, get, list) in ``dialect``."""
        conf: dict[str, Any] = {"id": self.id, "url": self.url}
        if self.token is not None:
            conf["token"] = self.token
        if self.authentication is not None:
            conf["authentication"] = self.authentication
        if dialect == "1.0":
            return {"id": self.id, "taskId": task_id, **{k: v for k, v in conf.items() if k != "id"}}
        return {"taskId": task_id, "pushNotificationConfig": conf}


class Configs:
    """The push configs registered in this replay, by task, in the order set (one per id: a
    config set again with the same id replaces it; no id: the task's id, as a2a-sdk does)."""

    def __init__(self) -> None:
        self._by_task: dict[str, dict[str, Webhook]] = {}

    def add(self, task_id: str, conf: dict[str, Any]) -> Webhook:
        cid = conf.get("id")
        token = conf.get("token")
        hook = Webhook(
            cid if isinstance(cid, str) and cid else task_id,
            str(conf["url"]),
            token if isinstance(token, str) and token else None,
            conf.get("authentication"),
        )
        self._by_task.setdefault(task_id, {})[hook.id] = hook
        return hook

    def of(self, task_id: str) -> list[Webhook]:
        return list(self._by_task.get(task_id, {}).values())

    def get(self, task_id: str, config_id: str | None) -> Webhook | None:
        hooks = self._by_task.get(task_id, {})
        if config_id is None:
            return next(iter(hooks.values()), None)
        return hooks.get(config_id)

    def delete(self, task_id: str, config_id: str | None) -> bool:
        hooks = self._by_task.get(task_id, {})
        return hooks.pop(config_id or task_id, None) is not None


@dataclass(frozen=True)
class Planned:
    """One recorded push as a replay sends it."""

    body: bytes  # the agent's bytes
    after: int  # stream items sent before it goes (0: a whole-body answer)
    offset: float  # seconds after the send's start it arrived, recorded
    authorized: bool = False  # the agent sent an Authorization header with it (the config's authentication)


def recorded_pushes(library: Library, ep: Episode) -> list[Exchange]:
    """The pushes the agent made for ``ep``'s task from its start to the task's next send, to the
    first webhook it pushed to then (one stream of updates: a second webhook got the same)."""
    task_id = ep.task_id
    if not task_id:
        return []
    start = ep.exchange.started_at
    later = [e.exchange.started_at for e in library.episodes if e.task_id == task_id and e.exchange.started_at > start]
    end = min(later, default=float("inf"))
    rows = [
        ex
        for ex in library.pushes.get(task_id, ())
        if start <= ex.started_at < end and ex.outcome != "refused" and ex.request_body is not None
    ]
    return [ex for ex in rows if ex.url == rows[0].url] if rows else []


def plan(library: Library, ep: Episode, streamed: bool) -> list[Planned]:
    """What a replay of ``ep`` pushes and when (``streamed``: its answer is a stream, whose
    items recorded before a push go before it; at least the first, the answer starting the task)."""
    rows = recorded_pushes(library, ep)
    if not rows:
        return []
    start = ep.exchange.started_at
    times: list[float] = []
    if streamed:
        t = start
        for s in ep.iter_served():
            t += s.gap
            times.append(t)
    out = []
    for ex in rows:
        after = max(1, sum(1 for t in times if t <= ex.started_at)) if streamed else 0
        authorized = any(k.lower() == "authorization" for k in (ex.request_headers or {}))
        out.append(Planned(ex.request_body or b"", after, max(0.0, ex.started_at - start), authorized))
    return out


def with_faults(planned: list[Planned], faults: Faults) -> list[tuple[Planned, int]]:
    """(push, copies) in the order they go: ``push-drop`` sends none of one, ``push-duplicate``
    two, ``push-reorder`` swaps the last two bodies (each keeps its place's wait)."""
    if not planned:
        return []
    bodies = [p.body for p in planned]
    if faults.push_reorder and len(bodies) > 1:
        bodies[-2], bodies[-1] = bodies[-1], bodies[-2]
    n = len(planned)
    dropped = n if faults.push_drop == 0 else faults.push_drop
    doubled = n if faults.push_duplicate == 0 else faults.push_duplicate
    out = []
    for i, (p, body) in enumerate(zip(planned, bodies, strict=True), start=1):
        copies = 0 if i == dropped else 2 if i == doubled else 1
        out.append((Planned(body, p.after, p.offset, p.authorized), copies))
    return out


@dataclass
class Run:
    """One replayed send's pushes on their way: told how far the answer has got (:meth:`moved`,
    :meth:`answered`), it POSTs each push when its turn comes."""

    task_id: str
    pushes: list[tuple[Planned, int]]
    configs: Configs
    recorded_timing: bool
    delay: float  # seconds before each push (push-delay)
    log: Callable[[str], None] | None = None
    started: float = field(default_factory=time.monotonic)
    sent: int = 0  # stream items sent
    is_answered: bool = False
    _moved: asyncio.Event = field(default_factory=asyncio.Event)

    def moved(self, sent: int) -> None:
        """The stream sent ``sent`` items (the first is the answer starting the task)."""
        if sent > self.sent:
            self.sent = sent
            self.is_answered = self.is_answered or sent >= 1
            self._moved.set()

    def answered(self) -> None:
        """The whole-body answer is sent."""
        self.is_answered = True
        self._moved.set()

    async def _reached(self, after: int) -> None:
        while not (self.is_answered and self.sent >= after):
            self._moved.clear()
            await self._moved.wait()

    async def deliver(self) -> None:
        import httpx  # loaded by Pushes at start (a replay with no push never loads it)

        from a2a_tape.wire.http_client import cookieless

        async with httpx.AsyncClient(
            timeout=httpx.Timeout(DELIVERY_TIMEOUT, connect=10.0), cookies=cookieless(), follow_redirects=False
        ) as http:
            for n, (p, copies) in enumerate(self.pushes, start=1):
                await self._reached(p.after)
                wait = (self.started + p.offset - time.monotonic()) if self.recorded_timing else 0.0
                wait = max(0.0, wait) + self.delay
                if wait > 0:
                    await asyncio.sleep(wait)
                hooks = self.configs.of(self.task_id)
                if copies == 0 or not hooks:
                    self._say(n, "not sent: fault push-drop" if copies == 0 else "not sent: no webhook registered")
                    continue
                for _ in range(copies):
                    for hook in hooks:
                        await self._post(http, hook, p, n)

    async def _post(self, http: httpx.AsyncClient, hook: Webhook, p: Planned, n: int) -> None:
        import httpx

        headers = {"content-type": "application/json"}
        if hook.token is not None:
            headers[TOKEN_HEADER] = hook.token
        authorization = hook.authorization() if p.authorized else None
        if authorization is not None:
            headers["authorization"] = authorization
        body = p.body
        try:
            resp = await http.post(hook.url, content=body, headers=headers)
            said = str(resp.status_code)
        except httpx.HTTPError as exc:
            said = f"not delivered ({type(exc).__name__})"
        self._say(n, f"webhook {hook.id} {said}")

    def _say(self, n: int, what: str) -> None:
        if self.log is not None:
            self.log(f"PUSH {n}/{len(self.pushes)} task {self.task_id} {what}")


class Pushes:
    """A replay's push side: the configs its clients registered, and the sends' pushes on their way."""

    def __init__(self, library: Library, timing: str = "instant") -> None:
        self.library = library
        self.recorded_timing = PushTiming.of(timing) is PushTiming.recorded
        self.configs = Configs()
        self.log: Callable[[str], None] | None = None  # a line per POST (serve prints them)
        self._running: set[asyncio.Task[None]] = set()
        # the pushes' HTTP client loaded now, never on the event loop at the first push; a replay with no
        # push never loads it (~70 ms of its start: httpx imports its own command line)
        if self.enabled:
            import httpx  # noqa: F401

    @property
    def enabled(self) -> bool:
        """The recording holds pushes: the agent pushed, so a replay does."""
        return bool(self.library.pushes)

    def start(self, ep: Episode, faults: Faults, *, streamed: bool) -> Run | None:
        """``ep``'s pushes on their way, waiting for the answer (None: it has none)."""
        planned = plan(self.library, ep, streamed)
        if not planned or not ep.task_id:
            return None
        run = Run(
            ep.task_id, with_faults(planned, faults), self.configs, self.recorded_timing, faults.push_delay_ms / 1000
        )
        run.log = self.log
        task = asyncio.get_running_loop().create_task(self._guarded(run))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return run

    @staticmethod
    async def _guarded(run: Run) -> None:
        try:
            await run.deliver()
        except Exception as exc:  # noqa: BLE001 - a failed delivery never takes the replay down
            print(f"a2a-tape serve: pushes of task {run.task_id} stopped: {type(exc).__name__}: {exc}", file=sys.stderr)

    def answer(self, op: str, dialect: str, params: Any) -> tuple[Any, str | None]:
        """A config call's result from the configs registered here: (result, None), or (None,
        why) for a task the recording does not hold or a config not set."""
        p = params if isinstance(params, dict) else {}
        task_id = config_task(dialect, p)
        if not isinstance(task_id, str) or not (self.library.pushes.get(task_id) or self.library.task_events(task_id)):
            return None, "Task not found"
        if op == "push-set":
            confs = registered(_SET[dialect == "1.0"], p)
            if not confs:
                return None, "a push config needs a url"
            return self.configs.add(task_id, confs[0]).as_result(task_id, dialect), None
        config_id = p.get("id") if dialect == "1.0" else p.get("pushNotificationConfigId")
        config_id = config_id if isinstance(config_id, str) and config_id else None
        if op == "push-list":
            listed = [h.as_result(task_id, dialect) for h in self.configs.of(task_id)]
            return ({"configs": listed} if dialect == "1.0" else listed), None
        if op == "push-get":
            hook = self.configs.get(task_id, config_id)
            return (hook.as_result(task_id, dialect), None) if hook else (None, "Push notification config not found")
        self.configs.delete(task_id, config_id)
        return None, None


def result_body(rpc_id: Any, result: Any) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", "id": rpc_id, "result": result})
