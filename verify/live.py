"""``a2a-tape verify``: the recorded client, re-sent to a live agent; each answer a new run (docs/verify.md).

For a recorded run of a task, the client's requests are sent again in order (:func:`replayed`: the
sends, GetTask and CancelTask of its exchanges, in the binding they were recorded in unless told
otherwise), each with a new message id and JSON-RPC id, the task and context ids the live agent
gave in place of the recorded ones, and the recorded headers minus credentials and what the binding
sets (the user's ``--header`` adds them back). The calls are the recorded-upstream client's
(:class:`recorder.upstream.Upstream`, write-ahead, every timeout of ``record``); the exchanges carry a
new observer of source ``verify`` and are filed under the recorded task (the capture's ``filed_under``), so
the answer is a new run of that task (:mod:`fold.runs`), then compared with the recorded run by
:mod:`inspection.verify_rules`.

The live run's contract is built as its events are recorded (:class:`_Call`, the sink of each
call, hands every batch to a :class:`inspection.run_contract.ContractBuilder` once it is in the
log, text chunks as they were peeked): one decode and one fold per event, nothing read back from
the log. The recorded run's contract is built once per task, whatever the number of live runs.

A live run that disagrees with another live run of the same task (``runs`` > 1) is *flaky*: a
sampling agent, not a regression.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import httpx
import msgspec

from a2a_tape.capture.notes import note_event
from a2a_tape.capture.upstream_call import StallWatch
from a2a_tape.fold.runs import SERVED_NOTE, Run, selector, task_runs
from a2a_tape.inspection.run_contract import Contract, ContractBuilder
from a2a_tape.inspection.verify_rules import Divergence, Rules, changes, compare
from a2a_tape.recorder import client as a2a
from a2a_tape.recorder.upstream import Unreachable, Upstream
from a2a_tape.store import Exchange, Item, RecordingStore, StoredEvent
from a2a_tape.store.decode import TextChunk
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.events import SETTLED_STATES
from a2a_tape.store.methods import CARD_BINDINGS, METHODS, STREAMING_OPERATIONS
from a2a_tape.store.observers import new_observer
from a2a_tape.store.redact import Redactor
from a2a_tape.verify.grpc_call import GrpcCaller, metadata_of
from a2a_tape.verify.requests import method_of, names_task, replayed, rewrite, sent_headers
from a2a_tape.wire import grpc as grpc_wire
from a2a_tape.wire.bindings import client_of, recorded_call
from a2a_tape.wire.http_client import LazyTlsTransport

Verdict = Literal["match", "diverged", "flaky", "skipped"]

VerifyBinding = Literal["auto", "jsonrpc", "http+json", "grpc"]
"""What ``--binding`` asks for: ``auto`` sends each request in the binding it was recorded in."""

SPOKEN: Final[tuple[VerifyBinding, ...]] = ("jsonrpc", "http+json", "grpc")
"""The bindings verify sends in (gRPC: :mod:`verify.grpc_call`)."""

RECORDED_IN: Final[dict[str, VerifyBinding]] = {"http+json": "http+json", "grpc": "grpc"}
"""``auto``: a request recorded in one of these is sent in it again; any other over JSON-RPC."""


class AgentUnreachable(A2ATapeError):
    """The live agent cannot be called (down, not an agent, no such binding): exit 2."""


class NotInBinding(AgentUnreachable):
    """The agent's interface in the binding asked for speaks another A2A version than the recording."""


@dataclass
class VerifyOptions:
    url: str
    binding: VerifyBinding = "auto"  # auto: the binding each request was recorded in
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


# -- one live run -------------------------------------------------------------------------------


class Live(msgspec.Struct):
    """One live run of a recorded run: its selector in the log it went to, its contract (built
    as its events were recorded: :class:`inspection.run_contract.ContractBuilder`), its exchanges."""

    selector: str
    contract: Contract
    exchanges: list[Exchange]
    events: int  # the agent's events it holds


