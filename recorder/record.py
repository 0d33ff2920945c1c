"""The client-side recovery tree of docs/design.md section 5, driving one recorded session.

Send the message (streaming when asked and the card allows it). When the stream ends while
the task is still SUBMITTED/WORKING, or drops, or times out:

1. get the task once; a terminal or interrupted task is recorded and we stop;
2. the card says ``capabilities.streaming``: resubscribe; its first event is a Task snapshot
   and the fold applies it as one (replace, never append);
3. otherwise poll GetTask with exponential backoff and jitter;
4. no progress for ``stall_timeout`` seconds while SUBMITTED/WORKING (keep-alive comments are
   not progress): cancel the task, or resend in a new task with the same contextId.

Every decision is appended as an ``origin="local"`` event before it is acted on, so
``a2a-tape show`` tells the story afterwards.

With ``push_socket`` (``record --push-receiver HOST:PORT``) the send registers a webhook: a2a-tape's
push receiver (:mod:`recorder.proxy.push_receiver`) on that socket, with a token of its own. Each
POST the agent makes to it is a push row of the task (joining this run), forwarded to
``push_webhook`` when given, else answered by the receiver. Once the task has ended, record waits
up to ``push_wait`` seconds for the push of its terminal state, and notes it when none came. Steps 1-3 and the stall check are
:func:`recorder.settle.settle`, shared with the startup recovery; what is done on a stall is here.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio
import httpx

from a2a_tape.capture.exchange import Outcome
from a2a_tape.capture.upstream_call import CLOSE_GRACE, Batching, Collect, StallWatch
from a2a_tape.recorder.client import (
    AgentCard,
    BindingChoice,
    Dialect,
    NotAnAgent,
    ProtocolChoice,
    Request,
    choose_interface,
    interfaces,
    join_path,
    send_request,
    task_request,
)
from a2a_tape.recorder.session import Session
from a2a_tape.recorder.settle import Backoff, settle
from a2a_tape.recorder.upstream import Unreachable, Upstream
from a2a_tape.store import SETTLED_STATES, TERMINAL_STATES, ErrorItem, Item, StoredEvent
from a2a_tape.store.decode import TextChunk
from a2a_tape.store.events import is_interrupted
from a2a_tape.store.methods import BINDING_NAMES, CARD_BINDINGS
from a2a_tape.store.redact import safe_text
from a2a_tape.wire.bindings import client_of
from a2a_tape.wire.codings import DecodingError
from a2a_tape.wire.http_client import MAX_BODY, BodyTooLarge, LazyTlsTransport
from a2a_tape.wire.sse_reader import DEFAULT_MAX_LINE, SseLineTooLong

BATCHING = Batching(
    first=8,  # the first event reaches the screen after one small commit, not after a burst
    size=2048,  # a fast stream's events per commit: fewer, bigger commits cost less per event
    wait=0.02,  # seconds an event read may wait for its batch to fill before it is committed
    ahead=16384,  # events read and not yet in the log at most: the reader waits (a commit waits for the lock)
)


@dataclass
class RecordOptions:
    url: str
    text: str
    protocol: ProtocolChoice = "auto"
    binding: BindingChoice = "auto"  # auto: the card's first interface a2a-tape speaks
    stream: bool = True
    context_id: str | None = None
    message_id: str | None = None
    task_id: str | None = None  # the task the message continues (record --continue; recorder.turns)
    reference_task_ids: tuple[str, ...] = ()  # the finished task a new one follows from (--continue)
    parts: list[dict[str, Any]] = field(default_factory=list)  # after the text: --file, --data (v1.0 shape)
    headers: list[tuple[str, str]] = field(default_factory=list)
    stall_timeout: float = 120.0
    on_stall: Literal["cancel", "resend"] = "cancel"
    max_line: int = DEFAULT_MAX_LINE
    connect_timeout: float = 10.0
    call_timeout: float = 30.0  # a unary call (card, GetTask, CancelTask): head and every read
    first_byte_timeout: float | None = None  # the response head of any call (None: the smaller of
    # call_timeout and stall_timeout: an agent that accepts and stays silent is stalled by then)
    poll_initial: float = 0.2
    poll_max: float = 5.0
    close_grace: float = CLOSE_GRACE  # how long a settled stream may stay open before we close it
    max_resubscribes: int = 5
    get_task: bool = True  # ask the agent for the task once after a stream ends (its own GetTask answer)
    say: Callable[[str], None] | None = None  # one line for the user (stderr): which interface auto took
    push_socket: socket.socket | None = None  # the push receiver's listener (None: no webhook registered)
    push_webhook: str | None = None  # where each push goes on to (None: the receiver answers it)
    push_wait: float = 10.0  # seconds to wait, once the task ended, for the push of its end
    on_exchange_end: Callable[[int], None] | None = None  # each exchange id once its row is final (--otlp-endpoint)


@dataclass
class CallResult:
    outcome: Outcome
    errors: list[ErrorItem] = field(default_factory=list)


@dataclass
class RecordResult:
    task_id: str | None
    context_id: str | None
    state: str
    # not in the repr: asyncio's runner builds the repr of its finished main task (with this result)
    # when it puts back the Ctrl-C handler at the end of the run (signal.signal's return value), and
    # the answer of a long stream is long (11.6 M instructions for one of 20,000 chunks)
    final_answer: str | None = field(repr=False)
    events: int
    recovered: list[str]
    stalled: bool = False
    error: str | None = None
    pushes: int | None = None  # the task's pushes the receiver took (``--push-receiver``; None: no receiver)

    @property
    def exit_code(self) -> int:
        if self.stalled:
            return 1
        return 0 if self.state == "completed" or is_interrupted(self.state) else 1


class Recorder:
    """One ``a2a-tape record`` run: the card, the send, and the recovery tree."""

    def __init__(self, http: httpx.AsyncClient, session: Session, opts: RecordOptions) -> None:
        self.http = http
        self.session = session
        self.opts = opts
        self.base_url = opts.url if "?" in opts.url else opts.url.rstrip("/")
        self.card = AgentCard()
        self.dialect: Dialect = "0.3"
        self.endpoint = join_path(self.base_url, "/")
        self.recovered: list[str] = []
        self.stalled = False
        self.error: str | None = None
        self._resent = False
        self._last_streaming = False
        self.webhook: dict[str, str] | None = None  # the push config the send registers (record --push-receiver)
        # the values of the secret headers the user gave (an API key) never come back in a text
        session.secrets = [v for k, v in opts.headers if session.redactor.is_secret_header(k)]
        self.up = up = Upstream(
            session.store,
            self.base_url,
            http,
            role="client",
            redactor=session.redactor,
            headers=opts.headers,
            secrets=session.secrets,
            ctx=session,
            max_line=opts.max_line,
        )
        up.ended = opts.on_exchange_end
        up.connect_timeout, up.call_timeout = opts.connect_timeout, opts.call_timeout
        # an agent that accepts and stays silent is stalled by then
        first = opts.first_byte_timeout
        up.first_byte = first if first is not None else min(opts.call_timeout, opts.stall_timeout)

    # -- the tree ----------------------------------------------------------------------------

    async def run(self) -> RecordResult:
        self.card = await self.fetch_card()
        self.choose_interface()
        streaming = self.opts.stream and self.card.streaming
        if self.opts.stream and not self.card.streaming:
            await self.session.note(
                "no streaming", "the agent card does not offer streaming: sending message/send and polling"
            )
        req = send_request(
            self.dialect,
            self.opts.text,
            stream=streaming,
            message_id=self.opts.message_id,
            context_id=self.opts.context_id,
            task_id=self.opts.task_id,
            parts=self.opts.parts,
            reference_task_ids=self.opts.reference_task_ids,
            webhook=self.webhook,
        )
        res = await self.call(req, first=True)
        await self.follow(res)
        if self.opts.get_task:
            await self.ask_task_once()
        return self.result()

    def choose_interface(self) -> None:
        """The binding, version and URL to call (:func:`recorder.client.choose_interface`); what
        ``--binding auto`` took is said, as the card's interfaces decided it."""
        o = self.opts
        ep = choose_interface(self.card, join_path(self.base_url, "/"), o.protocol, o.binding)
        self.dialect, self.endpoint = ep.dialect, ep.url
        self.up.binding = client_of(ep.binding)
        listed = {CARD_BINDINGS.get((i.protocolBinding or i.transport or "").upper()) for i in interfaces(self.card)}
        if o.say is None or (ep.listed and (o.binding != "auto" or listed <= {ep.binding})):
            return  # named and listed, or the card's only binding: nothing to say
        where = safe_text(ep.url, self.session.redactor, self.session.secrets)
        if not ep.listed:
            why = f"the card lists no {BINDING_NAMES[ep.binding]} {ep.dialect} interface: tried at its URL"
        else:
            why = "the card's first interface a2a-tape speaks; --binding to choose"
        o.say(f"a2a-tape: {BINDING_NAMES[ep.binding]} {ep.dialect} at {where} ({why})")

    async def ask_task_once(self) -> None:
        """After a stream that ended with its task settled: GetTask once, recorded, so the
        recording holds the agent's own answer to it (a replay serves GetTask as this agent
        answers it: agents keep a task's history differently). A decision of ours, noted first; its
        answer is kept, not folded: what the run shows is what the stream said."""
        s = self.session
        if s.task_id is None or not self._last_streaming or self.stalled or self.error or s.state not in SETTLED_STATES:
            return
        await s.note("GetTask", "asking the agent for the task once, so the recording holds its own GetTask answer")
        ended = await self.up.exchange(task_request("get", self.dialect, s.task_id), self.endpoint, _Kept(s))
        if ended.outcome != "ok":
            await s.note("GetTask failed", ended.error or ended.outcome)

    async def follow(self, res: CallResult) -> None:
        """After the send: settle the task by the tree (:func:`recorder.settle.settle`)."""
        s = self.session
        if res.errors:
            e = res.errors[-1]
            self.error = f"agent error {e.code}: {e.message}"
            await s.note("agent error", self.error)
            await s.fail_locally(self.error)
            return
        if res.outcome == "stalled":
            await self.on_stall()
            return
        state = s.state
        if state in SETTLED_STATES:
            return
        if s.fold.reply is not None and state == "unknown":
            s.fold.state = "completed"  # a lone Message answered the request: no task to follow
            return
        if s.task_id is None:
            self.error = "the stream ended before the agent named a task: nothing to recover"
            await s.note("gave up", self.error)
            return
        # the stream ended (or the reply came back) while the task is still active
        if res.outcome != "ok" or self._last_streaming:
            self.recovered.append(res.outcome)
            await s.note(f"stream {res.outcome}", f"the response ended ({res.outcome}) while the task was {state}")
        done = await settle(
            _Follow(self),
            streaming=self.card.streaming and self.opts.stream,
            stall_timeout=self.opts.stall_timeout,
            backoff=Backoff(self.opts.poll_initial, self.opts.poll_max),
            max_resubscribes=self.opts.max_resubscribes,
        )
        if done.how == "lost":
            await s.note("gave up", done.why)
            self.error = done.why
            await s.fail_locally(f"recorder lost the task ({done.why})")
        elif done.how == "stalled":
            await self.on_stall()

    async def on_stall(self) -> None:
        """Cancel the stalled task; with ``on_stall="resend"``, then send the message once more in
        a new task of the same context and follow that one instead."""
        s = self.session
        self.stalled = True
        self.recovered.append("stalled")
        await s.note("stalled", f"no progress for {self.opts.stall_timeout:g} s while the task was {s.state}")
        if s.task_id is None:
            self.error = "stalled before the agent named a task"
            await s.note("gave up", self.error)
            return
        canceled = await self.call(task_request("cancel", self.dialect, s.task_id))
        if canceled.errors or s.state not in TERMINAL_STATES:
            why = _why(canceled) if canceled.errors else f"state is still {s.state}"
            await s.note("cancel failed", why)
            await s.fail_locally(f"stalled for {self.opts.stall_timeout:g} s; cancel failed ({why})")
        else:
            await s.note("canceled", f"CancelTask -> {s.state}")
        if self.opts.on_stall == "resend" and not self._resent:
            self._resent = True
            ctx = s.context_id
            await s.note("resend", f"sending the message again in a new task, contextId {ctx}")
            s.reset_for_new_task()
            self.stalled = False
            req = send_request(
                self.dialect,
                self.opts.text,
                stream=self.opts.stream and self.card.streaming,
                context_id=ctx,
                parts=self.opts.parts,
                reference_task_ids=self.opts.reference_task_ids,
                webhook=self.webhook,
            )
            await self.follow(await self.call(req, first=True))
            return
        self.error = f"stalled: no progress for {self.opts.stall_timeout:g} s"

    def result(self) -> RecordResult:
        s = self.session
        return RecordResult(
            task_id=s.task_id,
            context_id=s.context_id,
            state=s.state,
            final_answer=s.fold.final_answer,
            events=s.events,
            recovered=self.recovered,
            stalled=self.stalled,
            error=self.error,
        )

    # -- calls -------------------------------------------------------------------------------

    def watch(self) -> StallWatch:
        """No progress for ``stall_timeout`` while the task is active (keep-alives are not
        progress): stalled; open ``close_grace`` after it settled: closed by us."""
        s, o = self.session, self.opts
        return StallWatch(
            o.stall_timeout, lambda: s.last_progress, settled=lambda: s.state in SETTLED_STATES, grace=o.close_grace
        )

    async def fetch_card(self) -> AgentCard:
        try:
            return await self.up.load_card(recorded=True)
        except Unreachable as exc:
            raise NotAnAgent(str(exc)) from None

    async def call(self, req: Request, *, first: bool = False) -> CallResult:
        """Post one JSON-RPC request, record everything that comes back, return how it ended.

        ``first``: the send itself; a transport error or a non-A2A answer then means the URL
        is not a working agent (exit 2). Later calls report failures to the tree instead.
        """
        self._last_streaming = req.streaming
        sink = _Fold(self.session)
        up = self.up
        # a stream is read without a read timeout: the stall watch decides
        timeouts = up.timeouts(stream_first_byte=up.first_byte) if req.streaming else None
        ended = await up.exchange(req, self.endpoint, sink, timeouts=timeouts, watch=self.watch(), batching=BATCHING)
        fault = ended.fault
        if isinstance(fault, SseLineTooLong):
            raise NotAnAgent(f"{ended.error} (raise it with --max-line-bytes)")
        if isinstance(fault, (BodyTooLarge, DecodingError)):
            raise NotAnAgent(ended.error or "")
        if fault is not None:  # the connection: no agent there (the send), else the tree recovers
            if first and ended.items == 0:
                raise NotAnAgent(ended.error or "")
            return CallResult(ended.outcome)
        if ended.outcome == "error" and not ended.errors and not sink.errors:  # a redirect, no A2A answer
            if first:
                raise NotAnAgent(ended.error or "")
            return CallResult("error")
        if ended.stopped == "stalled":
            return CallResult("stalled", sink.errors)
        return CallResult("closed" if ended.outcome == "closed" else "ok", sink.errors)


