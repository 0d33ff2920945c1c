"""The replay core: one request in, one reply out, shared by the HTTP server and the transport.

:class:`ReplayEngine` answers as the recorded agent would: the agent card, sends and streaming
sends (matched to a recorded episode), GetTask, SubscribeToTask / ``tasks/resubscribe``,
CancelTask and ListTasks, in the dialect of each request. It keeps a *playback* per task it
has served: how many of the episode's items the agent has "produced" so far, so that a stream
dropped by a fault leaves the task going on, and GetTask or a resubscribe gives the rest.

Timing ``instant`` holds the rest of a dropped stream until the client comes back (a
resubscribe streams it; a GetTask finds the task finished); ``real`` or a factor lets it go on
along the recorded gaps. What it answers is a :class:`replay.serve.reply.Reply`; in the recording
modes, a request the recordings do not answer goes upstream through :mod:`replay.serve.forward`.

The recording answers first: the card as the agent served it, and the agent's recorded answer
to an equivalent request (same method, dialect and shape, :mod:`replay.serve.shape`; for GetTask,
CancelTask and ListTasks made when the task stood where it stands here), id spliced. What no
recording answers gets an a2a-sdk 1.3.0 agent's validation (:mod:`replay.serve.list_tasks` for ListTasks).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any
from urllib.parse import parse_qs

import anyio
import msgspec

from a2a_tape.capture.hooks import (
    A2ARequest,
    BeforeRecordAnswer,
    BeforeRecordRequest,
    HookError,
    NotRecorded,
    RecordHooks,
    RequestMatcher,
)
from a2a_tape.fold.views import RecordedTask
from a2a_tape.replay.serve import rpc
from a2a_tape.replay.serve.convert import (
    encode_item,
    encode_snapshot_item,
    encode_task,
    fold_task,
    wire_task,
    with_state,
)
from a2a_tape.replay.serve.faults import FAULT_HEADER, FAULT_QUERY, NO_FAULTS, FaultError, Faults, parse_faults
from a2a_tape.replay.serve.forward import Forwarder, Target
from a2a_tape.replay.serve.library import Episode, Library, Served, TaskEvent, answer_key, message_text
from a2a_tape.replay.serve.list_tasks import (
    Listed,
    ListingError,
    check_history_length,
    list_page,
    timestamp_ns,
    with_history,
)
from a2a_tape.replay.serve.matching import Matcher
from a2a_tape.replay.serve.modes import RecordMode
from a2a_tape.replay.serve.playback import Playback, parse_timing
from a2a_tape.replay.serve.pushes import Pushes, result_body
from a2a_tape.replay.serve.reply import (
    SSE_HEADERS,
    Reply,
    card_reply,
    error_data,
    error_reply,
    json_reply,
    render,
    said,
    saying,
    stop_saying,
)
from a2a_tape.replay.serve.shape import Shape, shape_of
from a2a_tape.replay.serve.validation import send_problem
from a2a_tape.store import TERMINAL_STATES, MessageItem
from a2a_tape.store.a2a_structs import WireTask
from a2a_tape.store.decode import state_in
from a2a_tape.store.json_values import decode_json
from a2a_tape.store.methods import ALL_METHODS, CARD_PATHS, JSONRPC
from a2a_tape.store.observers import REPLAY_MARKER
from a2a_tape.store.redact import Redactor, build_redactor
from a2a_tape.wire import bindings
from a2a_tape.wire.push_configs import config_task, registered
from a2a_tape.wire.sse_frames import comment, frame

_BATCH = 256  # frames joined into one body chunk when nothing waits between them


_PASSIVE = frozenset({"get", "list"})  # operations whose answers do not move a task
_DRIVING = frozenset({"send", "stream", "cancel"})  # what a client does to a task (the rest the agent does)


def _params(wire: bytes) -> Any:
    """A JSON-RPC request's params as JSON values (None when it cannot be read)."""
    try:
        doc = decode_json(wire)
    except (msgspec.DecodeError, RecursionError):
        return None
    return doc.get("params") if isinstance(doc, dict) else None


def _has_answer(ep: Episode) -> bool:
    return bool(ep.served) or bool(ep.exchange.response_body)


def _says_v1(headers: Mapping[str, str]) -> bool:
    """Whether the request names protocol 1.0 (``A2A-Version: 1.0``; no header means 0.3)."""
    for k, v in headers.items():
        if k.lower() == "a2a-version":
            return v.strip().split(".")[0] == "1"
    return False


