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
``a2a-tape show`` tells the story afterwards. Steps 1-3 and the stall check are
:func:`recorder.settle.settle`, shared with the startup recovery; what is done on a stall is here.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Literal

import anyio
import httpx

from a2a_tape.replay.http import BodyTooLarge, LazyTlsTransport, read_body
from a2a_tape.store import INTERRUPTED_STATES, TERMINAL_STATES, ErrorItem, Item, NewEvent, StoredEvent, Undecodable
from a2a_tape.store.decode import TextChunk
from a2a_tape.store.events import is_interrupted
from a2a_tape.store.sse import DEFAULT_MAX_LINE, SseLineTooLong

from .client import (
    AgentCard,
    Dialect,
    NotAnAgent,
    ProtocolChoice,
    Request,
    card_url,
    choose_endpoint,
    dialect_headers,
    explain_not_json,
    join_path,
    media_type,
    parse_card,
    send_request,
    task_request,
)
from .sending import (
    DecodingError,
    Outcome,
    Timeouts,
    body_chunks,
    describe,
    is_redirect,
    redirect_message,
    send,
    store_fault,
)
from .session import Session
from .settle import Backoff, settle

SETTLED = TERMINAL_STATES | INTERRUPTED_STATES
MAX_BODY = 1024 * 1024
FIRST_BATCH = 8  # what we keep of a non-A2A body (an HTML page, an error text)
BATCH = 2048  # a fast stream's events per commit: fewer, bigger commits cost less per event
BATCH_WAIT = 0.02  # seconds an event read may wait for its batch to fill before it is committed
READ_AHEAD = 16384  # events read and not yet in the log at most: the reader waits (a commit waits for the lock)


@dataclass
class RecordOptions:
    url: str
    text: str
    protocol: ProtocolChoice = "auto"
    stream: bool = True
    context_id: str | None = None
    message_id: str | None = None
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
    close_grace: float = 5.0  # how long a settled stream may stay open before we close it
    max_resubscribes: int = 5


@dataclass
class CallResult:
    outcome: Outcome
    errors: list[ErrorItem] = field(default_factory=list)
    keepalives: int = 0


