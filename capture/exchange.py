"""The capture core: one recorded exchange, written once for every path that writes the log.

Every recording path goes through it: ``record``, startup recovery, ``recover``, ``probe`` and
serve's recording modes (each call a :class:`capture.upstream_call.UpstreamCall`), the proxy
(:mod:`recorder.proxy.tee`) and ``RecordingTransport``. The pipeline (docs/design.md section 11)::

    begin -> response head -> body bytes -> SSE items (exact bytes) -> redaction -> batched append -> outcome
    request()   head()          feed()/close()                       events()/answer()   commit_writes() end()

The writes of the steps are here too, and they are the one sequence every driver writes its row
through (docs/design.md section 11): :meth:`Capture.begin_writes` (or :meth:`Capture.claim_writes`,
the begin and an idempotency key's claim together; :meth:`Capture.whole_writes`, a row begun
and ended at once), :meth:`Capture.commit_writes`, :meth:`Capture.note_writes`, :meth:`Capture.end_writes`.
Each is one transaction, yielded (:data:`store.writer.Writes`), so the same steps run in a plain
call (:func:`store.writer.run_writes`) or from an event loop
(:meth:`store.writer.GroupCommitWriter.run`). The drivers: the recorded-upstream client (``record``,
recovery, ``probe``, serve's recording modes, ``verify``: :mod:`capture.upstream_call`),
``RecordingTransport``, both proxies and the push receiver, ``RecordingInterceptor`` (the gRPC ones
through :mod:`capture.grpc_calls`). Only this module and the store call the log's
``begin_exchange``/``update_exchange`` (tests/packaging/test_one_rule.py).

:class:`Capture` holds one exchange and does no I/O: the caller moves the bytes (httpx, a
wrapped transport's stream, a test) and runs the writes it hands back. What it promises,
whoever calls it:

- the request row is redacted: headers, URL (a userinfo password, secret-named query
  parameters), configured JSON paths in the request body (:class:`store.redact.Redactor`);
  the secrets found in the URL are remembered (:attr:`Capture.secrets`) and scrubbed from every
  error text of the exchange;
- the response head is redacted the same way;
- SSE per the HTML standard (:class:`wire.sse_reader.SseParser`): a BOM does not lose the first item,
  CR/LF/CRLF, multi-line data, ``id``/``retry``/comments kept on the items, an item cut by the
  close kept and marked incomplete (the exchange then ends ``incomplete``, never ``ok``); each
  item's ``raw`` is the exact stream bytes, so a relay passes on what the agent sent;
- every payload stored (SSE items and JSON answers) goes through :meth:`Redactor.payload`
  (configured JSON paths; byte level or a marker for a payload that is not JSON); a payload
  changed that way gets a local note (:attr:`Capture.notes`);
- task ids are learnt from the items (an item without one belongs to the task already known,
  or to its exchange);
- the outcome is one word of :data:`Outcome`, the closed vocabulary of docs/tape-format.md;
- an answer a replay marked as its own (:data:`store.observers.REPLAY_MARKER`) stamps the row's
  source ``replay`` (:meth:`Capture.answered_by`): a replay recorded back is a run of its own
  kind, on every path.

The core needs nothing above the store and the wire (no httpx, no event loop). The HTTP side (timeouts on connect, first byte and reads; redirects; readable transport errors) is
:mod:`wire.http_client`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, get_args, overload

import msgspec

from a2a_tape.capture.hooks import A2ARequest, HookError, RecordHooks
from a2a_tape.capture.notes import note_event, push_event
from a2a_tape.store.decode import TextChunk, decode_item, peek_text_chunk
from a2a_tape.store.events import Item, Undecodable
from a2a_tape.store.headers import media_type_of
from a2a_tape.store.observers import REPLAY_MARKER, REPLAYED_SOURCES, Observer, stamp
from a2a_tape.store.records import Exchange, NewEvent, StoredEvent
from a2a_tape.store.redact import Redactor, credential_parts
from a2a_tape.store.writer import Appends
from a2a_tape.wire.sse_reader import DEFAULT_MAX_LINE, SseItem, SseParser

if TYPE_CHECKING:
    from a2a_tape.store.interface import RecordingStore
    from a2a_tape.store.writer import Writes

Outcome = Literal[
    "ok",  # answered whole: the JSON answer, or a stream that ended with the task settled
    "closed",  # the agent closed the stream while the task was still active
    "incomplete",  # cut short: an SSE item without its blank line, the client stopped reading, shutdown
    "dropped",  # the connection broke mid-response (or a probe dropped it on purpose)
    "timeout",  # no connection, no response head or no bytes within the timeout given
    "stalled",  # the stream stayed open without progress past the stall timeout
    "error",  # an error answer, a body that is not A2A, an unreachable agent, a redirect, a store fault
    "refused",  # the proxy refused the request (an idempotency key reused for another request)
    "replayed",  # answered from the log (a duplicate request)
    "interrupted",  # the run was stopped (Ctrl-C) while the exchange was open
]
OUTCOMES: frozenset[str] = frozenset(get_args(Outcome))

Headers = Mapping[str, str] | Sequence[tuple[str, str]]
RawItem = tuple[bytes, "str | None"]
Note = tuple[str, str]
"""A note of a request: ``(action, detail)`` (:meth:`Capture.begin_writes`)."""
T = TypeVar("T")
ECHOED = "the agent's answer held a credential the request carried: redacted"
CUT = "the last SSE item had no blank line before the close (kept, marked incomplete)"


class TaskContext(Protocol):
    """What the items of an exchange are filed under: a session's task, or the exchange's own."""

    task_id: str | None
    context_id: str | None


def _no_chunk(payload: bytes) -> None:
    return None


@overload
def plan_events(
    ctx: TaskContext,
    raw: Sequence[RawItem],
    exchange_id: int | None,
    redactor: Redactor,
    *,
    start: float,
    arrived: Sequence[float] | None = None,
    peek: Literal[False],
    notes: list[str] | None = None,
    secrets: Sequence[str] = (),
) -> tuple[list[NewEvent], list[Item]]: ...


@overload
def plan_events(
    ctx: TaskContext,
    raw: Sequence[RawItem],
    exchange_id: int | None,
    redactor: Redactor,
    *,
    start: float,
    arrived: Sequence[float] | None = None,
    peek: bool = True,
    notes: list[str] | None = None,
    secrets: Sequence[str] = (),
) -> tuple[list[NewEvent], list[Item | TextChunk]]: ...


def plan_events(
    ctx: TaskContext,
    raw: Sequence[RawItem],
    exchange_id: int | None,
    redactor: Redactor,
    *,
    start: float,
    arrived: Sequence[float] | None = None,
    peek: bool = True,
    notes: list[str] | None = None,
    secrets: Sequence[str] = (),
) -> tuple[list[NewEvent], list[Item]] | tuple[list[NewEvent], list[Item | TextChunk]]:
    """The append plan of ``(payload, sse event)`` items: each payload redacted, decoded (task id,
    arrival time), as :class:`store.NewEvent` rows; nothing written, nothing shown yet.

    ``start``: the monotonic clock at the exchange's start; ``arrived``: when each item came off
    the socket (default: now). ``peek``: a plain text chunk (the bulk of a stream) is read with
    the narrow decoder (:func:`store.decode.peek_text_chunk`) and returned as it is. ``ctx``
    learns the task and context ids of the first item that names them. ``notes`` receives a line
    for each payload that is not JSON and had to be redacted at byte level or replaced whole, and
    for each that echoed one of ``secrets`` (values the exchange sent as credentials: replaced).
    """
    wall0 = time.time() - (time.monotonic() - start)  # the wall clock at the exchange's start
    now = time.monotonic()
    redact = redactor.payload  # the same bytes, at once, when nothing in a payload is to be redacted
    items: list[Item | TextChunk] = []
    new: list[NewEvent] = []
    decode = decode_item
    narrow = peek_text_chunk if peek else _no_chunk
    for k, (payload, sse_event) in enumerate(raw):
        payload, note = redact(payload)
        if note is not None and notes is not None:
            notes.append(note)
        if secrets:
            payload, echoed = redactor.scrub(payload, secrets)
            if echoed and notes is not None:
                notes.append(ECHOED)
        item: Item | TextChunk
        chunk = narrow(payload)
        if chunk is None:
            decoded = decode(payload)
            item, tid, ctx_id = decoded, decoded.task_id or None, decoded.context_id
        else:
            item, tid, ctx_id = chunk, chunk.taskId or None, chunk.contextId
        if tid is None:
            tid = ctx.task_id  # an error, a message or an undecodable line inside the task's stream
        else:
            if ctx.task_id is None:
                ctx.task_id = tid
            if ctx_id and ctx.context_id is None:
                ctx.context_id = ctx_id
        mono = (arrived[k] if arrived is not None else now) - start
        items.append(item)
        # positional (payload, task_id, exchange_id, seq, sse_event, received_at, mono): per event
        new.append(NewEvent(payload, tid, exchange_id, None, sse_event, wall0 + mono, mono))
    return new, items


class Capture:
    """One exchange on its way to the log (see the module docstring for the pipeline).

    ``task_id``/``context_id``: what the exchange is about, when known before it starts (a
    GetTask, a resubscribe); learnt from the items otherwise. ``secrets``: values the caller
    knows must never appear in a stored or printed text (a header value the user gave).
    ``filed_under``: the task every row and event of the exchange is filed under, whatever id the
    agent gives it (the payloads keep the agent's own): a verify run of a recorded task.
    """

    __slots__ = (
        "redactor",
        "max_line",
        "task_id",
        "context_id",
        "secrets",
        "notes",
        "exchange_id",
        "start",
        "sse",
        "cut",
        "parser",
        "filed_under",
        "ended",
        "hooks",
        "asked",
        "hook_error",
        "withheld",
        "run_source",
        "_head",
    )

    def __init__(
        self,
        redactor: Redactor,
        *,
        max_line: int = DEFAULT_MAX_LINE,
        task_id: str | None = None,
        context_id: str | None = None,
        secrets: Sequence[str] = (),
        filed_under: str | None = None,
        hooks: RecordHooks | None = None,
    ) -> None:
        self.redactor = redactor
        self.max_line = max_line
        self.task_id = task_id
        self.context_id = context_id
        self.secrets: list[str] = credential_parts(s for s in secrets if s)
        self.notes: list[str] = []  # redaction notes, for the caller to append as local notes
        self.exchange_id: int | None = None  # set by the caller once the row is begun
        self.start = time.monotonic()
        self.sse = False
        self.cut = False  # the close cut an SSE item
        self.parser: SseParser | None = None
        self.filed_under = filed_under  # every row and event of the exchange filed under this task (verify)
        self.ended = False  # the row's end is written
        self.hooks = hooks  # a user's before-record hooks (capture/hooks.py): run before the redaction
        self.asked: A2ARequest | None = None  # the request as recorded, for the answer hook
        self.hook_error: HookError | None = None  # the answer hook raised: nothing recorded from there on
        self.withheld = False  # the answer hook left a whole answer out: nothing of it is kept
        self.run_source: str | None = None  # the source the row was begun with (None: no observer, it joins a run)
        self._head: dict[str, object] = {}

    # -- begin -------------------------------------------------------------------------------

    def request(
        self,
        *,
        url: str,
        rpc_method: str | None,
        dialect: str | None,
        streaming: bool,
        headers: Headers,
        body: bytes = b"",
        http_method: str = "POST",
        message_id: str | None = None,
        role: str = "client",
        idempotency_key: str | None = None,
        binding: str | None = None,
    ) -> Exchange:
        """The exchange row to begin, redacted (URL, headers, JSON paths of the body). ``binding``:
        how the request goes (:data:`store.methods.BINDINGS`); None with a version means JSON-RPC.
        With :attr:`hooks`, ``before_record_request`` sees it first (redaction then runs on what it
        returns); it raises :class:`capture.hooks.NotRecorded` when the hook dropped the request,
        :class:`capture.hooks.HookError` when the hook raised."""
        if self.hooks is not None:
            items = headers.items() if isinstance(headers, Mapping) else headers
            asked = A2ARequest(rpc_method, url, http_method, tuple((str(k), str(v)) for k, v in items), body)
            asked = self.hooks.on_request(asked, self.redactor)
            self.asked = asked
            url, http_method, headers, body = asked.url, asked.http_method, asked.headers, asked.body
        url, found = self.redactor.url_secrets(url)
        # a token in the URL or a credential header must not come back in an error text or an answer
        self.secrets += [s for s in found + self.redactor.secret_values(headers) if s not in self.secrets]
        self.start = time.monotonic()
        body, note = self.redactor.request_payload(body, _header(headers, "content-encoding"))
        if note is not None:
            self.notes.append(note)
        return Exchange(
            started_at=time.time(),
            url=url,
            http_method=http_method,
            rpc_method=rpc_method,
            dialect=dialect,
            streaming=streaming,
            request_headers=self.redactor.headers_dict(headers),
            request_body=self._payload(body, paths=False),
            task_id=self.task_id,
            context_id=self.context_id,
            message_id=message_id,
            idempotency_key=idempotency_key,
            role=role,
            binding=binding,
        )

    # -- the response head -------------------------------------------------------------------

    def head(self, status: int, content_type: str | None, headers: Headers) -> dict[str, object]:
        """The response line's fields for the exchange row (redacted headers). An SSE content
        type sets :attr:`sse`. Kept until :meth:`pending_head` hands them to a write."""
        self.sse = media_type_of(content_type) == "text/event-stream"
        self._head = {
            "status": status,
            "content_type": content_type,
            "response_headers": self.redactor.headers_dict(headers),
        }
        self.answered_by(headers)
        return dict(self._head)

    def answered_by(self, headers: Headers) -> None:
        """Who answered, from the answer's headers (a gRPC call's initial metadata): an answer
        marked as a replay's (:data:`store.observers.REPLAY_MARKER`, which ``serve`` sends) makes
        the row's source ``replay``, written with the head (before the row's first event, so the
        run it begins is a replay's from its first event on). Only a row begun with one of
        :data:`store.observers.REPLAYED_SOURCES` changes: the label, nothing else. :meth:`head`
        calls it; a path that does not (the proxy's relay, gRPC) calls it with the answer's head."""
        if self._replayed(headers):
            self.run_source = self._head["source"] = "replay"

    def _replayed(self, headers: Headers) -> bool:
        return self.run_source in REPLAYED_SOURCES and _header(headers, REPLAY_MARKER) is not None

    def pending_head(self) -> dict[str, object]:
        """The head fields not written yet (written with the first events: one transaction)."""
        head, self._head = self._head, {}
        return head

    # -- body bytes -> SSE items -------------------------------------------------------------

    def feed(self, chunk: bytes) -> list[SseItem]:
        """The SSE items a (decoded) chunk completes, exact bytes. Raises
        :class:`wire.sse_reader.SseLineTooLong` past ``max_line``."""
        if self.parser is None:
            self.parser = SseParser(self.max_line)
        return self.parser.feed(chunk)

    def feeder(self) -> Callable[[bytes, list[RawItem]], int]:
        """:meth:`feed` for a reader's hot loop: the parser's own ``feed_into``
        (:meth:`wire.sse_reader.SseParser.feed_into`: each completed event appended to the list as
        ``(data, event)``, the number of comments returned), no call of ours per chunk."""
        if self.parser is None:
            self.parser = SseParser(self.max_line)
        return self.parser.feed_into

    def close(self) -> list[SseItem]:
        """The end of the body: the last items, a cut one marked ``incomplete`` (never dropped)."""
        if self.parser is None:
            return []
        items = self.parser.close()
        if items and items[-1].incomplete:
            self.cut = True
        return items

    # -- items -> redacted rows --------------------------------------------------------------

    @overload
    def events(
        self,
        items: Sequence[SseItem] | Sequence[RawItem],
        arrived: Sequence[float] | None = None,
        *,
        peek: Literal[False] = False,
        ctx: TaskContext | None = None,
    ) -> tuple[list[NewEvent], list[Item]]: ...

    @overload
    def events(
        self,
        items: Sequence[SseItem] | Sequence[RawItem],
        arrived: Sequence[float] | None = None,
        *,
        peek: bool,
        ctx: TaskContext | None = None,
    ) -> tuple[list[NewEvent], list[Item | TextChunk]]: ...

    def events(
        self,
        items: Sequence[SseItem] | Sequence[RawItem],
        arrived: Sequence[float] | None = None,
        *,
        peek: bool = False,
        ctx: TaskContext | None = None,
    ) -> tuple[list[NewEvent], list[Item]] | tuple[list[NewEvent], list[Item | TextChunk]]:
        """The rows of these items (comments skipped), redacted, with their decoded items. The
        task ids learnt are the exchange's, or ``ctx``'s (a session that spans several exchanges)."""
        raw: list[RawItem] = []
        for it in items:
            if isinstance(it, SseItem):
                if not it.comment:
                    raw.append((it.data, it.event))
            else:
                raw.append(it)
        if self.hooks is not None and self.hooks.answer is not None:
            raw, arrived = self._answers_hooked(raw, arrived)
        return plan_events(
            ctx or self,
            raw,
            self.exchange_id,
            self.redactor,
            start=self.start,
            arrived=arrived,
            peek=peek,
            notes=self.notes,
            secrets=self.secrets,
        )

    def _answers_hooked(
        self, raw: list[RawItem], arrived: Sequence[float] | None
    ) -> tuple[list[RawItem], Sequence[float] | None]:
        """The items ``before_record_answer`` keeps (as it returned them), with their arrival
        times. After the hook raised once, none: :attr:`hook_error` says why."""
        assert self.hooks is not None
        if self.hook_error is not None:
            return [], None
        asked = self.asked or A2ARequest(None, "", "POST", (), b"")
        kept, out, error = self.hooks.on_answers(raw, asked)
        if error is not None:
            self.hook_error = HookError(self.text(str(error)))
            self.hook_error.__cause__ = error.__cause__
        return out, [arrived[k] for k in kept] if arrived is not None else None

    def answer(self, body: bytes, ctx: TaskContext | None = None) -> tuple[NewEvent | None, Item]:
        """A JSON answer (not a stream): its row when it is an A2A item (None when the body is
        not: keep it as the exchange's ``response_body``; or when ``before_record_answer`` left it
        out: :attr:`withheld`, and :meth:`response_body` keeps nothing), and the decoded item."""
        new, items = self.events([(body, None)], ctx=ctx)
        if not items:  # the answer hook left it out, or raised (hook_error)
            self.withheld = True
            return None, decode_item(body)
        item = items[0]
        assert isinstance(item, Item)
        if isinstance(item.body, Undecodable):
            return None, item
        return new[0], item

    def response_body(self, body: bytes, limit: int = 1 << 20) -> bytes:
        """A body kept on the exchange row (a card, an error page), capped and redacted; nothing
        when ``before_record_answer`` left the answer out."""
        return b"" if self.withheld else self._payload(body[:limit])

    # -- outcome -----------------------------------------------------------------------------

    def end(self, outcome: Outcome, error: str | None = None, **fields: object) -> dict[str, object]:
        """The exchange row's closing fields: ``ended_at``, ``outcome`` (an ``ok``/``closed``
        stream whose last item was cut becomes ``incomplete``), the error text redacted, any head
        not written yet, the task and context learnt, and ``fields`` (``response_body`` redacted)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"not an outcome: {outcome!r}")
        if self.cut and outcome in ("ok", "closed"):
            outcome = "incomplete"
            error = CUT if error is None else f"{error}; {CUT}"
        out: dict[str, object] = self.pending_head()
        out.update(fields)
        out.update(ended_at=time.time(), outcome=outcome)
        if error is not None:
            out["error"] = self.text(error)
        body = out.get("response_body")
        if isinstance(body, bytes):
            out["response_body"] = self._payload(body)
        if self.task_id is not None:
            out["task_id"] = self.task_id
        if self.context_id is not None:
            out["context_id"] = self.context_id
        return out

    def text(self, value: str) -> str:
        """A text for the log or the screen, with every secret of this exchange replaced."""
        return self.redactor.text(value, self.secrets)

    def _payload(self, body: bytes, paths: bool = True) -> bytes:
        """A body kept on the row: its configured paths and a push config's secrets (``paths``:
        not done yet) and the exchange's credentials redacted."""
        if body and self.secrets:
            body, echoed = self.redactor.scrub(body, self.secrets)
            if echoed:
                self.notes.append(ECHOED)
        if not paths or not body or not self.redactor.redacts(body):
            return body
        out, note = self.redactor.payload(body)
        if note is not None:
            self.notes.append(note)
        return out

    # -- the writes: the one sequence every driver writes its row through -------------------------
    #
    # begin (with a claim, or the request's notes, in the same transaction) -> commit* -> end, and
    # notes of the exchange between; each step one transaction, yielded (a plain call or a
    # GroupCommitWriter runs them). The row is stamped with its observer at its begin, a commit
    # before the begin is refused, its end is written once (a second end writes nothing), and every
    # note is built here, scrubbed with this exchange's secrets (capture.notes).

    def begin_writes(
        self, log: RecordingStore, exchange: Exchange, observer: Observer | None, *, notes: Sequence[Note] = ()
    ) -> Writes[int]:
        """Begin: the exchange row (from :meth:`request`), written before the request goes out, stamped
        with ``observer`` (None: the process's own for the row's role, none for a role that joins the
        task's run: :func:`store.observers.stamp`). ``notes``: ``(action, detail)`` notes of the
        request (a push without its token), in the same transaction."""
        self._begin(exchange, observer)
        if not notes:
            self.exchange_id = yield functools.partial(log.begin_exchange, exchange)
        else:
            write = self._notes_of(log, notes, exchange.started_at)
            self.exchange_id, _ = yield functools.partial(_begin_then, log, exchange, write)
        return self.exchange_id

    def push_writes(
        self, log: RecordingStore, exchange: Exchange, *, state: str | None, notes: Sequence[Note] = ()
    ) -> Writes[tuple[int, list[StoredEvent]]]:
        """Begin a push's row (no observer: a push joins the run that relayed its task) with, in the
        same transaction, the note that places the push in its task's log when it names one
        (:func:`capture.notes.push_event`, carrying the pushed ``state``) and the request's ``notes``:
        the row's id and the notes as stored."""
        self._begin(exchange, None)
        at = exchange.started_at

        def write(exchange_id: int) -> list[StoredEvent]:
            new: list[NewEvent] = []
            if self.task_id is not None:
                new.append(push_event(self, self.task_id, exchange_id, at, state=state, context_id=exchange.context_id))
            new += [self._note(action, detail, exchange_id, received_at=at) for action, detail in notes]
            return log.append_batch(new) if new else []

        ex_id, stored = yield functools.partial(_begin_then, log, exchange, write)
        self.exchange_id = ex_id
        return ex_id, stored

    def claim_writes(
        self, log: RecordingStore, exchange: Exchange, observer: Observer | None, claim: Callable[[int], T]
    ) -> Writes[tuple[int, T]]:
        """Begin and claim (an idempotency key: ``claim(exchange_id)``) in one transaction: one
        commit before the request is forwarded."""
        self._begin(exchange, observer)
        ex_id, claimed = yield functools.partial(_begin_then, log, exchange, claim)
        self.exchange_id = ex_id
        return ex_id, claimed

    def whole_writes(self, log: RecordingStore, exchange: Exchange, observer: Observer | None) -> Writes[int]:
        """A row begun and ended in one write (a card fetched, a request refused): ``exchange`` holds
        its end (``ended_at``, ``outcome``); its error scrubbed. It cannot be ended again."""
        if exchange.ended_at is None or exchange.outcome not in OUTCOMES:
            raise ValueError(f"not a whole exchange: ended_at {exchange.ended_at!r}, outcome {exchange.outcome!r}")
        if exchange.error is not None:
            exchange.error = self.text(exchange.error)
        self._begin(exchange, observer)
        if exchange.response_headers and self._replayed(exchange.response_headers):  # a card a replay served
            exchange.source = self.run_source = "replay"
        self.ended = True
        self.exchange_id = yield functools.partial(log.begin_exchange, exchange)
        return self.exchange_id

    def _begin(self, exchange: Exchange, observer: Observer | None) -> None:
        if self.exchange_id is not None:
            raise RuntimeError(f"exchange {self.exchange_id} is begun already")
        if observer is None:
            stamp(exchange)
        else:
            observer.stamp(exchange)
        self.run_source = exchange.source if exchange.observer is not None else None
        if self.filed_under is not None:
            exchange.task_id = self.filed_under

    def commit_writes(self, log: RecordingStore, new: Sequence[NewEvent]) -> Writes[list[StoredEvent]]:
        """A batch of rows (from :meth:`events`) in one transaction, with the response head when
        it is not written yet (the first batch carries it: one commit, not two)."""
        if self.exchange_id is None:
            raise RuntimeError("events committed before their exchange was begun")
        if self.filed_under is not None:
            new = [_filed(ev, self.filed_under) for ev in new]
        stored: list[StoredEvent]
        if self._head:  # (no dict made per batch once it is written: this runs for every batch of a stream)
            head = self.pending_head()
            stored = yield functools.partial(_head_and_events, log, self.exchange_id, head, new)
        else:
            stored = yield Appends(log, new)
        return stored

    def note_writes(self, log: RecordingStore, action: str, detail: str) -> Writes[StoredEvent]:
        """A decision of ours about this exchange (``action``, why in ``detail``), as a local note of
        its row, the detail scrubbed with the exchange's secrets."""
        stored: StoredEvent = yield functools.partial(log.append, self._note(action, detail))
        return stored

    def end_writes(
        self,
        log: RecordingStore,
        outcome: Outcome,
        error: str | None = None,
        also: Callable[[], object] | None = None,
        /,
        **fields: object,
    ) -> Writes[dict[str, object] | None]:
        """End: the row's closing fields (:meth:`end`; ``also``: more of the caller's in the same
        transaction, a key's fate), then the redaction notes as local notes. The fields written, or
        None when the row was ended already (nothing is written twice)."""
        if self.ended:
            return None
        if self.exchange_id is None:
            raise RuntimeError("an exchange ended before it was begun")
        closing = self.end(outcome, error, **fields)
        if self.filed_under is not None:
            closing["task_id"] = self.filed_under
        if also is None:
            yield functools.partial(log.update_exchange, self.exchange_id, **closing)
        else:
            yield functools.partial(_end_then, log, self.exchange_id, closing, also)
        self.ended = True
        yield from self.notes_writes(log)
        return closing

    def notes_writes(self, log: RecordingStore) -> Writes[None]:
        """Each redaction note not written yet (a payload that was not JSON and had to be redacted),
        as a local note of the exchange."""
        notes, self.notes = self.notes, []
        for note in dict.fromkeys(notes):
            yield functools.partial(log.append, self._note("redacted", note))

    def _note(
        self, action: str, detail: str, exchange_id: int | None = None, received_at: float | None = None
    ) -> NewEvent:
        task = self.filed_under if self.filed_under is not None else self.task_id
        ex_id = self.exchange_id if exchange_id is None else exchange_id
        return note_event(self, action, detail, task_id=task, exchange_id=ex_id, received_at=received_at)

    def _notes_of(self, log: RecordingStore, notes: Sequence[Note], at: float) -> Callable[[int], None]:
        """The request's notes (stamped ``at`` its start), written once its row has an id, inside
        the begin's transaction."""

        def write(exchange_id: int) -> None:
            for action, detail in notes:
                log.append(self._note(action, detail, exchange_id, received_at=at))

        return write


def _filed(ev: NewEvent, task_id: str) -> NewEvent:
    return ev if ev.task_id == task_id else msgspec.structs.replace(ev, task_id=task_id)


def _begin_then(log: RecordingStore, exchange: Exchange, then: Callable[[int], T]) -> tuple[int, T]:
    with log.transaction():
        ex_id = log.begin_exchange(exchange)
        return ex_id, then(ex_id)


def _end_then(log: RecordingStore, exchange_id: int, fields: dict[str, object], then: Callable[[], object]) -> None:
    with log.transaction():
        log.update_exchange(exchange_id, **fields)
        then()


def _header(headers: Headers, name: str) -> str | None:
    """The first value of the header ``name`` (any case), or None."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    return next((v for k, v in items if k.lower() == name), None)


def _head_and_events(
    log: RecordingStore, exchange_id: int, head: dict[str, object], new: Sequence[NewEvent]
) -> list[StoredEvent]:
    with log.transaction():
        log.update_exchange(exchange_id, **head)
        return log.append_batch(new)