class ReplayEngine:
    """Recordings answering as an A2A agent. See the module docstring."""

    def __init__(
        self,
        library: Library,
        *,
        timing: str | float = "instant",
        faults: Faults | str | None = None,
        match: str = "method-text",
        record_mode: str = "none",
        upstream: str | None = None,
        redactor: Redactor | None = None,
        push_timing: str = "instant",
        match_on: RequestMatcher | Sequence[RequestMatcher] | None = None,
        before_record_request: BeforeRecordRequest | None = None,
        before_record_answer: BeforeRecordAnswer | None = None,
    ) -> None:
        mode = RecordMode.of(record_mode)
        if mode.needs_upstream and not upstream:
            raise ValueError(f"record mode {mode} needs an upstream agent URL (--upstream)")
        self.library = library
        self.scale = parse_timing(timing)
        self.faults = parse_faults(faults) if isinstance(faults, str) else (faults or NO_FAULTS)
        self.matcher = Matcher(library.episodes, match, match_on)
        # a user's before-record hooks (capture/hooks.py): what the recording modes keep; the
        # request hook also shapes a replayed request before it is matched, as vcrpy does
        self.hooks = RecordHooks.of(before_record_request, before_record_answer)
        self.hook_errors: list[str] = []  # one line per hook that raised (the plugin fails the test with them)
        self.redactor = redactor  # what a hook's error line is scrubbed with (built when first needed)
        self.record_mode = mode
        self.upstream = upstream.rstrip("/") if upstream else None
        self.record_all = mode is RecordMode.all
        # once: a recording that was empty at the start records what does not match (vcrpy's "once")
        self.record_new = mode is RecordMode.new_episodes or (
            mode is RecordMode.once and not library.episodes and bool(upstream)
        )
        self.playbacks: dict[str, Playback] = {}
        self.cancelled: set[str] = set()
        self.polls: dict[str, int] = {}  # task -> where the last recorded GetTask answer served to a poll sits
        self.unmatched: list[str] = []  # one line per request nothing answered (the plugin reports them)
        # what the recording modes store is redacted as every other path does (one Redactor)
        self.forwarder = Forwarder(library, upstream, redactor, self.hooks) if upstream else None
        if self.forwarder is not None:
            self.forwarder.hook_errors = self.hook_errors  # one list: the engine's
        self.grpc_address: str | None = None  # HOST:PORT of serve --grpc-listen: the card names it
        # the recorded pushes, to the webhooks replaying clients register (push_timing: instant, recorded)
        self.pushes = Pushes(library, push_timing)

    # ------------------------------------------------------------------ entry point

    async def handle(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes, base_url: str
    ) -> Reply:
        """Answer one HTTP request in the binding it came in. Never raises: a failure of ours is an
        internal error (-32603) naming it, in that binding's shape. The reply's ``said``: what
        was done with it (:class:`.reply.Said`, the line ``serve`` prints). An answer of the
        replay's own carries the replay marker (:data:`store.observers.REPLAY_MARKER`: a client
        recording it makes a run of source replay), one a recording mode forwards from the agent
        does not."""
        noted, token = saying()
        try:
            reply = await self._handle_call(method, path, query, headers, body, base_url)
        finally:
            stop_saying(token)
        reply.said = noted
        if not reply.forwarded:
            reply.headers = {**reply.headers, REPLAY_MARKER: "1"}
        return reply

    async def _handle_call(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes, base_url: str
    ) -> Reply:
        call = None
        try:
            if method == "GET" and path.rstrip("/").endswith(CARD_PATHS):
                said().method = "agent-card"
                return self._card(path, headers, base_url)
            call = bindings.read(method, path, query, headers, body)
            if call is None:
                if method == "GET":
                    return json_reply(rpc.error_body(rpc.METHOD_NOT_FOUND, f"no such resource: {path}"), status=404)
                return json_reply(rpc.error_body(rpc.INVALID_REQUEST, f"method {method} not allowed"), status=405)
            asked = None
            hooked = self.hooks is not None and self.hooks.request is not None
            if self.matcher.matchers or hooked:  # only then: the plain path reads nothing twice
                url = base_url + path + (f"?{query}" if query else "")
                asked = A2ARequest(shape_of(call.body).method, url, method, tuple(headers.items()), body)
                if hooked:
                    asked, call = self._as_recorded(asked, call, path, query)
            reply = await self._handle(call, Target(method, path, query), query, headers, body, asked)
        except HookError as exc:  # a user's hook raised: one line, to the client and the test
            self.hook_errors.append(f"a2a-tape: {exc}")
            reply = error_reply(rpc.INTERNAL_ERROR, f"a2a-tape: {exc}")
        except Exception as exc:  # noqa: BLE001 - the client gets a readable error, the server lives on
            reply = error_reply(rpc.INTERNAL_ERROR, f"a2a-tape replay: internal error: {type(exc).__name__}: {exc}")
        return render(reply, call.binding if call is not None else JSONRPC)

    def _as_recorded(
        self, asked: A2ARequest, call: bindings.Call, path: str, query: str
    ) -> tuple[A2ARequest, bindings.Call]:
        """The request as ``before_record_request`` would record it, to be matched as recorded
        ones were (vcrpy's rule); a request the hook drops is matched as it came."""
        assert self.hooks is not None
        if self.redactor is None:  # the recording modes' (one Redactor), else the project's
            self.redactor = self.forwarder.redactor if self.forwarder is not None else build_redactor()
        try:
            hooked = self.hooks.on_request(asked, self.redactor)
        except NotRecorded:
            return asked, call
        again = bindings.read(hooked.http_method, path, query, dict(hooked.headers), hooked.body)
        return hooked, call if again is None else again

    async def _handle(
        self,
        call: bindings.Call,
        target: Target,
        query: str,
        headers: Mapping[str, str],
        body: bytes,
        asked: A2ARequest | None = None,
    ) -> Reply:
        """``target`` and ``body`` are the request as sent (what goes upstream in the recording
        modes); the engine reads ``call.body``, the request in the JSON-RPC form (:mod:`wire.bindings`);
        ``asked``: the request as a ``match_on`` matcher sees it.

        1. read the request (what cannot be read: :meth:`_bad_params`, :meth:`_bad_request`);
        2. a method the engine does not answer itself: :meth:`_unknown_method`;
        3. the checks every known method passes: the version header, the request's faults;
        4. the operation: forwarded (record mode all), a send, a listing, a call on one task."""
        wire = call.body
        shape = shape_of(wire)
        try:
            req = rpc.parse_request(wire)
        except rpc.BadParams as exc:
            return await self._bad_params(exc, shape, query, target, headers, body)
        except rpc.BadRequest as exc:
            return self._bad_request(exc, shape, headers)
        noted = said()
        noted.method = req.method
        noted.task_id = req.params.id if req.params else None
        other = ALL_METHODS.get(req.method or "", ("", None))
        if other[0].startswith("push-"):  # a config call: its task, not the config's id
            noted.task_id = config_task(other[1], _params(wire))
        known = rpc.METHODS.get(req.method or "")
        if known is None:
            configured = None if self.record_all else self._push_config(req, wire, headers)
            if configured is not None:
                return configured
            return await self._unknown_method(req, shape, target, headers, body)
        operation, dialect = known
        if dialect == "1.0" and not _says_v1(headers):
            # as an a2a-sdk 1.3.0 agent answers it: a client that forgets the header fails here
            # as it would against the agent, not only later in production
            return error_reply(
                rpc.VERSION_NOT_SUPPORTED,
                "A2A version '0.3' is not supported by this handler. Expected version '1.0'.",
                req.id,
                dialect,
            )
        try:
            faults = self._request_faults(query, headers)
        except FaultError as exc:
            return error_reply(rpc.INVALID_PARAMS, f"a2a-tape: {exc}", req.id, dialect)
        if faults.any:
            noted.outcome = "fault"  # a recorded answer, with a fault injected
        if self.record_all:
            return await self._forwarded(req, operation, dialect, target, headers, body)
        if operation in rpc.SEND_OPERATIONS:
            return await self._send(req, shape, operation, dialect, faults, target, headers, body, wire, asked)
        if operation == "list":
            return self._list(req, shape, dialect)
        return self._on_task(req, shape, operation, dialect, faults)

    def _bad_request(self, exc: rpc.BadRequest, shape: Shape, headers: Mapping[str, str]) -> Reply:
        """A request that is no JSON-RPC request: the agent may have answered this very request
        (its answer first), or a malformed send its exact recording; else our error."""
        recorded = self._recorded(shape, self._dialect_of(shape.method, headers))
        if recorded is None and shape.method in rpc.METHODS:  # a malformed send: its exact recording
            recorded = self.matcher.match_shape(shape, rpc.METHODS[shape.method][0])
        if recorded is not None:
            return self._answer(recorded, exc.rpc_id)
        return error_reply(exc.code, str(exc), exc.rpc_id)

    def _on_task(self, req: rpc.RpcRequest, shape: Shape, operation: str, dialect: str, faults: Faults) -> Reply:
        """get, cancel or subscribe of one task: the agent's recorded answer to this very call
        when there is one (get, cancel), else the task where it stands in this replay."""
        task_id = req.params.id if req.params else None
        if not task_id:
            recorded = self._recorded(shape, dialect)
            if recorded is not None:
                return self._answer(recorded, req.id)
            return error_reply(rpc.bad_params_code(dialect), "Validation failed: id is required", req.id, dialect)
        if operation in ("get", "cancel"):
            recorded = self._recorded_for_task(shape, dialect, task_id, operation)
            if recorded is not None:
                pb = self.playbacks.get(task_id)
                if operation == "cancel" and pb is not None:  # the recorded cancel ends the playback
                    pb.cancelled = pb.finished = True
                return self._answer(recorded, req.id)
        if operation == "get":
            return self._get(req, task_id, dialect)
        if operation == "cancel":
            return self._cancel(req, task_id, dialect)
        return self._subscribe(req, task_id, dialect, faults)

    async def _unknown_method(
        self, req: rpc.RpcRequest, shape: Shape, target: Target, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        """A method no dialect of the engine's names (push configs, the extended card, an unknown
        one): forwarded under ``--record-mode all`` when it is A2A's, else the agent's recorded
        answer to it, or its refusal of it."""
        dialect = self._dialect_of(req.method, headers)
        other = ALL_METHODS.get(req.method or "")
        if self.record_all and self.forwarder is not None and other is not None:
            return await self._forwarded(req, other[0], dialect, target, headers, body)
        recorded = self._recorded(shape, dialect) or self._refused_method(req.method, dialect)
        if recorded is not None:
            return self._answer(recorded, req.id)
        return error_reply(rpc.METHOD_NOT_FOUND, f"Method not found: {req.method}", req.id)

    def _push_config(self, req: rpc.RpcRequest, wire: bytes, headers: Mapping[str, str]) -> Reply | None:
        """A push-config call (set, get, list, delete) answered from the configs this replay's
        clients registered, when the recording holds pushes (:mod:`replay.serve.pushes`); None: not one."""
        op = ALL_METHODS.get(req.method or "", ("", ""))[0]
        if not op.startswith("push-") or not self.pushes.enabled:
            return None
        dialect = self._dialect_of(req.method, headers)
        result, why = self.pushes.answer(op, dialect, _params(wire))
        if why is not None:
            code = rpc.TASK_NOT_FOUND if why == "Task not found" else rpc.INVALID_PARAMS
            return error_reply(code, why, req.id, dialect)
        return json_reply(result_body(req.id, result))

    def _start_pushes(
        self, ep: Episode, req: rpc.RpcRequest, wire: bytes, faults: Faults, pb: Playback | None, *, whole: bool
    ) -> None:
        """The configs a send registers, and its recorded pushes on their way: after a whole-body
        answer is sent (the server tells ``said().answered``), or along the stream's items."""
        task_id = ep.task_id
        if not task_id or not self.pushes.enabled:
            return
        for conf in registered(req.method, _params(wire)):
            self.pushes.configs.add(task_id, conf)
        run = self.pushes.start(ep, faults, streamed=not whole)
        if run is None:
            return
        if whole:
            said().answered = run.answered
        elif pb is not None:
            pb.on_release = run.moved

    @staticmethod
    def _dialect_of(method: str | None, headers: Mapping[str, str]) -> str:
        known = rpc.METHODS.get(method or "")
        if known is not None:
            return known[1]
        return "1.0" if _says_v1(headers) or (method or "")[:1].isupper() else "0.3"

    async def _bad_params(
        self, exc: rpc.BadParams, shape: Shape, query: str, target: Target, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        """Params we cannot read: the agent's recorded answer to this exact request, else
        (recording modes) the agent's answer now, else the agent's error (with the request's id)."""
        known = rpc.METHODS.get(exc.method)
        dialect = self._dialect_of(exc.method, headers)
        if known is not None and known[0] in rpc.SEND_OPERATIONS:
            ep = self.matcher.match_shape(shape, known[0])
            if ep is not None:
                return self._answer(ep, exc.rpc_id)
        else:
            recorded = self._recorded(shape, dialect)
            if recorded is not None:
                return self._answer(recorded, exc.rpc_id)
        if known is None:
            return error_reply(rpc.METHOD_NOT_FOUND, f"Method not found: {exc.method}", exc.rpc_id)
        if self.forwarder is not None and (self.record_all or self.record_new):
            req = rpc.RpcRequest(jsonrpc="2.0", id=exc.rpc_id, method=exc.method)
            return await self._forwarded(req, known[0], dialect, target, headers, body)
        return error_reply(rpc.bad_params_code(dialect), str(exc), exc.rpc_id, dialect)

    # ------------------------------------------------------------------ recorded answers

    def _card(self, path: str, headers: Mapping[str, str], base_url: str) -> Reply:
        """The card as the agent served it to this dialect (its headers too), URLs pointing at us;
        ``If-None-Match`` on its ETag gets 304, as the agent answers it."""
        rec = self.library.card_for(path, "1.0" if _says_v1(headers) else "0.3")
        if rec is None:
            return json_reply(rpc.card_for(base_url, self.grpc_address))
        inm = next((v for k, v in headers.items() if k.lower() == "if-none-match"), None)
        return card_reply(rec, base_url, inm, self.grpc_address)

    def _recorded(self, shape: Shape, dialect: str) -> Episode | None:
        """The agent's recorded answer to this exact request (state aside)."""
        eps = [ep for ep in self.library.answers.get(answer_key(shape, dialect), ()) if _has_answer(ep)]
        if not eps:
            return None
        fresh = [ep for ep in eps if not ep.used]
        ep = fresh[0] if fresh else eps[-1]
        ep.used += 1
        return ep

    def _refused_method(self, method: str | None, dialect: str) -> Episode | None:
        """The agent's last recorded refusal of this method (other params): an agent that refuses a
        method (push notifications not supported, no extended card) refuses it whatever it is sent."""
        refusals = [
            ep
            for (m, d, _), eps in self.library.answers.items()
            if m == method and d == dialect
            for ep in eps
            if _has_answer(ep) and ep.refused
        ]
        if not refusals:
            return None
        ep = max(refusals, key=lambda e: e.id)
        ep.used += 1
        return ep

    def _recorded_for_task(self, shape: Shape, dialect: str, task_id: str, operation: str) -> Episode | None:
        """A recorded answer to this request (GetTask, CancelTask) made when the task stood where
        it stands now: what moved the task before that answer is exactly what the client has seen.
        Of several (an agent polled while it worked), see :meth:`_poll_step`."""
        eps = [ep for ep in self.library.answers.get(answer_key(shape, dialect), ()) if _has_answer(ep)]
        if not eps or task_id in self.cancelled:
            return None
        pb = self.playbacks.get(task_id)
        if pb is not None and (operation == "get" or self.scale):  # as _get and _cancel move it on
            pb.advance()
        fits = self._fitting(task_id, eps)
        if not fits:
            return None
        ep = self._poll_step(task_id, fits) if operation == "get" else fits[0]
        ep.used += 1
        return ep

    def _fitting(self, task_id: str, eps: Iterable[Episode], *, driven: bool = False) -> list[Episode]:
        """The recorded answers among ``eps`` made when the task stood where it stands here: what
        moved the task in the log before each (sends, streams, resubscribes, cancels; not polls) is
        exactly what the client has seen of it. ``driven``: only what the client did to the task
        counts (sends, streams, cancels: a resubscribe watches the agent go on by itself)."""
        events = self.library.task_events(task_id)

        def counts(e: TaskEvent) -> bool:
            return e.operation in _DRIVING if driven else e.operation not in _PASSIVE

        moving = [e.position for e in events if counts(e)]
        visible = [e.position for e in self._visible(task_id, events) if counts(e)]
        return [
            ep
            for ep in eps
            if ep.answer_position is not None and [p for p in moving if p < ep.answer_position] == visible
        ]

    def _poll_step(self, task_id: str, fits: list[Episode]) -> Episode:
        """Which of the agent's recorded GetTask answers (in recorded order, all made while the task
        stood where it stands here) a poll gets. A task this replay drives walks through them: one
        step per poll (``instant``), or the last one the agent had given by the time elapsed since
        the replayed send (``real``, a factor; none yet: the first); the walk ends on the last,
        where the agent ended. A task no client drove here stands as it ended (the last)."""
        pb = self.playbacks.get(task_id)
        if pb is None:
            return fits[-1]
        if self.scale == 0:
            served = self.polls.get(task_id, 0)
            ep = next((ep for ep in fits if (ep.answer_position or 0) > served), fits[-1])
        else:
            elapsed = (time.monotonic() - pb.started) / self.scale  # in recorded seconds
            start = pb.episode.exchange.started_at
            due = [ep for ep in fits if ep.exchange.started_at - start <= elapsed]
            ep = due[-1] if due else fits[0]
        self.polls[task_id] = max(self.polls.get(task_id, 0), ep.answer_position or 0)
        return ep

    def _answer(self, ep: Episode, rpc_id: Any) -> Reply:
        """A recorded answer as the agent gave it, with this request's JSON-RPC id."""
        ex = ep.exchange
        ctype = ex.content_type or "application/json"
        status = ex.status or 200
        items = ep.served
        if items and ep.binding != JSONRPC and not ctype.startswith("text/event-stream"):
            # its items are served in the JSON-RPC form (an error's status is the binding's to set)
            ctype, status = "application/json", 200
        if items and ctype.startswith("text/event-stream"):
            frames = self._frames(ep.iter_served(), ep.dialect, ep.dialect, rpc_id)
            reply = self._stream(frames, NO_FAULTS, ep.dialect, rpc_id, None, None)
            return msgspec.structs.replace(reply, status=status, content_type=ctype)
        if items:
            return Reply(status=status, content_type=ctype, body=items[-1].payload(rpc.encode_id(rpc_id)))
        return Reply(status=status, content_type=ctype, body=ex.response_body or b"")

    def _request_faults(self, query: str, headers: Mapping[str, str]) -> Faults:
        specs = [v for v in parse_qs(query).get(FAULT_QUERY, [])]
        h = headers.get(FAULT_HEADER.lower()) or headers.get(FAULT_HEADER)
        if h:
            specs.append(h)
        return parse_faults(*specs) if specs else self.faults

    # ------------------------------------------------------------------ sends

    async def _send(
        self,
        req: rpc.RpcRequest,
        shape: Shape,
        operation: str,
        dialect: str,
        faults: Faults,
        target: Target,
        headers: Mapping[str, str],
        body: bytes,
        wire: bytes,
        asked: A2ARequest | None = None,
    ) -> Reply:
        problem = send_problem(wire, dialect)
        if problem is None:
            ep = self.matcher.match(req, shape, operation, asked)
        else:  # one an a2a-sdk agent refuses finds only a recording of this very request
            ep = self.matcher.match_shape(shape, operation)
        if ep is None:
            if self.record_new:
                return await self._forwarded(req, operation, dialect, target, headers, body)
            if problem is not None:  # refused as the agent refuses it
                said().outcome = "error"
                return json_reply(rpc.error_body(problem.code, problem.message, req.id, problem.data()))
            return self._no_match(req, shape, operation)
        task_id = ep.task_id
        said().task_id = task_id
        pb = None
        if task_id:
            pb = Playback(task_id, ep, self.scale)
            self.playbacks[task_id] = pb
            self.cancelled.discard(task_id)
            self.polls.pop(task_id, None)
        recorded_json = (ep.exchange.content_type or "").startswith("application/json")
        self._start_pushes(ep, req, wire, faults, pb, whole=operation == "send" or recorded_json)
        if operation == "send" or recorded_json:  # a send, or a stream the agent answered with a JSON body
            items = ep.served
            if pb is not None:
                pb.released = len(items)
            if recorded_json and items:
                return self._whole(json_reply(self._payload(items[-1], ep.dialect, dialect, req.id)), faults, req.id)
            return self._whole(self._send_reply(req, ep, items, dialect), faults, req.id)
        same = ep.dialect == dialect or ep.dialect not in ("0.3", "1.0")
        if same and ep.binding == JSONRPC and self.scale == 0 and not faults.any and not ep.loaded:
            return self._stream_batches(ep.iter_frames(rpc.encode_id(req.id)), pb)
        frames = self._frames(ep.iter_served(), ep.dialect, dialect, req.id)
        return self._stream(frames, faults, dialect, req.id, pb.release if pb is not None else None, pb)

    @staticmethod
    def _stream_batches(batches: Iterable[list[bytes]], pb: Playback | None) -> Reply:
        """The fast way: recorded frames in batches, no timing, no fault."""

        async def gen() -> AsyncGenerator[bytes, None]:
            sent = 0
            for batch in batches:
                sent += len(batch)
                if pb is not None:
                    pb.release(sent)
                yield b"".join(batch)
                if pb is not None and pb.cancelled:
                    return
            if pb is not None:
                pb.finished = True

        return Reply(content_type="text/event-stream; charset=utf-8", stream=gen(), headers=dict(SSE_HEADERS))

    def _no_match(self, req: rpc.RpcRequest, shape: Shape, operation: str) -> Reply:
        text = message_text(req)
        near = self.matcher.closest(req, shape, operation)
        if near is None:
            hint = f"the recording {self.library.source} has no recorded sends"
        else:
            ep, diff = near
            hint = f"closest recording: {ep.describe()}"
            if ep.operation != operation:
                hint += f"; it is a {ep.method}"
            if diff is not None:
                hint += f"; first difference: {diff}"
            refused = self.matcher.refusals.get(ep.id)
            if refused is not None:
                hint += f"; match_on: {refused}"
        line = (
            f"a2a-tape: no recording matches {req.method} with text {text!r} "
            f"(match {self.matcher.mode}, record mode {self.record_mode}); {hint}"
        )
        self.unmatched.append(line)
        reply = error_reply(rpc.NO_RECORDING, line, req.id)
        said().outcome = "miss"
        return reply

    def _frames(
        self, items: Iterable[Served], recorded: str, dialect: str, rpc_id: Any
    ) -> Iterator[tuple[bytes, float]]:
        """(SSE frame, recorded gap) per item, rendered as the stream goes (no copy of a long recording)."""
        if recorded == dialect or recorded not in ("0.3", "1.0"):
            enc = rpc.encode_id(rpc_id)
            return ((s.frame(enc), s.gap) for s in items)
        return ((frame(self._payload(s, recorded, dialect, rpc_id), s.sse_event), s.gap) for s in items)

    def _payload(self, s: Served, recorded: str, dialect: str, rpc_id: Any) -> bytes:
        if recorded == dialect or recorded not in ("0.3", "1.0"):
            return s.payload(rpc.encode_id(rpc_id))
        converted = encode_item(s.recorded, dialect, rpc_id)
        return converted if converted is not None else s.payload(rpc.encode_id(rpc_id))

    def _send_reply(self, req: rpc.RpcRequest, ep: Episode, items: list[Served], dialect: str) -> Reply:
        """A non-streaming send: the recorded body, or the result folded from a recorded stream."""
        if not ep.exchange.streaming and items:
            return json_reply(self._payload(items[-1], ep.dialect, dialect, req.id))
        messages = [s for s in items if isinstance(s.item.body, MessageItem)]
        task_id = ep.task_id
        snap = fold_task(task_id, items) if task_id else None
        if snap is not None:
            return json_reply(encode_item(snap, dialect, req.id) or b"")
        if messages:
            return json_reply(encode_item(messages[-1].recorded, dialect, req.id) or b"")
        errors = [s for s in items if s.item.kind == "error"]
        if errors:
            return json_reply(errors[-1].payload(rpc.encode_id(req.id)))
        if ep.exchange.response_body:
            return json_reply(ep.exchange.response_body)
        return error_reply(rpc.INTERNAL_ERROR, f"a2a-tape: {ep.describe()} recorded no answer", req.id)

    def _whole(self, reply: Reply, faults: Faults, rpc_id: Any) -> Reply:
        """A whole-body answer (one item) under the request's faults: ``delay`` waits before it,
        ``error-after=0`` answers -32603 instead, ``drop-after=0`` ends the response with no body,
        ``stall-after=0`` sends the headers and then nothing (the client's read timeout decides).
        ``duplicate`` and counts above 0 do not apply to one item."""
        if not faults.any:
            return reply
        if faults.error_after == 0:
            reply = error_reply(rpc.INTERNAL_ERROR, "a2a-tape fault: error-after=0", rpc_id)
        drop, stall, delay = faults.drop_after == 0, faults.stall_after == 0, faults.delay_ms / 1000.0
        if not (drop or stall or delay):
            return reply
        body = reply.body

        async def gen() -> AsyncGenerator[bytes, None]:
            if delay:
                await anyio.sleep(delay)
            if drop:
                return
            if stall:
                await anyio.sleep_forever()
            yield body

        return Reply(status=reply.status, content_type=reply.content_type, stream=gen(), headers=reply.headers)

    # ------------------------------------------------------------------ streams

    def _stream(
        self,
        frames: Iterable[tuple[bytes, float]],
        faults: Faults,
        dialect: str,
        rpc_id: Any,
        on_sent: Callable[[int], None] | None,
        pb: Playback | None,
    ) -> Reply:
        """The frames as an SSE answer: whole batches when nothing waits or fails between them
        (:func:`_batched`), else paced by the timing and the request's faults (:meth:`_paced`)."""
        if self.scale == 0 and not faults.any:
            stream = _batched(frames, on_sent, pb)
        else:
            stream = self._paced(frames, faults, rpc_id, _Outbox(on_sent), pb)
        return Reply(content_type="text/event-stream; charset=utf-8", stream=stream, headers=dict(SSE_HEADERS))

    async def _paced(
        self, frames: Iterable[tuple[bytes, float]], faults: Faults, rpc_id: Any, out: _Outbox, pb: Playback | None
    ) -> AsyncGenerator[bytes, None]:
        """Each frame after its recorded gap (scaled) and the request's delay, until a fault ends
        the stream: ``drop-after`` (the connection ends), ``error-after`` (a -32603 error event,
        at once or after the last frame), ``stall-after`` (then only keep-alive comments);
        ``duplicate=N`` sends the Nth frame twice. Frames with no wait between them go out together."""
        errored = False
        for f, gap in frames:
            stop = _stop_before(faults, out.sent, pb)
            if stop == "error":
                out.buf.append(self._faulterror_reply(faults, rpc_id))
                errored = True
            if stop is not None:
                break
            wait = gap * self.scale + faults.delay_ms / 1000.0
            if wait > 0:
                if out.buf:
                    yield out.flush()
                await anyio.sleep(wait)
                if pb is not None and pb.cancelled:
                    break
            out.add(f, twice=faults.duplicate == out.sent + 1)
            if len(out.buf) >= _BATCH:
                yield out.flush()
        else:
            if faults.error_after is not None and out.sent >= faults.error_after:
                out.buf.append(self._faulterror_reply(faults, rpc_id))  # (a stall after it still stalls)
        if out.buf or out.on_sent is not None:
            chunk = out.flush()
            if chunk:
                yield chunk
        if faults.stall_after is not None and out.sent >= faults.stall_after and not errored:
            while True:  # keep the connection, send nothing but keep-alive comments
                await anyio.sleep(15)
                yield comment(f"ping - {time.strftime('%Y-%m-%d %H:%M:%S')}")

    @staticmethod
    def _faulterror_reply(faults: Faults, rpc_id: Any) -> bytes:
        body = rpc.error_body(rpc.INTERNAL_ERROR, f"a2a-tape fault: error-after={faults.error_after}", rpc_id)
        return frame(body, "error")

    # ------------------------------------------------------------------ tasks

    def _visible(self, task_id: str, events: list[TaskEvent] | None = None) -> list[TaskEvent]:
        """The task's recorded items that stand for where the agent has got now.

        The agent moves a task on its own (a recorded resubscribe or GetTask shows how far), but
        only the client moves it past its next message or cancel: items from the first driving
        exchange (send, stream, cancel) of the task not replayed yet on are left out, once the
        client has replayed one of them (a task nobody replayed here shows as it ended). While a
        replayed stream of the task is under way, its items not released yet are left out too,
        with everything recorded after its start."""
        if events is None:
            events = self.library.task_events(task_id)
        pb = self.playbacks.get(task_id)
        if pb is not None and not pb.done:
            first = pb.items[0].position if pb.items else 0
            shown = {s.position for s in pb.items[: pb.released]}
            return [e for e in events if e.position < first or e.position in shown]
        driving: list[tuple[int, bool]] = []  # (first position, replayed here), per driving exchange
        seen: set[int] = set()
        for e in events:
            if e.operation in _DRIVING and e.exchange_id not in seen:
                seen.add(e.exchange_id)
                ep = self.library.episode(e.exchange_id)
                driving.append((e.position, ep is not None and ep.used > 0))
        last = max((i for i, (_, used) in enumerate(driving) if used), default=None)
        if last is None:
            return events
        if last + 1 < len(driving):
            barrier = driving[last + 1][0]
            events = [e for e in events if e.position < barrier]
        # the agent's answers to polls after the replayed drive show only as far as a poll got here
        since, polled = driving[last][0], self.polls.get(task_id, 0)
        return [e for e in events if not (e.operation == "get" and e.position > since and e.position > polled)]

    def _fold(self, task_id: str) -> RecordedTask | None:
        """The task where it stands now (the one fold, from the recorded JSON of what is visible)."""
        events = self._visible(task_id)
        if not events:
            return None
        snap = fold_task(task_id, (e.event for e in events))
        if snap is not None and task_id in self.cancelled:
            snap = with_state(snap, "canceled")
        return snap

    def _mark_cancelled(self, task_id: str) -> None:
        pb = self.playbacks.get(task_id)
        if pb is not None:
            pb.cancelled = True
        self.cancelled.add(task_id)

    def _advance(self, task_id: str) -> None:
        pb = self.playbacks.get(task_id)
        if pb is not None:
            pb.advance()

    def _get(self, req: rpc.RpcRequest, task_id: str, dialect: str) -> Reply:
        try:
            check_history_length(req.params.historyLength if req.params else None)
        except ListingError as exc:
            return error_reply(rpc.INVALID_PARAMS, str(exc), req.id, dialect)
        self._advance(task_id)
        self._step_polls(task_id)
        snap = self._fold(task_id)
        if snap is None:
            return error_reply(rpc.TASK_NOT_FOUND, "Task not found", req.id, dialect)
        return json_reply(
            encode_task(with_history(snap, req.params.historyLength if req.params else None), dialect, req.id)
        )

    def _step_polls(self, task_id: str) -> None:
        """A GetTask no recorded answer fits as it is (another ``historyLength``, the other dialect)
        moves a walk on as a poll does: past the agent's recorded GetTask answers made after what
        the client has seen move, one per poll (or those due by the replay clock). The task it
        folds then ends on the agent's own answer: history as that agent kept it."""
        pb = self.playbacks.get(task_id)
        if pb is None or task_id in self.cancelled:
            return
        events = self.library.task_events(task_id)
        moved = max((e.position for e in self._visible(task_id, events) if e.operation not in _PASSIVE), default=0)
        after = max(moved, self.polls.get(task_id, 0))
        ahead = sorted(
            {e.position: e.exchange_id for e in events if e.operation == "get" and e.position > after}.items()
        )
        if not ahead:
            return
        if self.scale == 0:
            self.polls[task_id] = ahead[0][0]
            return
        elapsed = (time.monotonic() - pb.started) / self.scale
        start = pb.episode.exchange.started_at
        due = [
            pos
            for pos, ex_id in ahead
            if (ep := self.library.episode(ex_id)) and ep.exchange.started_at - start <= elapsed
        ]
        if due:
            self.polls[task_id] = due[-1]

    def _cancel(self, req: rpc.RpcRequest, task_id: str, dialect: str) -> Reply:
        pb = self.playbacks.get(task_id)
        if pb is not None and self.scale:
            pb.advance()
        snap = self._fold(task_id)
        if snap is None:
            return error_reply(rpc.TASK_NOT_FOUND, "Task not found", req.id, dialect)
        if snap.state in TERMINAL_STATES:
            return error_reply(rpc.TASK_NOT_CANCELABLE, "Task cannot be canceled", req.id, dialect)
        self._mark_cancelled(task_id)
        return json_reply(encode_task(with_state(snap, "canceled"), dialect, req.id))

    def _subscribe(self, req: rpc.RpcRequest, task_id: str, dialect: str, faults: Faults) -> Reply:
        pb = self.playbacks.get(task_id)
        if pb is not None and self.scale:
            pb.advance()
        if (pb is None or pb.done) and task_id not in self.cancelled:
            recorded = self._recorded_subscription(task_id)
            if recorded is not None:  # the recording has this resubscribe: answer as the agent did then
                recorded.used += 1
                ctype = recorded.exchange.content_type or ""
                if recorded.dialect == dialect and not ctype.startswith("text/event-stream"):
                    return self._answer(recorded, req.id)  # a refusal, as a JSON body
                as_recorded = self._frames(recorded.iter_served(), recorded.dialect, dialect, req.id)
                return self._stream(as_recorded, faults, dialect, req.id, None, None)
        snap = self._fold(task_id)
        if snap is None:
            return error_reply(rpc.TASK_NOT_FOUND, "Task not found", req.id, dialect)
        if snap.state in TERMINAL_STATES:
            body = rpc.error_body(
                rpc.UNSUPPORTED_OPERATION,
                f"Task {task_id} is in terminal state: {state_in(snap.state, '1.0')}",  # the SDK's words in both
                req.id,
                error_data(rpc.UNSUPPORTED_OPERATION, dialect),
            )
            if dialect == "1.0":
                return json_reply(body)

            async def one() -> AsyncGenerator[bytes, None]:
                yield frame(body)

            return Reply(content_type="text/event-stream; charset=utf-8", stream=one(), headers=dict(SSE_HEADERS))
        frames: list[tuple[bytes, float]] = [(frame(encode_snapshot_item(snap, dialect, req.id)), 0.0)]
        on_sent: Callable[[int], None] | None = None
        if pb is not None and not pb.done and not pb.cancelled:
            rest = pb.items[pb.released :]
            start = pb.released
            ep_dialect = pb.episode.dialect
            first = True
            for s in rest:
                gap = s.gap
                if first:  # what was due before the client came back is not waited for again
                    gap, first = 0.0, False
                frames.append((frame(self._payload(s, ep_dialect, dialect, req.id), s.sse_event), gap))

            def released(n: int, pb: Playback = pb, start: int = start) -> None:
                pb.release(start + n - 1)  # the first item sent is the snapshot

            on_sent = released

        return self._stream(frames, faults, dialect, req.id, on_sent, pb)

    def _recorded_subscription(self, task_id: str) -> Episode | None:
        """A recorded resubscribe of the task made when it stood where it stands here (one not served
        yet first); once served, only a refusal is the agent's answer again (a finished task)."""
        fits = self._fitting(task_id, self.library.subscriptions.get(task_id, ()), driven=True)
        fresh = [ep for ep in fits if not ep.used]
        if fresh:
            return fresh[0]
        if fits and fits[-1].refused:
            return fits[-1]
        return None

    def _list(self, req: rpc.RpcRequest, shape: Shape, dialect: str) -> Reply:
        recorded = self._recorded_listing(shape, dialect)
        if recorded is not None:
            return self._answer(recorded, req.id)
        p = req.params or rpc.Params()
        listed: list[Listed] = []
        for tid in self.library.task_ids():
            self._advance(tid)
            snap = self._fold(tid)
            if snap is not None:
                stamp = snap.status.get("timestamp") if isinstance(snap.status, dict) else None
                listed.append(Listed(snap, timestamp_ns(stamp if isinstance(stamp, str) else None)))
        try:
            page = list_page(
                listed,
                context_id=p.contextId,
                status=p.status,
                page_size=p.pageSize,
                page_token=p.pageToken,
                history_length=p.historyLength,
                status_timestamp_after=p.statusTimestampAfter,
            )
        except ListingError as exc:
            return error_reply(rpc.INVALID_PARAMS, str(exc), req.id, dialect)
        keep_artifacts = bool(p.includeArtifacts)
        tasks: list[WireTask] = [
            wire_task(t.snapshot if keep_artifacts else msgspec.structs.replace(t.snapshot, artifacts=()), "1.0")
            for t in page.tasks
        ]
        return json_reply(rpc.list_tasks_body(req.id, tasks, page.next_page_token, page.page_size, page.total_size))

    def _recorded_listing(self, shape: Shape, dialect: str) -> Episode | None:
        """A recorded ListTasks answer of this request, made after everything the recording holds
        happened, while here nothing is held back or changed (no playback under way, no cancel)."""
        eps = [ep for ep in self.library.answers.get(answer_key(shape, dialect), ()) if ep.served]
        if not eps or self.cancelled:
            return None
        for pb in self.playbacks.values():
            pb.advance()
            if not pb.done:
                return None
        last = 0
        for tid in self.library.task_ids():
            for e in self.library.task_events(tid):
                if e.operation not in _PASSIVE and e.position > last:
                    last = e.position
        for ep in reversed(eps):
            at = ep.answer_position
            if at is not None and at > last:
                ep.used += 1
                return ep
        return None

    async def _forwarded(
        self, req: rpc.RpcRequest, operation: str, dialect: str, target: Target, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        assert self.forwarder is not None
        said().outcome = "forward"
        return await self.forwarder.forward(req, operation, dialect, target, headers, body)

    @property
    def recorded(self) -> int:
        """Exchanges recorded from upstream so far."""
        return self.forwarder.recorded if self.forwarder is not None else 0


async def _batched(
    frames: Iterable[tuple[bytes, float]], on_sent: Callable[[int], None] | None, pb: Playback | None
) -> AsyncGenerator[bytes, None]:
    """No fault, no wait: whole batches of frames per chunk, bookkeeping per batch."""
    it = iter(frames)
    sent = 0
    while True:
        batch = [f for f, _ in islice(it, _BATCH)]
        if not batch:
            if pb is not None:
                pb.finished = True
            return
        sent += len(batch)
        if on_sent is not None:
            on_sent(sent)
        yield b"".join(batch)
        if pb is not None and pb.cancelled:
            return


class _Outbox:
    """Frames waiting to go out as one chunk, and how many have been sent (told to ``on_sent``
    at each chunk: the playback releases that many items)."""

    def __init__(self, on_sent: Callable[[int], None] | None) -> None:
        self.on_sent = on_sent
        self.buf: list[bytes] = []
        self.sent = 0

    def add(self, frame: bytes, *, twice: bool = False) -> None:
        self.buf.append(frame)
        self.sent += 1
        if twice:
            self.buf.append(frame)

    def flush(self) -> bytes:
        if self.on_sent is not None:
            self.on_sent(self.sent)
        chunk = b"".join(self.buf)
        self.buf.clear()
        return chunk


def _stop_before(faults: Faults, sent: int, pb: Playback | None) -> str | None:
    """Why a paced stream sends no more frames after ``sent`` of them: ``drop``, ``stall``,
    ``error`` (the request's faults, in that order) or ``cancelled``; None: it goes on."""
    if faults.drop_after is not None and sent >= faults.drop_after:
        return "drop"
    if faults.stall_after is not None and sent >= faults.stall_after:
        return "stall"
    if faults.error_after is not None and sent >= faults.error_after:
        return "error"
    if pb is not None and pb.cancelled:
        return "cancelled"
    return None