@dataclass
class RecordResult:
    task_id: str | None
    context_id: str | None
    state: str
    final_answer: str | None
    events: int
    recovered: list[str]
    stalled: bool = False
    error: str | None = None

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
        self._settled_at: float | None = None
        self._last_streaming = False
        # the values of the secret headers the user gave (an API key) never come back in a text
        session.secrets = [v for k, v in opts.headers if session.redactor.is_secret_header(k)]

    # -- the tree ----------------------------------------------------------------------------

    async def run(self) -> RecordResult:
        self.card = await self.fetch_card()
        self.dialect, self.endpoint = choose_endpoint(self.card, join_path(self.base_url, "/"), self.opts.protocol)
        streaming = self.opts.stream and self.card.streaming
        if self.opts.stream and not self.card.streaming:
            self.session.note(
                "no streaming", "the agent card does not offer streaming: sending message/send and polling"
            )
        req = send_request(
            self.dialect,
            self.opts.text,
            stream=streaming,
            message_id=self.opts.message_id,
            context_id=self.opts.context_id,
        )
        res = await self.call(req, first=True)
        await self.follow(res)
        return self.result()

    async def follow(self, res: CallResult) -> None:
        """After the send: settle the task by the tree (:func:`recorder.settle.settle`)."""
        s = self.session
        if res.errors:
            e = res.errors[-1]
            self.error = f"agent error {e.code}: {e.message}"
            s.note("agent error", self.error)
            s.fail_locally(self.error)
            return
        if res.outcome == "stalled":
            await self.on_stall()
            return
        state = s.state
        if state in SETTLED:
            return
        if s.fold.reply is not None and state == "unknown":
            s.fold.state = "completed"  # a lone Message answered the request: no task to follow
            return
        if s.task_id is None:
            self.error = "the stream ended before the agent named a task: nothing to recover"
            s.note("gave up", self.error)
            return
        # the stream ended (or the reply came back) while the task is still active
        if res.outcome != "ok" or self._last_streaming:
            self.recovered.append(res.outcome)
            s.note(f"stream {res.outcome}", f"the response ended ({res.outcome}) while the task was {state}")
        done = await settle(
            _Follow(self),
            streaming=self.card.streaming and self.opts.stream,
            stall_timeout=self.opts.stall_timeout,
            backoff=Backoff(self.opts.poll_initial, self.opts.poll_max),
            max_resubscribes=self.opts.max_resubscribes,
        )
        if done.how == "lost":
            s.note("gave up", done.why)
            self.error = done.why
            s.fail_locally(f"recorder lost the task ({done.why})")
        elif done.how == "stalled":
            await self.on_stall()

    async def on_stall(self) -> None:
        """Cancel the stalled task; with ``on_stall="resend"``, then send the message once more in
        a new task of the same context and follow that one instead."""
        s = self.session
        self.stalled = True
        self.recovered.append("stalled")
        s.note("stalled", f"no progress for {self.opts.stall_timeout:g} s while the task was {s.state}")
        if s.task_id is None:
            self.error = "stalled before the agent named a task"
            s.note("gave up", self.error)
            return
        canceled = await self.call(task_request("cancel", self.dialect, s.task_id))
        if canceled.errors or s.state not in TERMINAL_STATES:
            why = _why(canceled) if canceled.errors else f"state is still {s.state}"
            s.note("cancel failed", why)
            s.fail_locally(f"stalled for {self.opts.stall_timeout:g} s; cancel failed ({why})")
        else:
            s.note("canceled", f"CancelTask -> {s.state}")
        if self.opts.on_stall == "resend" and not self._resent:
            self._resent = True
            ctx = s.context_id
            s.note("resend", f"sending the message again in a new task, contextId {ctx}")
            s.reset_for_new_task()
            self.stalled = False
            req = send_request(
                self.dialect, self.opts.text, stream=self.opts.stream and self.card.streaming, context_id=ctx
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

    # -- HTTP --------------------------------------------------------------------------------

    def timeouts(self, *, streaming: bool = False) -> Timeouts:
        """Connect, first-byte and read timeouts of every call of this run."""
        o = self.opts
        first = o.first_byte_timeout if o.first_byte_timeout is not None else min(o.call_timeout, o.stall_timeout)
        return Timeouts(
            connect=o.connect_timeout,
            first_byte=first,
            read=None if streaming else o.call_timeout,
            write=o.call_timeout,
        )

    def headers(self, dialect: str | None = None) -> list[tuple[str, str]]:
        hs = list(self.opts.headers)
        if dialect == "1.0":
            hs += list(dialect_headers("1.0").items())
        return hs

    async def fetch_card(self) -> AgentCard:
        s = self.session
        url = card_url(self.base_url)
        ex = s.begin(
            url=url, rpc_method="agent-card", dialect=None, streaming=False, headers=self.headers(), http_method="GET"
        )
        try:
            resp = await send(self.http, self.http.build_request("GET", url, headers=self.headers()), self.timeouts())
            try:
                content = await read_body(resp, "the agent card")
            finally:
                await resp.aclose()
        except (httpx.HTTPError, BodyTooLarge) as exc:
            msg = describe(exc, url, s.capture(ex))
            s.finish(ex, "timeout" if isinstance(exc, httpx.TimeoutException) else "error", error=msg)
            raise NotAnAgent(msg) from None
        s.response(ex, resp.status_code, resp.headers.get("content-type"), resp.headers.multi_items())
        body = content[:MAX_BODY]
        if is_redirect(resp):
            msg = redirect_message(resp, f"the agent card URL {url}", self.session.redactor)
            s.finish(ex, "error", error=msg)
            raise NotAnAgent(s.capture(ex).text(msg))
        if resp.status_code == 404:
            msg = f"no agent card at {url} (HTTP 404): is this an A2A agent?"
            s.finish(ex, "error", error=msg, response_body=body)
            raise NotAnAgent(msg)
        if resp.status_code >= 400 or "json" not in media_type(resp):
            msg = explain_not_json(resp, url)
            s.finish(ex, "error", error=msg, response_body=body)
            raise NotAnAgent(msg)
        try:
            card = parse_card(content, url)
        except NotAnAgent as exc:
            s.finish(ex, "error", error=str(exc), response_body=body)
            raise
        s.finish(ex, "ok", response_body=body)
        return card

    async def call(self, req: Request, *, first: bool = False) -> CallResult:
        """Post one JSON-RPC request, record everything that comes back, return how it ended.

        ``first``: the send itself; a transport error or a non-A2A answer then means the URL
        is not a working agent (exit 2). Later calls report failures to the tree instead.
        """
        s = self.session
        self._last_streaming = req.streaming
        headers = self.headers(req.dialect)
        headers.append(("Content-Type", "application/json"))
        if req.streaming:
            headers.append(("Accept", "text/event-stream"))
        ex = s.begin(
            url=self.endpoint,
            rpc_method=req.method,
            dialect=req.dialect,
            streaming=req.streaming,
            headers=headers,
            body=req.body,
            message_id=req.message_id,
        )
        # a stream is read without a read timeout: the stall watchdog decides
        timeouts = self.timeouts(streaming=req.streaming)
        received = 0
        try:
            request = self.http.build_request("POST", self.endpoint, content=req.body, headers=headers)
            async with contextlib.aclosing(_Closing(await send(self.http, request, timeouts))) as held:
                resp = held.resp
                s.response(ex, resp.status_code, resp.headers.get("content-type"), resp.headers.multi_items())
                ct = media_type(resp)
                if is_redirect(resp):
                    msg = redirect_message(resp, f"{req.method} at {self.endpoint}", s.redactor)
                    s.finish(ex, "error", error=msg)
                    if first:
                        raise NotAnAgent(s.capture(ex).text(msg))
                    return CallResult("error")
                if (
                    resp.status_code >= 400
                    and ct != "application/json"
                    or ct not in ("text/event-stream", "application/json")
                ):
                    body = await _read_capped(resp)
                    msg = explain_not_json(resp, f"{req.method} at {self.endpoint}")
                    s.finish(ex, "error", error=msg, response_body=body)
                    if first:
                        raise NotAnAgent(msg)
                    return CallResult("error")
                if ct == "application/json":
                    body = await read_body(resp, f"the answer to {req.method}")
                    pairs = s.record_items(ex, [(body, None)])
                    received = len(pairs)
                    item = pairs[0][1]
                    if item.kind in ("undecodable", "other") or (resp.status_code >= 400 and item.kind != "error"):
                        answer = item.body
                        why = answer.reason[:60] if isinstance(answer, Undecodable) else f"HTTP {resp.status_code}"
                        msg = f"{req.method} at {self.endpoint} returned a body that is not an A2A answer ({why})"
                        s.finish(ex, "error", error=msg)
                        if first:
                            raise NotAnAgent(msg)
                        return CallResult("error")
                    errors = [i.body for _, i in pairs if isinstance(i.body, ErrorItem)]
                    s.finish(ex, "error" if errors else "ok")
                    return CallResult("ok", errors)
                return await self._consume(req, ex, resp)
        except SseLineTooLong as exc:
            msg = f"{req.method} at {self.endpoint}: {exc} (raise it with --max-line-bytes)"
            s.finish(ex, "error", error=msg)
            raise NotAnAgent(s.capture(ex).text(msg)) from None
        except BodyTooLarge as exc:
            msg = describe(exc, self.endpoint, s.capture(ex))
            s.finish(ex, "error", error=msg)
            raise NotAnAgent(msg) from None
        except DecodingError as exc:
            msg = f"{req.method} at {self.endpoint}: the body does not decode ({exc})"
            s.finish(ex, "error", error=msg)
            raise NotAnAgent(s.capture(ex).text(msg)) from None
        except httpx.HTTPError as exc:
            msg = describe(exc, self.endpoint, s.capture(ex))
            if first and received == 0 and not s.store.read_exchange(ex):
                s.finish(ex, "error", error=msg)
                raise NotAnAgent(msg) from None
            outcome: Outcome = "timeout" if isinstance(exc, httpx.TimeoutException) else "dropped"
            s.finish(ex, outcome, error=msg)
            return CallResult(outcome)

    async def _consume(self, req: Request, ex: int, resp: httpx.Response) -> CallResult:
        s = self.session
        cap = s.capture(ex)
        cap.max_line = self.opts.max_line
        result = CallResult("ok")
        stopped: list[str] = []
        self._settled_at = None

        async def watchdog(scope: anyio.CancelScope) -> None:
            while True:
                now = time.monotonic()
                if s.state in SETTLED:
                    if self._settled_at is None:
                        self._settled_at = now
                    left = self._settled_at + self.opts.close_grace - now
                    if left <= 0:
                        stopped.append("settled")
                        scope.cancel()
                        return
                else:
                    left = s.last_progress + self.opts.stall_timeout - now
                    if left <= 0:
                        stopped.append("stalled")
                        scope.cancel()
                        return
                await anyio.sleep(min(left, 0.5) if s.state in SETTLED else left)

        # Group commit, write-ahead: the reader parses chunks as they arrive and queues them; the
        # committer appends everything queued in one transaction (on a worker thread at durability
        # full, so reading goes on during the fsync), and only then folds, renders and decides. The
        # first batch is committed at once (the first event waits for one small commit); later
        # ones when BATCH events are queued or BATCH_WAIT after the oldest arrived, whichever
        # comes first (a slow stream's event is shown at most BATCH_WAIT later than it could be).
        failure: list[Exception] = []
        pending: list[tuple[bytes, str | None]] = []
        arrived: list[float] = []
        reading = [True]
        wake = [anyio.Event()]
        room = [anyio.Event()]  # set when the committer takes what is pending: the reader may go on
        asleep = [False]  # the committer waits on wake[0]: the reader sets it only then
        want = [1]  # ... and once this many events are pending
        committed = anyio.Event()
        # an fsync per commit (durability full) costs milliseconds: keep it off the event loop;
        # a WAL commit without fsync costs less than the thread hop, so it runs inline
        threaded = getattr(s.store, "durability", "full") == "full"

        first_batch = [True]

        def take() -> tuple[list[NewEvent], list[Item | TextChunk]]:
            # the first batch is kept small: the first event reaches the screen after one small
            # commit, not after a burst the agent wrote in one go
            n = min(len(pending), FIRST_BATCH) if first_batch[0] else len(pending)
            first_batch[0] = False
            raw, times = pending[:n], arrived[:n]
            del pending[:n]
            del arrived[:n]
            room[0].set()
            return s.prepare(ex, raw, times)

        def applied(stored: list[StoredEvent], items: list[Item | TextChunk]) -> None:
            result.errors += s.apply(stored, items)

        async def committer(scope: anyio.CancelScope) -> None:
            try:
                while True:
                    if not pending:
                        if not reading[0]:
                            return
                        want[0] = 1
                        asleep[0] = True
                        await wake[0].wait()
                        wake[0] = anyio.Event()
                        continue
                    if reading[0] and not first_batch[0] and len(pending) < BATCH:
                        # a fast stream: let the batch fill (BATCH events, or BATCH_WAIT after its
                        # oldest event arrived); nothing is shown or decided before its commit
                        left = arrived[0] + BATCH_WAIT - time.monotonic()
                        if left > 0:
                            want[0] = BATCH
                            asleep[0] = True
                            with anyio.move_on_after(left):
                                await wake[0].wait()
                            asleep[0] = False
                            wake[0] = anyio.Event()
                            continue
                    with anyio.CancelScope(shield=True):  # a batch taken is a batch written
                        new, items = take()
                        if threaded:
                            stored = await anyio.to_thread.run_sync(s.commit, ex, new)
                        else:
                            stored = s.commit(ex, new)
                        applied(stored, items)
            except Exception as exc:  # noqa: BLE001 - a store failure stops the stream, reported below
                failure.append(exc)
                scope.cancel()
            finally:
                committed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watchdog, tg.cancel_scope)
            tg.start_soon(committer, tg.cancel_scope)
            try:
                feed = cap.feeder()
                monotonic = time.monotonic
                arrival = arrived.append
                # no content coding (the usual stream): the raw chunks, without decoder layers
                async for chunk in body_chunks(resp):
                    before = len(pending)
                    keepalives = feed(chunk, pending)
                    if keepalives:
                        result.keepalives += keepalives
                    added = len(pending) - before
                    if added == 1:
                        arrival(monotonic())
                    elif added:
                        arrived += [monotonic()] * added
                    else:
                        continue
                    if asleep[0] and len(pending) >= want[0]:
                        asleep[0] = False
                        wake[0].set()
                    if len(pending) >= READ_AHEAD:  # the log is far behind (another writer holds it)
                        room[0] = anyio.Event()
                        await room[0].wait()
                for it in cap.close():  # a last item cut by the close is kept (marked incomplete)
                    if not it.comment:
                        pending.append((it.data, it.event))
                        arrived.append(time.monotonic())
            except (httpx.HTTPError, SseLineTooLong, DecodingError) as exc:
                failure.append(exc)  # raised below, outside the task group (no exception group)
            finally:
                reading[0] = False
                wake[0].set()
            await committed.wait()
            tg.cancel_scope.cancel()
        if pending and not (failure and store_fault(failure[0])):  # the watchdog cancelled: it still goes to the log
            new, items = take()
            applied(s.commit(ex, new), items)
        if failure:
            raise failure[0]
        if stopped and stopped[0] == "stalled":
            s.finish(ex, "stalled", error=f"no progress for {self.opts.stall_timeout:g} s")
            result.outcome = "stalled"
        elif stopped:
            s.finish(ex, "ok", error="the agent kept the stream open after the task settled: closed by a2a-tape")
        elif s.state in SETTLED or result.errors or (s.state == "unknown" and s.fold.reply is not None):
            s.finish(ex, "ok")
        else:
            s.finish(ex, "closed", error=f"stream closed while the task was {s.state}")
            result.outcome = "closed"
        return result