class _Call:
    """The sink of one call of a live run: each batch, once in the log, goes to the run's
    contract; what the call itself said (its last state, an error last) decides when its stream
    may close (as :class:`capture.upstream_call.Collect` decides it for a call)."""

    peek = True  # plain text chunks go to the builder as they were peeked (no second decode)

    def __init__(self, builder: ContractBuilder) -> None:
        self.builder = builder
        self.states_before = builder.states_seen
        self.events_before = len(builder.events)

    def take(self, stored: Sequence[StoredEvent], items: Sequence[Item | TextChunk]) -> None:
        self.builder.take(stored, items)

    @property
    def state(self) -> str | None:
        """The task's last state as this call's items said it (None: they said none)."""
        return self.builder.state if self.builder.states_seen > self.states_before else None

    def settled(self) -> bool:
        return self.state in SETTLED_STATES

    def early_close(self) -> str | None:
        errored = len(self.builder.events) > self.events_before and self.builder.last_error
        if self.settled() or errored:
            return None
        return f"stream closed while the task was {self.state or 'unknown'}"


class LiveRun:
    """One live run of a recorded run: its requests sent again, in order, recorded, its contract
    built as they are (``rec``: the recorded run's contract, for the ids it names;
    ``number``: the live run's number among its task's runs in ``log``)."""

    def __init__(
        self,
        log: RecordingStore,
        recorded: Run,
        rec: Contract,
        number: int,
        http: httpx.AsyncClient,
        card: a2a.AgentCard,
        opts: VerifyOptions,
    ) -> None:
        self.log, self.recorded, self.opts = log, recorded, opts
        self.selector = selector(recorded.task_id, number)
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
        self.exchange_ids: list[int] = []
        self.up.ended = self.exchange_ids.append
        self.grpc: GrpcCaller | None = None  # the gRPC channel, once a request goes over gRPC
        self.builder = ContractBuilder(recorded.task_id)
        # recorded id -> live id (a context of the recording is a new one until the agent names its own)
        self.ids: dict[str, str] = {}
        ctx = rec.context_id
        if ctx:
            self.ids[ctx] = a2a.new_id()
        self.recorded_task = rec.task_id
        self.recorded_context = ctx
        self.context_learnt = False

    async def run(self) -> Live:
        try:
            for k, ex in enumerate(replayed(self.recorded)):
                op = METHODS[method_of(recorded_call(ex).body)][0]
                if self.builder.state in SETTLED_STATES and op == "resubscribe":
                    continue  # the recording needed a recovery here; the live run does not
                await self.send(ex, first=k == 0)
        finally:
            if self.grpc is not None:
                await self.grpc.aclose()
        return self.result()

    async def send(self, ex: Exchange, *, first: bool) -> None:
        call = recorded_call(ex)
        body, message_id = rewrite(call.body, self.ids)
        method = method_of(body)
        op, dialect = METHODS[method]
        if op not in ("send", "stream"):
            body = names_task(body, self.ids.get(self.recorded_task, self.recorded_task))
        choice = self.opts.binding
        if choice == "auto":
            choice = RECORDED_IN.get(call.binding, "jsonrpc")
        headers = sent_headers(ex.request_headers, self.up.redactor, self.opts.headers)
        if choice == "grpc":
            await self.send_grpc(method, dialect, body, headers, first=first)
        else:
            await self.send_http(choice, (op, method, dialect, body, message_id), headers, first=first)
        self.learn()

    async def send_http(
        self,
        choice: a2a.BindingChoice,
        request: tuple[str, str, str, bytes, str | None],
        headers: list[tuple[str, str]],
        *,
        first: bool,
    ) -> None:
        """One request over JSON-RPC or HTTP+JSON (the recorded-upstream client's call);
        ``request``: its operation, method, dialect, body and message id."""
        op, method, dialect, body, message_id = request
        try:
            ep = self.up.endpoint(dialect, choice)
        except a2a.NotAnAgent as exc:
            raise AgentUnreachable(str(exc)) from None
        if ep.dialect != dialect:
            raise NotInBinding(
                f"task {self.recorded.task_id} was recorded in A2A {dialect}: {choice} at {ep.url} speaks {ep.dialect}"
            )
        req = a2a.Request(op, method, ep.dialect, body, "", message_id)
        self.up.headers = headers
        sink = _Call(self.builder)
        streaming = req.op in STREAMING_OPERATIONS
        watch = (
            StallWatch(self.opts.stall_timeout, settled=sink.settled, grace=self.up.close_grace) if streaming else None
        )
        timeouts = self.up.timeouts(stream_first_byte=self.opts.stall_timeout) if streaming else None
        ended = await self.up.exchange(req, ep.url, sink, timeouts=timeouts, watch=watch, binding=client_of(ep.binding))
        if first and ended.fault is not None and ended.items == 0 and isinstance(ended.fault, httpx.TransportError):
            raise AgentUnreachable(ended.error or f"cannot reach {self.opts.url}")

    async def send_grpc(
        self, method: str, dialect: str | None, body: bytes, headers: list[tuple[str, str]], *, first: bool
    ) -> None:
        """One request over gRPC (:mod:`verify.grpc_call`), at the card's gRPC interface."""
        grpc_method = grpc_wire.by_name(method)
        if dialect != "1.0" or grpc_method is None:
            raise NotInBinding(
                f"task {self.recorded.task_id} was recorded in A2A {dialect}: gRPC is a binding of A2A 1.0"
            )
        if self.grpc is None:
            target = grpc_target(self.up.card)
            if target is None:
                raise AgentUnreachable("its card offers no gRPC interface of A2A 1.0")
            try:
                self.grpc = GrpcCaller(
                    self.log, target, self.observer, self.recorded.task_id, on_end=self.exchange_ids.append
                )
            except grpc_wire.GrpcUnavailable as exc:
                raise NotInBinding(str(exc)) from None
        params = msgspec.json.encode(msgspec.json.decode(body).get("params") or {})
        opts = self.opts
        ended = await self.grpc.call(
            grpc_method,
            params,
            metadata_of(headers),
            _Call(self.builder),
            call_timeout=opts.call_timeout,
            stall_timeout=opts.stall_timeout,
            grace=self.up.close_grace,
        )
        if first and ended.unreachable:
            raise AgentUnreachable(f"nothing answers gRPC at {self.grpc.target}: {ended.error or 'UNAVAILABLE'}")

    def learn(self) -> None:
        """The live task and context ids, from the first events that name them."""
        named, ctx = self.builder.named, self.builder.context_id
        if self.recorded_task not in self.ids and named:
            self.ids[self.recorded_task] = named
        if self.recorded_context and ctx and not self.context_learnt:
            self.ids[self.recorded_context] = ctx
            self.context_learnt = True

    def result(self) -> Live:
        """The live run: its contract from what its sink took (nothing read back from the log),
        its exchanges (their final rows: a few, by id)."""
        exchanges = [ex for i in self.exchange_ids if (ex := self.log.get_exchange(i)) is not None]
        contract = self.builder.contract(self.selector, exchanges)
        return Live(self.selector, contract, exchanges, len(self.builder.events))