class _Fold:
    """The session as the sink of one call: its items folded (and shown) once in the log, the
    errors among them kept for the tree."""

    peek = True  # plain text chunks are folded as they are (the bulk of a stream)

    def __init__(self, session: Session) -> None:
        self.session = session
        self.errors: list[ErrorItem] = []

    def take(self, stored: Sequence[StoredEvent], items: Sequence[Item | TextChunk]) -> None:
        self.errors += self.session.apply(stored, items)

    def early_close(self) -> str | None:
        s = self.session
        if s.state in SETTLED_STATES or self.errors or (s.state == "unknown" and s.fold.reply is not None):
            return None
        return f"stream closed while the task was {s.state}"


class _Kept(Collect):
    """The sink of the GetTask asked once after the stream: its answer is kept, not folded (what
    the run shows is what the stream said), and counted among the run's events (Session.kept)."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session

    def take(self, stored: Sequence[StoredEvent], items: Sequence[Item | TextChunk]) -> None:
        super().take(stored, items)
        self.session.kept(stored)


class _Follow:
    """The recorder as a :class:`recorder.settle.Follower`: its calls are recorded exchanges,
    its decisions local notes, and ``recovered`` lists them in order."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.s = rec.session

    def settled(self) -> bool:
        return self.s.state in SETTLED_STATES

    def progress_at(self) -> float:
        return self.s.last_progress

    async def get_task(self) -> str | None:
        s, rec = self.s, self.rec
        assert s.task_id is not None
        got = await rec.call(task_request("get", rec.dialect, s.task_id))
        if got.errors or got.outcome not in ("ok", "closed"):
            return f"GetTask failed: {_why(got)}"
        if s.state in SETTLED_STATES:
            await s.note("got final state", f"GetTask says {s.state}")
        return None

    async def resubscribe(self) -> str | None:
        s, rec = self.s, self.rec
        assert s.task_id is not None
        rec.recovered.append("resubscribed")
        res = await rec.call(task_request("resubscribe", rec.dialect, s.task_id))
        if res.errors:
            e = res.errors[-1]
            return f"{e.code}: {e.message}"
        if res.outcome != "stalled" and s.state not in SETTLED_STATES:  # a stall is settle()'s to see
            rec.recovered.append(res.outcome)
            await s.note(f"stream {res.outcome}", f"the response ended ({res.outcome}) while the task was {s.state}")
        return None

    async def note(self, action: str, detail: str) -> None:
        if action == "polling":
            self.rec.recovered.append("polled")
        await self.s.note(action, detail)


