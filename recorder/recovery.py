"""Startup recovery (docs/design.md section 5): no task stays WORKING waiting for an executor that
will not come.

Run when the proxy starts and by ``a2a-tape recover``:

1. idempotency keys registered by a process that died are settled: a key whose exchange has
   recorded items is ready to replay (``replayed``); one with nothing recorded is marked
   ``lost`` (a repeat gets a clear error instead of a second execution);
2. every task whose last recorded state is submitted/working (or unknown) is resumed upstream:
   GetTask once (recorded); terminal or interrupted -> done; still active -> resubscribe when the
   card says streaming, else GetTask polling with backoff and jitter, everything recorded, until
   the task ends or makes no progress for ``stall_timeout`` (then it is cancelled upstream and
   FAILED locally). The rule is :func:`recorder.settle.settle`, the client's too; its decisions
   (resubscribed, polling) are local notes in the task's log;
3. whatever cannot be resumed gets a FAILED event of origin ``local`` with a readable reason.

Idempotent: a second run finds no active task and changes nothing. Two runs at once do not
double anything: a row lease in the store (owner = host:pid:nonce, atomic on SQLite and
PostgreSQL; a dead owner's lease is taken over, an expired one too) lets one run at a time, and the FAILED event is
appended only after re-reading the task's state inside the same write transaction.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import anyio
import httpx
import msgspec

from a2a_tape import store
from a2a_tape.capture.notes import Scrubs, failed_event, note_event
from a2a_tape.fold.fold import fold_task_events
from a2a_tape.fold.task_state import TaskState
from a2a_tape.recorder import client as a2a
from a2a_tape.recorder.settle import Backoff, settle
from a2a_tape.recorder.upstream import Unreachable, Upstream
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.events import is_interrupted, is_terminal
from a2a_tape.store.leases import new_owner as _owner
from a2a_tape.store.leases import owner_alive as _alive
from a2a_tape.store.methods import HTTP_JSON
from a2a_tape.store.redact import Redactor, build_redactor
from a2a_tape.store.writer import writer_of
from a2a_tape.wire.binding_client import Binding
from a2a_tape.wire.bindings import client_of
from a2a_tape.wire.http_client import LazyTlsTransport, cookieless

LEASE_KEY = "recovery.lease"
LEASE_TTL = 120.0
DEFAULT_STALL = 30.0
CANCEL_SUFFIX = "; cancel requested upstream"


class FailedTask(msgspec.Struct):
    task_id: str
    reason: str


class RecoveryReport(msgspec.Struct):
    resumed: list[str] = []
    failed: list[FailedTask] = []
    replayed: list[str] = []


class RecoveryBusy(A2ATapeError):
    """Another recovery holds the lease and did not finish in time."""


# -- reading the log ---------------------------------------------------------------------------


def task_state(task_id: str, events: list[store.StoredEvent]) -> TaskState:
    """The task as the one fold (:class:`fold.fold.TaskFold`) leaves it: last state, context id,
    wire dialect (of its first upstream item) and last position; the log is the truth."""
    return fold_task_events(task_id, events).s


def is_open(state: str | None) -> bool:
    """Still in flight: not terminal and not waiting for the user."""
    return not is_terminal(state) and not is_interrupted(state)


def open_tasks(st: store.EventLog, *, up_to: int | None = None) -> list[TaskState]:
    out = []
    for te in st.task_events():
        if up_to is not None and te.first_position > up_to:
            continue
        view = task_state(te.task_id, st.read_task(te.task_id))
        if is_open(view.state):
            out.append(view)
    return out


def fail_if_open(st: store.AppendLog, task_id: str, context_id: str | None, reason: str, scrub: Scrubs) -> bool:
    """Append a local FAILED unless the task already ended: checked in the same write transaction."""
    with st.transaction():
        view = task_state(task_id, st.read_task(task_id))
        if not is_open(view.state):
            return False
        st.append(failed_event(scrub, task_id, context_id or view.context_id, reason))
    return True


# -- the lease ---------------------------------------------------------------------------------


def take_lease(st: store.LeasesAndMeta, owner: str, ttl: float = LEASE_TTL) -> str | None:
    """Take (or renew) the recovery lease; return the other holder when it is busy.

    The store's row lease is atomic on every backend (several proxies on one PostgreSQL log
    race for it safely); a holder on this host whose process is gone is taken over at once,
    any other holder only when its lease expires.
    """
    if st.lease_acquire(LEASE_KEY, owner, ttl):
        return None
    holder = st.lease_holder(LEASE_KEY)
    if holder is None or not _alive(holder):
        if st.lease_acquire(LEASE_KEY, owner, ttl, take_over=holder):
            return None
        holder = st.lease_holder(LEASE_KEY)
    return holder or "an unknown holder"


def drop_lease(st: store.LeasesAndMeta, owner: str) -> None:
    st.lease_release(LEASE_KEY, owner)


PROXY_KEY = "proxy.running"


def mark_proxy(st: store.LeasesAndMeta) -> str:
    """Say in the store that a proxy is relaying into it (so a manual recovery waits)."""
    owner = _owner()
    st.set_meta(PROXY_KEY, owner)
    return owner


def unmark_proxy(st: store.Store, owner: str) -> None:
    with st.transaction():
        if st.get_meta(PROXY_KEY) == owner:
            st.set_meta(PROXY_KEY, "")


def running_proxy(st: store.LeasesAndMeta) -> str | None:
    """The live proxy relaying into this store, if any (a dead one's mark is ignored)."""
    owner = st.get_meta(PROXY_KEY) or ""
    return owner if owner and _alive(owner) else None


# -- the recovery loop ------------------------------------------------------------------------


def _state(item: store.Item) -> str | None:
    body = item.body
    if isinstance(body, (store.TaskSnapshot, store.StatusUpdate)):
        return body.state
    return None


def _progress_key(item: store.Item) -> object:
    body = item.body
    if isinstance(body, store.TaskSnapshot):
        return (body.state, body.artifacts)
    return None


def binding_of(st: store.ExchangeLog, task_id: str) -> str | None:
    """The binding this task was last called in, by its exchanges (None: none says)."""
    return next((ex.binding for ex in reversed(st.exchanges(task_id)) if ex.binding), None)


def upstream_of(st: store.ExchangeLog, task_id: str) -> str | None:
    """The origin (scheme://host:port) this task was recorded from, by its exchanges."""
    for ex in reversed(st.exchanges(task_id)):
        p = urlsplit(ex.url or "")
        if p.scheme in ("http", "https") and p.netloc:
            return f"{p.scheme}://{p.netloc.rpartition('@')[2]}"  # no (redacted) credentials
    return None


async def _get_task(
    up: Upstream, dialect: a2a.Dialect, url: str, task_id: str, unreachable: str, binding: Binding
) -> store.Item | str:
    """GetTask, recorded; the task's item, or the reason recovery must FAIL it."""
    try:
        item = await up.call(a2a.task_request("get", dialect, task_id), url, task_id, binding=binding)
    except Unreachable as exc:
        return f"recorder restarted and the upstream {unreachable}: {exc}"
    if isinstance(item.body, store.ErrorItem):
        return (
            f"recorder restarted and the upstream no longer knows the task "
            f"(error {item.body.code}: {item.body.message})"
        )
    return item


class _Resume:
    """One orphaned task followed upstream, as a :class:`recorder.settle.Follower`: its calls
    are recorded exchanges, its decisions local notes in the task's log."""

    def __init__(self, up: Upstream, view: TaskState, binding: str | None, stall_timeout: float) -> None:
        self.up = up
        self.task_id = view.task_id
        # asked in the binding it was recorded in (HTTP+JSON; anything else: JSON-RPC)
        ep = up.endpoint(view.dialect, "http+json" if binding == HTTP_JSON else "jsonrpc")
        self.dialect, self.url, self.binding = ep.dialect, ep.url, client_of(ep.binding)
        self.stall_timeout = stall_timeout
        self.state: str | None = view.state
        self.last_key: object = _UNSEEN
        self.last_progress = time.monotonic()

    def settled(self) -> bool:
        return not is_open(self.state)

    def progress_at(self) -> float:
        return self.last_progress

    async def get_task(self) -> str | None:
        unreachable = (
            "could not be asked about the task"
            if self.last_key is _UNSEEN
            else "became unreachable while resuming the task"
        )
        item = await _get_task(self.up, self.dialect, self.url, self.task_id, unreachable, self.binding)
        if isinstance(item, str):
            return item
        self.state = _state(item) or self.state
        key = _progress_key(item)
        if key != self.last_key:
            self.last_key, self.last_progress = key, time.monotonic()
        return None

    async def resubscribe(self) -> str | None:
        left = max(0.1, self.stall_timeout - (time.monotonic() - self.last_progress))
        items, _ = await self.up.stream(
            a2a.task_request("resubscribe", self.dialect, self.task_id),
            self.url,
            self.task_id,
            stall=left,
            binding=self.binding,
        )
        if items and isinstance(items[0].body, store.ErrorItem):
            return f"{items[0].body.code}: {items[0].body.message}"
        if any(not isinstance(i.body, store.ErrorItem) for i in items[1:]):
            self.last_progress = time.monotonic()  # new events after the snapshot
        if items:
            self.state = _state(items[-1]) or self.state
        return None

    async def note(self, action: str, detail: str) -> None:
        await self.up.writer.append(note_event(self.up.redactor, action, detail, task_id=self.task_id))


_UNSEEN = object()


async def _resume(up: Upstream, view: TaskState, binding: str | None, stall_timeout: float) -> str | None:
    """Follow one task upstream to its end; None when resumed, else the reason it failed."""
    assert up.card is not None
    try:
        follow = _Resume(up, view, binding, stall_timeout)
    except a2a.NotAnAgent as exc:  # the card no longer offers the binding the task was recorded in
        return f"recorder restarted and the upstream cannot be asked about the task: {exc}"
    done = await settle(
        follow, streaming=up.card.streaming, stall_timeout=stall_timeout, backoff=Backoff(0.2, 5.0, jitter=0.5)
    )
    if done.how == "settled":
        return None
    if done.how == "lost":
        return done.why
    # stalled: never wait forever; cancel upstream (recorded) and say why
    try:
        await up.call(
            a2a.task_request("cancel", follow.dialect, view.task_id), follow.url, view.task_id, binding=follow.binding
        )
    except Unreachable:
        pass
    return (
        f"recorder restarted and the task made no progress upstream for {stall_timeout:g}s "
        f"(still submitted/working){CANCEL_SUFFIX}"
    )


def settle_keys(st: store.Store, before: float) -> list[str]:
    """In-flight idempotency keys of a process that died: ready to replay, or lost."""
    replayed = []
    for rec in st.idem_all():
        if rec.state != "in_flight" or rec.created_at >= before:
            continue
        events = st.read_exchange(rec.exchange_id) if rec.exchange_id is not None else []
        if events:
            tid = next((e.task_id for e in events if e.task_id), None)
            st.idem_update(rec.key, task_id=tid, state="done")
            replayed.append(rec.key)
        else:
            st.idem_update(rec.key, state="lost")
    return replayed


class _Upstreams:
    """The upstream of each base URL, its card read once (or why it cannot be used); the HTTP
    client is made only when a task needs one, and closed with this if it was made here."""

    def __init__(self, st: store.Store, http: httpx.AsyncClient | None, redactor: Redactor) -> None:
        self.st, self.http, self.redactor = st, http, redactor
        self.own_http = http is None
        self.by_base: dict[str, Upstream | str] = {}

    async def get(self, base: str) -> Upstream | str:
        base = base.rstrip("/")
        up = self.by_base.get(base)
        if up is None:
            if self.http is None:
                self.http = httpx.AsyncClient(
                    transport=LazyTlsTransport(),
                    cookies=cookieless(),  # the tasks resumed are many clients'
                    timeout=httpx.Timeout(connect=10.0, read=None, write=30.0, pool=None),
                )
            candidate = Upstream(self.st, base, self.http, redactor=self.redactor)
            try:
                await candidate.load_card()
                up = candidate
            except Unreachable as exc:
                up = f"recorder restarted and the upstream is unusable: {exc}"
            self.by_base[base] = up
        return up

    async def aclose(self) -> None:
        if self.own_http and self.http is not None:
            await self.http.aclose()


async def _wait_for_lease(st: store.Store, owner: str, wait: float) -> None:
    deadline = time.monotonic() + wait
    while True:
        holder = await anyio.to_thread.run_sync(take_lease, st, owner)
        if holder is None:
            return
        if time.monotonic() > deadline:
            raise RecoveryBusy(f"another recovery is running ({holder}); try again when it ends")
        await anyio.sleep(0.1)


async def _recover_task(
    view: TaskState, upstreams: _Upstreams, base: str | None, binding: str | None, stall: float
) -> str | None:
    """Resume one task upstream; None when it was resumed, else why it could not be."""
    if base is None:
        return "recorder restarted and no upstream is known for the task (pass --upstream)"
    up = await upstreams.get(base)
    return up if isinstance(up, str) else await _resume(up, view, binding, stall)


async def _account(st: store.Store, view: TaskState, reason: str | None, report: RecoveryReport, scrub: Scrubs) -> None:
    """What became of one task, in the report and (when it failed) in its log."""
    writer = writer_of(st)
    if reason is None:
        report.resumed.append(view.task_id)
    elif await writer.write(fail_if_open, st, view.task_id, view.context_id, reason, scrub):
        report.failed.append(FailedTask(view.task_id, reason))
    elif reason.endswith(CANCEL_SUFFIX):
        # our cancel ended it upstream (canceled is terminal): keep why, as a local note
        await writer.append(note_event(scrub, "recovery-cancel", reason, task_id=view.task_id))
        report.failed.append(FailedTask(view.task_id, reason))
    else:
        report.resumed.append(view.task_id)  # it ended meanwhile (another writer)


async def recover(
    st: store.Store,
    upstream: str | None = None,
    *,
    http: httpx.AsyncClient | None = None,
    stall_timeout: float = DEFAULT_STALL,
    lease_wait: float = 60.0,
    up_to: int | None = None,
    roles: frozenset[str] | None = None,
    redactor: Redactor | None = None,
) -> RecoveryReport:
    """Run the startup recovery once (see the module docstring).

    ``up_to``: only tasks first seen at or before this log position (the proxy passes the end of
    the log at its start, so tasks it is relaying live are not resumed a second time).
    ``roles``: only tasks recorded by exchanges of these roles (the proxy resumes what proxies
    recorded, not fixtures imported into the same file). ``redactor``: the run's (default:
    ``[tool.a2a-tape]`` of the current directory), for every exchange and item recorded."""
    owner = _owner()
    await _wait_for_lease(st, owner, lease_wait)
    started = time.time()
    report = RecoveryReport()
    upstreams = _Upstreams(st, http, redactor or build_redactor())
    try:
        report.replayed = await anyio.to_thread.run_sync(settle_keys, st, started)
        tasks = await anyio.to_thread.run_sync(lambda: open_tasks(st, up_to=up_to))
        if roles is not None:
            tasks = [t for t in tasks if any(ex.role in roles for ex in st.exchanges(t.task_id))]
        for view in tasks:
            await anyio.to_thread.run_sync(take_lease, st, owner)  # renew
            base = upstream or await anyio.to_thread.run_sync(upstream_of, st, view.task_id)
            binding = await anyio.to_thread.run_sync(binding_of, st, view.task_id)
            reason = await _recover_task(view, upstreams, base, binding, stall_timeout)
            await _account(st, view, reason, report, upstreams.redactor)
    finally:
        await upstreams.aclose()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(drop_lease, st, owner)
    return report