# -- a task, and many -----------------------------------------------------------------------------


def judge(recorded: Run, rec: Contract, lives: Sequence[Contract], rules: Rules) -> TaskVerdict:
    """The verdict of one task from its recorded run's contract and its live runs' (the
    recording's doctor findings in ``rec`` when a live run has some: the rule looks for live
    ones the recording has not)."""
    found = [compare(rec, c, rules) for c in lives]
    among = next((d for c in lives[1:] if (d := compare(lives[0], c, rules))), [])
    live = [c.run for c in lives]
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


def update(log: RecordingStore, recorded: Contract, lives: Sequence[Live], verdict: TaskVerdict) -> Update:
    """``--update``: after a match, the first live run becomes the run ``serve`` replays (and the
    one the next verify compares with): a local note of action :data:`fold.runs.SERVED_NOTE` on
    its last exchange, so it is that run's own. Never after a divergence or a flaky verdict."""
    if verdict.verdict != "match":
        return Update(verdict.recorded, None, why=NOT_UPDATED.get(verdict.verdict, verdict.verdict))
    live = lives[0]
    last = max((ex.id for ex in live.exchanges if ex.id is not None), default=None)
    if last is None:
        return Update(verdict.recorded, None, why="no exchange of the live run was recorded")
    detail = f"replaces {verdict.recorded}"
    log.append(note_event(Redactor(), SERVED_NOTE, detail, task_id=verdict.task_id, exchange_id=last))
    return Update(verdict.recorded, live.selector, changes(recorded, live.contract))


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
    known: Mapping[str, int] | None = None,
) -> list[TaskVerdict]:
    """Each recorded run sent again ``opts.runs`` times to the agent at ``opts.url``, its live
    runs recorded into ``log`` and judged; ``adopt`` (``--update``, ``log`` holding the
    recordings): a task that matched is served from its first live run from then on (:func:`update`).
    ``known``: how many runs each task has in ``log`` already, when the caller has read them
    (else they are read here), so that each live run is named ``TASK@N`` without reading it back."""
    out: list[TaskVerdict] = []
    runs_of = _RunCount(log, known)
    async with httpx.AsyncClient(transport=transport or LazyTlsTransport(), follow_redirects=False) as http:
        card = await load_card(opts.url, http, log, opts.call_timeout)
        bindings: list[VerifyBinding | None] = [None]
        if opts.across:
            offered = card_bindings(card)
            bindings = [b for b in SPOKEN if b in offered]
            if not bindings:
                raise AgentUnreachable(f"its card offers no binding verify speaks ({', '.join(offered) or 'none'})")
        total, done = len(recorded) * opts.runs * len(bindings), 0
        for run in recorded:
            recorded_run = ContractBuilder(run.task_id)  # once per task, whatever the live runs
            recorded_run.take_events(run.events)
            rec = recorded_run.contract(run.selector, run.exchanges, doctor=False)
            for binding in bindings:
                each = opts if binding is None else dataclasses.replace(opts, binding=binding)
                lives: list[Live] = []
                try:
                    for _ in range(opts.runs):
                        sending = LiveRun(log, run, rec, runs_of.next(run.task_id), http, card, each)
                        try:
                            lives.append(await sending.run())
                        finally:
                            runs_of.ran(run.task_id, sending.builder.events)
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
                if any(live.contract.doctor for live in lives) and not rec.doctor:
                    rec = recorded_run.contract(run.selector, run.exchanges, doctor=True)
                verdict = judge(run, rec, [live.contract for live in lives], opts.rules)
                verdict.binding = binding
                if adopt:
                    verdict.update = update(log, rec, lives, verdict)
                out.append(verdict)
    return out


