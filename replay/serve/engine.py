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

This module reads a request and decides what answers it: the card, a send, the methods it does not
answer itself; the calls on one task, and where each task stands, are :mod:`replay.serve.task_calls`';
how an answer goes out (frames, faults, timing) is :mod:`replay.serve.delivery`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

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
from a2a_tape.replay.serve import rpc
from a2a_tape.replay.serve.convert import (
    encode_item,
    fold_task,
)
from a2a_tape.replay.serve.delivery import frames_of, payload_of, recorded_answer, stream_batches, stream_reply, whole
from a2a_tape.replay.serve.faults import FAULT_HEADER, FAULT_QUERY, NO_FAULTS, FaultError, Faults, parse_faults
from a2a_tape.replay.serve.library import Episode, Library, Served, answer_key, message_text
from a2a_tape.replay.serve.matching import Matcher
from a2a_tape.replay.serve.modes import RecordMode
from a2a_tape.replay.serve.playback import Playback, parse_timing
from a2a_tape.replay.serve.pushes import Pushes, result_body
from a2a_tape.replay.serve.reply import (
    Reply,
    card_reply,
    error_reply,
    json_reply,
    render,
    said,
    saying,
    stop_saying,
)
from a2a_tape.replay.serve.shape import Shape, shape_of
from a2a_tape.replay.serve.target import Target
from a2a_tape.replay.serve.task_calls import TaskCalls, has_answer
from a2a_tape.replay.serve.validation import send_problem
from a2a_tape.store import MessageItem
from a2a_tape.store.json_values import decode_json
from a2a_tape.store.methods import ALL_METHODS, CARD_PATHS, JSONRPC
from a2a_tape.store.observers import REPLAY_MARKER
from a2a_tape.store.redact import Redactor, build_redactor
from a2a_tape.wire import bindings
from a2a_tape.wire.push_configs import config_task, registered

if TYPE_CHECKING:
    from a2a_tape.replay.serve.forward import Forwarder


def _params(wire: bytes) -> Any:
    """A JSON-RPC request's params as JSON values (None when it cannot be read)."""
    try:
        doc = decode_json(wire)
    except (msgspec.DecodeError, RecursionError):
        return None
    return doc.get("params") if isinstance(doc, dict) else None


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
        self.tasks = TaskCalls(library, self.scale)  # where each task stands here, and the calls on it
        self.unmatched: list[str] = []  # one line per request nothing answered (the plugin reports them)
        # what the recording modes store is redacted as every other path does (one Redactor)
        self.forwarder: Forwarder | None = None
        if upstream:  # the way upstream (and its HTTP client's imports, ~70 ms) only where there is one
            from a2a_tape.replay.serve.forward import Forwarder

            self.forwarder = Forwarder(library, upstream, redactor, self.hooks)
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
            return self.tasks.list_tasks(req, shape, dialect)
        return self._on_task(req, shape, operation, dialect, faults)

    def _bad_request(self, exc: rpc.BadRequest, shape: Shape, headers: Mapping[str, str]) -> Reply:
        """A request that is no JSON-RPC request: the agent may have answered this very request
        (its answer first), or a malformed send its exact recording; else our error."""
        recorded = self._recorded(shape, self._dialect_of(shape.method, headers))
        if recorded is None and shape.method in rpc.METHODS:  # a malformed send: its exact recording
            recorded = self.matcher.match_shape(shape, rpc.METHODS[shape.method][0])
        if recorded is not None:
            return recorded_answer(recorded, exc.rpc_id, self.scale)
        return error_reply(exc.code, str(exc), exc.rpc_id)

    def _on_task(self, req: rpc.RpcRequest, shape: Shape, operation: str, dialect: str, faults: Faults) -> Reply:
        """get, cancel or subscribe of one task: the agent's recorded answer to this very call
        when there is one (get, cancel), else the task where it stands in this replay."""
        task_id = req.params.id if req.params else None
        if not task_id:
            recorded = self._recorded(shape, dialect)
            if recorded is not None:
                return recorded_answer(recorded, req.id, self.scale)
            return error_reply(rpc.bad_params_code(dialect), "Validation failed: id is required", req.id, dialect)
        if operation in ("get", "cancel"):
            recorded = self.tasks.recorded_for_task(shape, dialect, task_id, operation)
            if recorded is not None:
                pb = self.tasks.playbacks.get(task_id)
                if operation == "cancel" and pb is not None:  # the recorded cancel ends the playback
                    pb.cancelled = pb.finished = True
                return recorded_answer(recorded, req.id, self.scale)
        if operation == "get":
            return self.tasks.get(req, task_id, dialect)
        if operation == "cancel":
            return self.tasks.cancel(req, task_id, dialect)
        return self.tasks.subscribe(req, task_id, dialect, faults)

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
            return recorded_answer(recorded, req.id, self.scale)
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
                return recorded_answer(ep, exc.rpc_id, self.scale)
        else:
            recorded = self._recorded(shape, dialect)
            if recorded is not None:
                return recorded_answer(recorded, exc.rpc_id, self.scale)
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
        eps = [ep for ep in self.library.answers.get(answer_key(shape, dialect), ()) if has_answer(ep)]
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
            if has_answer(ep) and ep.refused
        ]
        if not refusals:
            return None
        ep = max(refusals, key=lambda e: e.id)
        ep.used += 1
        return ep

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
            self.tasks.playbacks[task_id] = pb
            self.tasks.cancelled.discard(task_id)
            self.tasks.polls.pop(task_id, None)
        recorded_json = (ep.exchange.content_type or "").startswith("application/json")
        self._start_pushes(ep, req, wire, faults, pb, whole=operation == "send" or recorded_json)
        if operation == "send" or recorded_json:  # a send, or a stream the agent answered with a JSON body
            items = ep.served
            if pb is not None:
                pb.released = len(items)
            if recorded_json and items:
                return whole(json_reply(payload_of(items[-1], ep.dialect, dialect, req.id)), faults, req.id)
            return whole(self._send_reply(req, ep, items, dialect), faults, req.id)
        same = ep.dialect == dialect or ep.dialect not in ("0.3", "1.0")
        if same and ep.binding == JSONRPC and self.scale == 0 and not faults.any and not ep.loaded:
            return stream_batches(ep.iter_frames(rpc.encode_id(req.id)), pb)
        frames = frames_of(ep.iter_served(), ep.dialect, dialect, req.id)
        return stream_reply(frames, faults, self.scale, req.id, pb.release if pb is not None else None, pb)

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

    def _send_reply(self, req: rpc.RpcRequest, ep: Episode, items: list[Served], dialect: str) -> Reply:
        """A non-streaming send: the recorded body, or the result folded from a recorded stream."""
        if not ep.exchange.streaming and items:
            return json_reply(payload_of(items[-1], ep.dialect, dialect, req.id))
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