def _why(res: CallResult) -> str:
    if res.errors:
        e = res.errors[-1]
        return f"error {e.code}: {e.message}"
    return res.outcome


async def record(
    session: Session, opts: RecordOptions, *, transport: httpx.AsyncBaseTransport | None = None
) -> RecordResult:
    """Run one recorded session against ``opts.url``. Raises :class:`NotAnAgent` for exit-2 cases."""
    async with httpx.AsyncClient(transport=transport or LazyTlsTransport(), follow_redirects=False) as http:
        recorder = Recorder(http, session, opts)
        if opts.push_socket is None:
            return await recorder.run()
        async with _receiving(session, opts) as pushes:
            recorder.webhook = pushes.webhook
            result = await recorder.run()
            await pushes.wait_end(session, result, opts.push_wait)
            # the run's events: the session's (a push-wait note included) and the notes the
            # receiver wrote for the task's pushes (before the send's answer named it, some)
            mine = sum(1 for ev in pushes.stored if ev.task_id is not None and ev.task_id == result.task_id)
            taken = pushes.taken.get(result.task_id, 0) if result.task_id else 0
            return replace(result, events=session.events + mine, pushes=taken)


class _Pushes:
    """record's push receiver as it runs: the webhook its send registers, the end states pushed."""

    def __init__(self, webhook: dict[str, str]) -> None:
        self.webhook = webhook
        self.ended: dict[str, anyio.Event] = {}
        self.stored: list[StoredEvent] = []  # the events the receiver wrote with the pushes
        self.taken: dict[str, int] = {}  # pushes taken, by the task they name

    def _event(self, task_id: str) -> anyio.Event:
        return self.ended.setdefault(task_id, anyio.Event())

    def pushed(self, task_id: str | None, state: str | None) -> None:
        if task_id:
            self.taken[task_id] = self.taken.get(task_id, 0) + 1
        if task_id and state in TERMINAL_STATES:
            self._event(task_id).set()

    async def wait_end(self, session: Session, result: RecordResult, wait: float) -> None:
        """Up to ``wait`` seconds for the push of the task's terminal state (the agent may push
        after its stream ended); noted on the task when none came."""
        if result.task_id is None or result.state not in TERMINAL_STATES:
            return
        event = self._event(result.task_id)
        with anyio.move_on_after(wait):
            await event.wait()
        if not event.is_set():
            await session.note("push-wait", f"no push of the task's end ({result.state}) came within {wait:g} s")