class _RunCount:
    """The runs each task has in the log a verify writes to, as its live runs add theirs: a live
    run is its task's next run once it holds an event (:mod:`fold.runs`: a new observer's first
    event starts a run), so its number is known before it is sent, never read back."""

    def __init__(self, log: RecordingStore, known: Mapping[str, int] | None) -> None:
        self.log = log
        self.counts: dict[str, int] = dict(known or {})

    def next(self, task_id: str) -> int:
        if task_id not in self.counts:
            self.counts[task_id] = len(task_runs(self.log, task_id))
        return self.counts[task_id] + 1

    def ran(self, task_id: str, events: Sequence[StoredEvent]) -> None:
        if events:
            self.counts[task_id] = self.next(task_id)


def grpc_target(card: a2a.AgentCard | None) -> str | None:
    """The ``HOST:PORT`` of the card's gRPC interface of A2A 1.0 (its first), if it has one."""
    for itf in a2a.interfaces(card) if card is not None else ():
        version = (itf.protocolVersion or "1.0").strip()
        if (itf.protocolBinding or itf.transport or "").upper() == "GRPC" and version.startswith("1") and itf.url:
            url = itf.url.split("://", 1)[1] if "://" in itf.url else itf.url
            return url.rstrip("/")
    return None


def card_bindings(card: a2a.AgentCard) -> list[str]:
    """The bindings the card offers, in its order (jsonrpc, http+json, grpc)."""
    out: list[str] = []
    for itf in a2a.interfaces(card):
        binding = CARD_BINDINGS.get((itf.protocolBinding or itf.transport or "JSONRPC").upper())
        if binding is not None and binding not in out:
            out.append(binding)
    return out
