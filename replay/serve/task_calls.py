"""The calls on one task (GetTask, CancelTask, SubscribeToTask / ``tasks/resubscribe``, ListTasks),
answered where the task stands in this replay, and what says where it stands: the playback of the
send that drove it (how many of its items the agent has "produced"), the polls answered, the cancels.

A task the replay drove stands where the client has seen it go; one nobody drove here stands as it
ended. The agent's recorded answer to the same call, made when the task stood there, answers first
(:meth:`TaskCalls.recorded_for_task`, :meth:`TaskCalls.recorded_subscription`,
:meth:`TaskCalls.recorded_listing`); else the task folded from what is visible of it
(:meth:`TaskCalls.standing`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable, Iterable

import msgspec

from a2a_tape.fold.views import RecordedTask
from a2a_tape.replay.serve import rpc
from a2a_tape.replay.serve.convert import encode_snapshot_item, encode_task, fold_task, wire_task, with_state
from a2a_tape.replay.serve.delivery import frames_of, payload_of, recorded_answer, stream_reply
from a2a_tape.replay.serve.faults import Faults
from a2a_tape.replay.serve.library import Episode, Library, TaskEvent, answer_key
from a2a_tape.replay.serve.list_tasks import (
    Listed,
    ListingError,
    check_history_length,
    list_page,
    timestamp_ns,
    with_history,
)
from a2a_tape.replay.serve.playback import Playback
from a2a_tape.replay.serve.reply import SSE_HEADERS, Reply, error_data, error_reply, json_reply
from a2a_tape.replay.serve.shape import Shape
from a2a_tape.store import TERMINAL_STATES
from a2a_tape.store.a2a_structs import WireTask
from a2a_tape.store.decode import state_in
from a2a_tape.wire.sse_frames import frame

_PASSIVE = frozenset({"get", "list"})  # operations whose answers do not move a task
_DRIVING = frozenset({"send", "stream", "cancel"})  # what a client does to a task (the rest the agent does)


def has_answer(ep: Episode) -> bool:
    return bool(ep.served) or bool(ep.exchange.response_body)


class TaskCalls:
    """Where each task stands in this replay, and the calls on it. See the module docstring."""

    def __init__(self, library: Library, scale: float) -> None:
        self.library = library
        self.scale = scale
        self.playbacks: dict[str, Playback] = {}
        self.cancelled: set[str] = set()
        self.polls: dict[str, int] = {}  # task -> where the last recorded GetTask answer served to a poll sits

    def recorded_for_task(self, shape: Shape, dialect: str, task_id: str, operation: str) -> Episode | None:
        """A recorded answer to this request (GetTask, CancelTask) made when the task stood where
        it stands now: what moved the task before that answer is exactly what the client has seen.
        Of several (an agent polled while it worked), see :meth:`poll_step`."""
        eps = [ep for ep in self.library.answers.get(answer_key(shape, dialect), ()) if has_answer(ep)]
        if not eps or task_id in self.cancelled:
            return None
        pb = self.playbacks.get(task_id)
        if pb is not None and (operation == "get" or self.scale):  # as get and cancel move it on
            pb.advance()
        fits = self.fitting(task_id, eps)
        if not fits:
            return None
        ep = self.poll_step(task_id, fits) if operation == "get" else fits[0]
        ep.used += 1
        return ep

    def fitting(self, task_id: str, eps: Iterable[Episode], *, driven: bool = False) -> list[Episode]:
        """The recorded answers among ``eps`` made when the task stood where it stands here: what
        moved the task in the log before each (sends, streams, resubscribes, cancels; not polls) is
        exactly what the client has seen of it. ``driven``: only what the client did to the task
        counts (sends, streams, cancels: a resubscribe watches the agent go on by itself)."""
        events = self.library.task_events(task_id)

        def counts(e: TaskEvent) -> bool:
            return e.operation in _DRIVING if driven else e.operation not in _PASSIVE

        moving = [e.position for e in events if counts(e)]
        visible = [e.position for e in self.visible(task_id, events) if counts(e)]
        return [
            ep
            for ep in eps
            if ep.answer_position is not None and [p for p in moving if p < ep.answer_position] == visible
        ]

    def poll_step(self, task_id: str, fits: list[Episode]) -> Episode:
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

    def visible(self, task_id: str, events: list[TaskEvent] | None = None) -> list[TaskEvent]:
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

    def standing(self, task_id: str) -> RecordedTask | None:
        """The task where it stands now (the one fold, from the recorded JSON of what is visible)."""
        events = self.visible(task_id)
        if not events:
            return None
        snap = fold_task(task_id, (e.event for e in events))
        if snap is not None and task_id in self.cancelled:
            snap = with_state(snap, "canceled")
        return snap

    def mark_cancelled(self, task_id: str) -> None:
        pb = self.playbacks.get(task_id)
        if pb is not None:
            pb.cancelled = True
        self.cancelled.add(task_id)

    def advance(self, task_id: str) -> None:
        pb = self.playbacks.get(task_id)
        if pb is not None:
            pb.advance()

    def step_polls(self, task_id: str) -> None:
        """A GetTask no recorded answer fits as it is (another ``historyLength``, the other dialect)
        moves a walk on as a poll does: past the agent's recorded GetTask answers made after what
        the client has seen move, one per poll (or those due by the replay clock). The task it
        folds then ends on the agent's own answer: history as that agent kept it."""
        pb = self.playbacks.get(task_id)
        if pb is None or task_id in self.cancelled:
            return
        events = self.library.task_events(task_id)
        moved = max((e.position for e in self.visible(task_id, events) if e.operation not in _PASSIVE), default=0)
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

    def recorded_subscription(self, task_id: str) -> Episode | None:
        """A recorded resubscribe of the task made when it stood where it stands here (one not served
        yet first); once served, only a refusal is the agent's answer again (a finished task)."""
        fits = self.fitting(task_id, self.library.subscriptions.get(task_id, ()), driven=True)
        fresh = [ep for ep in fits if not ep.used]
        if fresh:
            return fresh[0]
        if fits and fits[-1].refused:
            return fits[-1]
        return None

    def recorded_listing(self, shape: Shape, dialect: str) -> Episode | None:
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

    def get(self, req: rpc.RpcRequest, task_id: str, dialect: str) -> Reply:
        try:
            check_history_length(req.params.historyLength if req.params else None)
        except ListingError as exc:
            return error_reply(rpc.INVALID_PARAMS, str(exc), req.id, dialect)
        self.advance(task_id)
        self.step_polls(task_id)
        snap = self.standing(task_id)
        if snap is None:
            return error_reply(rpc.TASK_NOT_FOUND, "Task not found", req.id, dialect)
        return json_reply(
            encode_task(with_history(snap, req.params.historyLength if req.params else None), dialect, req.id)
        )

    def cancel(self, req: rpc.RpcRequest, task_id: str, dialect: str) -> Reply:
        pb = self.playbacks.get(task_id)
        if pb is not None and self.scale:
            pb.advance()
        snap = self.standing(task_id)
        if snap is None:
            return error_reply(rpc.TASK_NOT_FOUND, "Task not found", req.id, dialect)
        if snap.state in TERMINAL_STATES:
            return error_reply(rpc.TASK_NOT_CANCELABLE, "Task cannot be canceled", req.id, dialect)
        self.mark_cancelled(task_id)
        return json_reply(encode_task(with_state(snap, "canceled"), dialect, req.id))

    def subscribe(self, req: rpc.RpcRequest, task_id: str, dialect: str, faults: Faults) -> Reply:
        pb = self.playbacks.get(task_id)
        if pb is not None and self.scale:
            pb.advance()
        if (pb is None or pb.done) and task_id not in self.cancelled:
            recorded = self.recorded_subscription(task_id)
            if recorded is not None:  # the recording has this resubscribe: answer as the agent did then
                recorded.used += 1
                ctype = recorded.exchange.content_type or ""
                if recorded.dialect == dialect and not ctype.startswith("text/event-stream"):
                    return recorded_answer(recorded, req.id, self.scale)  # a refusal, as a JSON body
                as_recorded = frames_of(recorded.iter_served(), recorded.dialect, dialect, req.id)
                return stream_reply(as_recorded, faults, self.scale, req.id, None, None)
        snap = self.standing(task_id)
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
                frames.append((frame(payload_of(s, ep_dialect, dialect, req.id), s.sse_event), gap))

            def released(n: int, pb: Playback = pb, start: int = start) -> None:
                pb.release(start + n - 1)  # the first item sent is the snapshot

            on_sent = released

        return stream_reply(frames, faults, self.scale, req.id, on_sent, pb)

    def list_tasks(self, req: rpc.RpcRequest, shape: Shape, dialect: str) -> Reply:
        recorded = self.recorded_listing(shape, dialect)
        if recorded is not None:
            return recorded_answer(recorded, req.id, self.scale)
        p = req.params or rpc.Params()
        listed: list[Listed] = []
        for tid in self.library.task_ids():
            self.advance(tid)
            snap = self.standing(tid)
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