@contextlib.asynccontextmanager
async def _receiving(session: Session, opts: RecordOptions) -> AsyncIterator[_Pushes]:
    """The push receiver on ``opts.push_socket`` while inside: a hook for this send (to
    ``opts.push_webhook``, or answered here) with a token of its own (memory only)."""
    from a2a_tape.recorder.listen import url_of
    from a2a_tape.recorder.proxy.push_configs import PUSH_PATH
    from a2a_tape.recorder.proxy.push_receiver import PushReceiver, Verdict, listening, receiver_app
    from a2a_tape.wire.loopback import LOOPBACK_ONLY

    assert opts.push_socket is not None
    receiver = PushReceiver(session.store, session.redactor, MAX_BODY)
    token = secrets.token_urlsafe(24)
    hook = receiver.hooks.add(opts.push_webhook or "", token)
    pushes = _Pushes({"url": url_of(opts.push_socket) + PUSH_PATH + hook.id, "token": token})

    def on_push(verdict: Verdict, stored: list[StoredEvent]) -> None:
        pushes.stored += stored
        pushes.pushed(verdict.task_id, verdict.state)

    receiver.on_push = on_push
    async with receiver.running(), listening(receiver_app(receiver, LOOPBACK_ONLY), opts.push_socket):
        yield pushes
