"""``a2a-tape verify``: the recorded client, re-sent to a live agent; each answer a new run (docs/verify.md).

For a recorded run of a task, the client's requests are sent again in order (:func:`replayed`: the
sends, GetTask and CancelTask of its exchanges, in the binding they were recorded in unless told
otherwise), each with a new message id and JSON-RPC id, the task and context ids the live agent
gave in place of the recorded ones, and the recorded headers minus credentials and what the binding
sets (the user's ``--header`` adds them back). The calls are the recorded-upstream client's
(:class:`recorder.upstream.Upstream`, write-ahead, every timeout of ``record``); the exchanges carry a
new observer of source ``verify`` and are filed under the recorded task (``filed_under``), so
the answer is a new run of that task (:mod:`fold.runs`), then compared with the recorded run by
:mod:`inspection.verify_rules`.

A live run that disagrees with another live run of the same task (``runs`` > 1) is *flaky*: a
sampling agent, not a regression.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import httpx
import msgspec

from a2a_tape.capture.notes import note_event
from a2a_tape.capture.upstream_call import Collect, StallWatch
from a2a_tape.fold.runs import SERVED_NOTE, Run, split_runs
from a2a_tape.inspection.steps import decode_events
from a2a_tape.inspection.verify_rules import Contract, Divergence, Rules, changes, compare, contract, named_task
from a2a_tape.recorder import client as a2a
from a2a_tape.recorder.upstream import Unreachable, Upstream
from a2a_tape.store import Exchange, RecordingStore
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.events import SETTLED_STATES
from a2a_tape.store.methods import CARD_BINDINGS, METHODS, STREAMING_OPERATIONS
from a2a_tape.store.observers import new_observer
from a2a_tape.store.redact import REDACTED, Redactor
from a2a_tape.wire.bindings import client_of, recorded_call
from a2a_tape.wire.http_client import LazyTlsTransport

REPLAYED: frozenset[str] = frozenset({"send", "stream", "get", "cancel", "resubscribe"})
"""The operations re-sent (push configs and cards are not). A resubscribe is a recovery: it is sent
again only while the live task is not settled (a live stream that ended where it should needs none)."""

DROPPED_HEADERS: frozenset[str] = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "accept",
        "accept-encoding",
        "connection",
        "transfer-encoding",
        "user-agent",
        "a2a-version",
        "idempotency-key",
        "cookie",
    }
)
"""Recorded request headers not sent again: the binding and httpx set them, or they name the
recorded call itself. Credentials (the redactor's secret headers) are never in a recording."""

Verdict = Literal["match", "diverged", "flaky", "skipped"]

SPOKEN: Final = ("jsonrpc", "http+json")
"""The bindings verify sends in (a gRPC recording is sent over JSON-RPC; gRPC itself not yet)."""


class AgentUnreachable(A2ATapeError):
    """The live agent cannot be called (down, not an agent, no such binding): exit 2."""


class NotInBinding(AgentUnreachable):
    """The agent's interface in the binding asked for speaks another A2A version than the recording."""


@dataclass
class VerifyOptions:
    url: str
    binding: a2a.BindingChoice = "auto"  # auto: the binding each request was recorded in
    headers: list[tuple[str, str]] = field(default_factory=list)
    rules: Rules = Rules()
    runs: int = 1
    call_timeout: float = 30.0
    stall_timeout: float = 60.0
    across: bool = False  # each binding the card offers (--across-bindings)


class Update(msgspec.Struct):
    """What ``--update`` did for one task: the run served before and after, and what changed
    between them (text, times: what the rules let pass); ``served`` None: not updated (``why``)."""

    was: str  # the run served before, TASK@N
    served: str | None  # the run served now (None: unchanged)
    changes: list[str] = []
    why: str | None = None  # why the task was not updated


class TaskVerdict(msgspec.Struct):
    """What verify found for one task."""

    task_id: str
    recorded: str  # the recorded run, TASK@N
    live: list[str]  # the live runs, TASK@N in the log they went to
    verdict: Verdict
    divergences: list[Divergence]  # of the first live run that diverged (none: match)
    disagreements: list[Divergence] = []  # between live runs (flaky)
    update: Update | None = None  # with --update
    binding: str | None = None  # the binding the live runs were sent in (--across-bindings)
    note: str | None = None  # why a task (or a binding of it) was skipped

    @property
    def first(self) -> Divergence | None:
        return self.divergences[0] if self.divergences else None


# -- the requests, again ------------------------------------------------------------------------


def replayed(run: Run) -> list[Exchange]:
    """The recorded run's requests to send again, in order."""
    out = []
    for ex in run.exchanges:
        if ex.rpc_method is None or ex.rpc_method == "agent-card" or ex.role == "recovery":
            continue
        call = recorded_call(ex)
        method = _method(call.body)
        if method in METHODS and METHODS[method][0] in REPLAYED:
            out.append(ex)
    return out


def _method(body: bytes) -> str:
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return ""
    return str(doc.get("method", "")) if isinstance(doc, dict) else ""


def sent_headers(
    recorded: dict[str, str], redactor: Redactor, extra: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The recorded headers minus credentials and what the binding sets, then the user's."""
    given = {k.lower() for k, _ in extra}
    kept = [
        (k, v)
        for k, v in recorded.items()
        if k.lower() not in DROPPED_HEADERS
        and k.lower() not in given
        and REDACTED not in v
        and not redactor.is_secret_header(k)
    ]
    return kept + list(extra)


_rpc_ids = itertools.count(1)


def rewrite(body: bytes, ids: dict[str, str]) -> tuple[bytes, str | None]:
    """A recorded JSON-RPC request with a new JSON-RPC id, a new id for each message, and each
    recorded id of ``ids`` replaced by the live one; returns it and the first new message id."""
    doc = msgspec.json.decode(body)
    fresh: list[str] = []

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (_new_message_id(fresh) if k == "messageId" and isinstance(v, str) else walk(v))
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str):
            for old, new in ids.items():
                if old and old in value:
                    value = value.replace(old, new)
        return value

    doc = walk(doc)
    if isinstance(doc, dict):
        doc["id"] = f"a2a-tape-verify-{next(_rpc_ids)}"
    return msgspec.json.encode(doc), fresh[0] if fresh else None


def _names_task(body: bytes, task_id: str) -> bytes:
    """A request about a task (GetTask, CancelTask, a resubscribe) that names none (a hand-made
    recording) asks about ``task_id``."""
    doc = msgspec.json.decode(body)
    params = doc.get("params") if isinstance(doc, dict) else None
    if isinstance(params, dict) and ("id" in params or "name" in params):
        return body
    doc["params"] = {"id": task_id}
    return msgspec.json.encode(doc)


def _new_message_id(fresh: list[str]) -> str:
    fresh.append(a2a.new_id())
    return fresh[-1]


# -- one live run -------------------------------------------------------------------------------


def _context_of(run: Run) -> str | None:
    return next((s.item.context_id for s in decode_events(run.events) if s.item.context_id), None)


class LiveRun:
    """One live run of a recorded run: its requests sent again, in order, recorded."""

    def __init__(
        self, log: RecordingStore, recorded: Run, http: httpx.AsyncClient, card: a2a.AgentCard, opts: VerifyOptions
    ) -> None:
        self.log, self.recorded, self.opts = log, recorded, opts
        self.observer = new_observer("verify")
        # each exchange of the run stamped with its observer (source verify) and filed under the
        # recorded task, whatever id the agent gives it (the payloads keep the agent's own)
        self.up = Upstream(
            log,
            opts.url,
            http,
            role="client",
            redactor=Redactor(),
            observer=self.observer,
            filed_under=recorded.task_id,
        )
        self.up.card = card
        self.up.call_timeout = opts.call_timeout
        self.up.first_byte = opts.call_timeout
        # recorded id -> live id (a context of the recording is a new one until the agent names its own)
        self.ids: dict[str, str] = {}
        ctx = _context_of(recorded)
        if ctx:
            self.ids[ctx] = a2a.new_id()
        self.recorded_task = named_task(recorded.task_id, recorded.events)
        self.recorded_context = ctx
        self.context_learnt = False
        self.state: str | None = None  # the live task's last state, as its answers said

    async def run(self) -> Run:
        for k, ex in enumerate(replayed(self.recorded)):
            if self.state in SETTLED_STATES and METHODS[_method(recorded_call(ex).body)][0] == "resubscribe":
                continue  # the recording needed a recovery here; the live run does not
            await self.send(ex, first=k == 0)
        return self.result()

    async def send(self, ex: Exchange, *, first: bool) -> None:
        call = recorded_call(ex)
        body, message_id = rewrite(call.body, self.ids)
        method = _method(body)
        op, dialect = METHODS[method]
        if op not in ("send", "stream"):
            body = _names_task(body, self.ids.get(self.recorded_task, self.recorded_task))
        choice: a2a.BindingChoice = self.opts.binding
        if choice == "auto":
            choice = "http+json" if call.binding == "http+json" else "jsonrpc"
        try:
            ep = self.up.endpoint(dialect, choice)
        except a2a.NotAnAgent as exc:
            raise AgentUnreachable(str(exc)) from None
        if ep.dialect != dialect:
            raise NotInBinding(
                f"task {self.recorded.task_id} was recorded in A2A {dialect}: {choice} at {ep.url} speaks {ep.dialect}"
            )
        req = a2a.Request(op, method, dialect, body, "", message_id)
        self.up.headers = sent_headers(ex.request_headers, self.up.redactor, self.opts.headers)
        sink = Collect()
        streaming = op in STREAMING_OPERATIONS
        watch = (
            StallWatch(self.opts.stall_timeout, settled=sink.settled, grace=self.up.close_grace) if streaming else None
        )
        timeouts = self.up.timeouts(stream_first_byte=self.opts.stall_timeout) if streaming else None
        ended = await self.up.exchange(req, ep.url, sink, timeouts=timeouts, watch=watch, binding=client_of(ep.binding))
        if first and ended.fault is not None and ended.items == 0 and isinstance(ended.fault, httpx.TransportError):
            raise AgentUnreachable(ended.error or f"cannot reach {self.opts.url}")
        self.learn([*sink.items, *([ended.item] if ended.item is not None else [])])
        self.state = sink.state or self.state

    def learn(self, items: Sequence[Any]) -> None:
        """The live task and context ids, from the first items that name them."""
        for item in items:
            if self.recorded_task not in self.ids and item.task_id:
                self.ids[self.recorded_task] = item.task_id
            if self.recorded_context and item.context_id and not self.context_learnt:
                self.ids[self.recorded_context] = item.context_id
                self.context_learnt = True

    def result(self) -> Run:
        """The live run, as the log holds it (an empty run when no event came)."""
        task = self.recorded.task_id
        runs = split_runs(task, self.log.read_task(task), self.log.exchanges(task))
        found = next((r for r in runs if r.observer == self.observer.id), None)
        if found is not None:
            return found
        mine = [ex for ex in self.log.exchanges(task) if ex.observer == self.observer.id]
        return Run(task, len(runs) + 1, self.observer.id, "verify", self.observer.host, 0, [], mine)


# -- a task, and many -----------------------------------------------------------------------------


def run_contract(run: Run, *, doctor: bool = True) -> Contract:
    return contract(run.selector, run.task_id, run.events, run.exchanges, doctor=doctor)


def judge(recorded: Run, lives: Sequence[Run], rules: Rules) -> TaskVerdict:
    """The verdict of one task from its recorded run and its live runs (the recording's doctor
    findings only when a live run has some: the rule looks for live ones the recording has not)."""
    contracts = [run_contract(r) for r in lives]
    rec = run_contract(recorded, doctor=any(c.doctor for c in contracts))
    found = [compare(rec, c, rules) for c in contracts]
    among = next((d for c in contracts[1:] if (d := compare(contracts[0], c, rules))), [])
    live = [r.selector for r in lives]
    if among:
        # the live runs disagree: flaky, with the first live run's divergences from the recording
        # that has any. None may have any: the rules are not transitive (a time within the factor
        # of the recorded one on both sides, but not of each other; a doctor finding the recording
        # has, on one live run only)
        diverged = next((f for f in found if f), [])
        return TaskVerdict(recorded.task_id, recorded.selector, live, "flaky", diverged, among)
    if found[0]:
        return TaskVerdict(recorded.task_id, recorded.selector, live, "diverged", found[0])
    return TaskVerdict(recorded.task_id, recorded.selector, live, "match", [])


NOT_UPDATED: Final = {
    "diverged": "diverged: a failing verify never replaces the recording (record it anew once the change is meant)",
    "flaky": "flaky: the live runs disagree, none of them is the agent's answer",
}


def update(log: RecordingStore, recorded: Run, lives: Sequence[Run], verdict: TaskVerdict) -> Update:
    """``--update``: after a match, the first live run becomes the run ``serve`` replays (and the
    one the next verify compares with): a local note of action :data:`fold.runs.SERVED_NOTE` on
    its last exchange, so it is that run's own. Never after a divergence or a flaky verdict."""
    if verdict.verdict != "match":
        return Update(recorded.selector, None, why=NOT_UPDATED.get(verdict.verdict, verdict.verdict))
    live = lives[0]
    last = max((ex.id for ex in live.exchanges if ex.id is not None), default=None)
    if live.source != "verify" or last is None:
        return Update(recorded.selector, None, why="the live run is not in the recording's log")
    detail = f"replaces {recorded.selector}"
    log.append(note_event(Redactor(), SERVED_NOTE, detail, task_id=live.task_id, exchange_id=last))
    return Update(recorded.selector, live.selector, changes(run_contract(recorded), run_contract(live)))


async def load_card(url: str, http: httpx.AsyncClient, log: RecordingStore, call_timeout: float) -> a2a.AgentCard:
    """The live agent's card (not recorded); :class:`AgentUnreachable` when there is none."""
    up = Upstream(log, url, http, redactor=Redactor())
    up.call_timeout = call_timeout
    try:
        return await up.load_card()
    except Unreachable as exc:
        raise AgentUnreachable(str(exc)) from None


async def verify(
    log: RecordingStore,
    recorded: Sequence[Run],
    opts: VerifyOptions,
    *,
    progress: Callable[[int, int], None] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    adopt: bool = False,
) -> list[TaskVerdict]:
    """Each recorded run sent again ``opts.runs`` times to the agent at ``opts.url``, its live
    runs recorded into ``log`` and judged; ``adopt`` (``--update``, ``log`` holding the
    recordings): a task that matched is served from its first live run from then on (:func:`update`)."""
    out: list[TaskVerdict] = []
    async with httpx.AsyncClient(transport=transport or LazyTlsTransport(), follow_redirects=False) as http:
        card = await load_card(opts.url, http, log, opts.call_timeout)
        bindings: list[a2a.BindingChoice | None] = [None]
        if opts.across:
            offered = card_bindings(card)
            bindings = [b for b in SPOKEN if b in offered]
            if not bindings:
                raise AgentUnreachable(f"its card offers no binding verify speaks ({', '.join(offered) or 'none'})")
        total, done = len(recorded) * opts.runs * len(bindings), 0
        for run in recorded:
            for binding in bindings:
                each = opts if binding is None else dataclasses.replace(opts, binding=binding)
                lives = []
                try:
                    for _ in range(opts.runs):
                        lives.append(await LiveRun(log, run, http, card, each).run())
                        done += 1
                        if progress is not None:
                            progress(done, total)
                except NotInBinding as exc:
                    if binding is None:
                        raise
                    done += opts.runs - len(lives)
                    out.append(
                        TaskVerdict(run.task_id, run.selector, [], "skipped", [], binding=binding, note=str(exc))
                    )
                    continue
                verdict = judge(run, lives, opts.rules)
                verdict.binding = binding
                if adopt:
                    verdict.update = update(log, run, lives, verdict)
                out.append(verdict)
    return out


def card_bindings(card: a2a.AgentCard) -> list[str]:
    """The bindings the card offers, in its order (jsonrpc, http+json, grpc)."""
    out: list[str] = []
    for itf in a2a.interfaces(card):
        binding = CARD_BINDINGS.get((itf.protocolBinding or itf.transport or "JSONRPC").upper())
        if binding is not None and binding not in out:
            out.append(binding)
    return out