class _Closing:
    """A streamed response closed by ``contextlib.aclosing``."""

    def __init__(self, resp: httpx.Response) -> None:
        self.resp = resp

    async def aclose(self) -> None:
        await self.resp.aclose()


class _Follow:
    """The recorder as a :class:`recorder.settle.Follower`: its calls are recorded exchanges,
    its decisions local notes, and ``recovered`` lists them in order."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.s = rec.session

    def settled(self) -> bool:
        return self.s.state in SETTLED

    def progress_at(self) -> float:
        return self.s.last_progress

    async def get_task(self) -> str | None:
        s, rec = self.s, self.rec
        assert s.task_id is not None
        got = await rec.call(task_request("get", rec.dialect, s.task_id))
        if got.errors or got.outcome not in ("ok", "closed"):
            return f"GetTask failed: {_why(got)}"
        if s.state in SETTLED:
            s.note("got final state", f"GetTask says {s.state}")
        return None

    async def resubscribe(self) -> str | None:
        s, rec = self.s, self.rec
        assert s.task_id is not None
        rec.recovered.append("resubscribed")
        res = await rec.call(task_request("resubscribe", rec.dialect, s.task_id))
        if res.errors:
            e = res.errors[-1]
            return f"{e.code}: {e.message}"
        if res.outcome != "stalled" and s.state not in SETTLED:  # a stall is settle()'s to see
            rec.recovered.append(res.outcome)
            s.note(f"stream {res.outcome}", f"the response ended ({res.outcome}) while the task was {s.state}")
        return None

    async def note(self, action: str, detail: str) -> None:
        if action == "polling":
            self.rec.recovered.append("polled")
        self.s.note(action, detail)


def _why(res: CallResult) -> str:
    if res.errors:
        e = res.errors[-1]
        return f"error {e.code}: {e.message}"
    return res.outcome


async def _read_capped(resp: httpx.Response) -> bytes:
    buf = bytearray()
    async for chunk in resp.aiter_bytes():
        buf += chunk
        if len(buf) >= MAX_BODY:
            break
    return bytes(buf[:MAX_BODY])


async def record(
    session: Session, opts: RecordOptions, *, transport: httpx.AsyncBaseTransport | None = None
) -> RecordResult:
    """Run one recorded session against ``opts.url``. Raises :class:`NotAnAgent` for exit-2 cases."""
    async with httpx.AsyncClient(transport=transport or LazyTlsTransport(), follow_redirects=False) as http:
        return await Recorder(http, session, opts).run()
