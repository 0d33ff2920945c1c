"""A real a2a-sdk 1.3.0 agent whose behaviour drifts from its recording in one way at a time (``verify``).

:class:`DriftAgent` streams what an opencode-style agent streams, under ``metadata.opencode``:
reasoning, one tool call (a data part: tool and status), then the answer in three deltas, the last
with ``lastChunk``, then completed. The user's text picks the case: ``ask`` goes to input-required
after WORKING; ``boom`` fails with an A2A error after the first answer chunk; anything else streams
as above. :attr:`DriftAgent.fault` (set by a test between runs: the agent is in-process) changes
one thing, each one a regression users met (issue 32):

- ``drop-answer``: the answer's artifact never comes; ``double-answer``: the answer comes twice;
- ``no-last-chunk``: the last delta lacks ``lastChunk``; ``skip-working``: no WORKING status;
- ``never-ask``: ``ask`` completes instead of asking; ``error-code``: ``boom`` fails with another A2A error;
- ``rename``: the answer's artifact has another name; ``reasoning-in-answer``: the reasoning is sent
  on the answer channel; ``cut``: the stream ends after WORKING (the executor returns, the SDK
  closes it cleanly); ``slow``: the first event comes :data:`SLOW` seconds late;
  ``tool-status``: the tool call ends with another status; ``sampling``: every other execution
  renames the answer (an agent whose runs disagree among themselves: flaky, not regressed;
  ``sampling:FAULT``: every other execution has FAULT);
  ``reword``: the answer says the same in other words (:data:`REWORDED`): no drift of the
  contract, only of its text (what ``verify --update`` adopts); ``rest-error-shape``: over
  HTTP+JSON only, ``boom`` fails with INTERNAL where JSON-RPC still says UNSUPPORTED_OPERATION (a
  binding's error shape changed by an SDK upgrade: ``verify --across-bindings`` names it).

All of them an a2a-sdk executor can produce, so no hand-written agent is needed here.

:attr:`DriftAgent.entered` is set when an execution begins; while :attr:`DriftAgent.hold` is set to
an unset event, each execution waits for it first (a test acts while a verify is in flight).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part, Task, TaskState, TaskStatus
from a2a.utils.errors import InternalError, InvalidParamsError, UnsupportedOperationError
from google.protobuf import struct_pb2

from tests.support.sdk_agents import serve_executor

ANSWER = ["The answer ", "is ", "42."]
REWORDED = ["The answer ", "is ", "forty-two."]
REASONING = "The user asks for the answer."
SLOW = 0.8
FAULTS = (
    "drop-answer",
    "double-answer",
    "no-last-chunk",
    "skip-working",
    "never-ask",
    "error-code",
    "rename",
    "reasoning-in-answer",
    "cut",
    "slow",
    "tool-status",
    "rest-error-shape",
)


def _meta(channel: str) -> dict[str, object]:
    return {"opencode": {"channel": channel, "message_id": "m1"}}


def _data(value: dict[str, object]) -> Part:
    s = struct_pb2.Value()
    s.struct_value.update(value)
    return Part(data=s)


def _over_http_json(ctx: RequestContext) -> bool:
    """Whether the request came over HTTP+JSON: the SDK's JSON-RPC dispatcher names the JSON-RPC
    request id in the call's state, its REST routes do not."""
    return "request_id" not in ctx.call_context.state


class DriftAgent(AgentExecutor):
    def __init__(self) -> None:
        self.fault: str | None = None
        self.executions = 0
        self.entered = threading.Event()
        self.hold: threading.Event | None = None

    async def execute(self, ctx: RequestContext, q: EventQueue) -> None:
        fault, text = self.fault, ctx.get_user_input()
        self.executions += 1
        self.entered.set()
        if self.hold is not None:
            await asyncio.to_thread(self.hold.wait, 60)
        if fault is not None and fault.startswith("sampling"):
            fault = (fault.partition(":")[2] or "rename") if self.executions % 2 == 0 else None
        if fault == "slow":
            await asyncio.sleep(SLOW)
        await q.enqueue_event(
            Task(
                id=ctx.task_id,
                context_id=ctx.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[ctx.message],
            )
        )
        up = TaskUpdater(q, ctx.task_id, ctx.context_id)
        if fault != "skip-working":
            await up.start_work()
        if fault == "cut":
            return
        if "ask" in text:
            if fault == "never-ask":
                await up.complete()
            else:
                await up.requires_input(up.new_agent_message([Part(text="which answer?")]))
            return
        await self._answer(ctx, up, fault, boom="boom" in text)
        await up.complete()

    async def _answer(self, ctx: RequestContext, up: TaskUpdater, fault: str | None, *, boom: bool) -> None:
        answer, reasoning, tool = f"{ctx.task_id}:stream", f"{ctx.task_id}:stream:reasoning", "tool-1"
        if fault == "reasoning-in-answer":
            await up.add_artifact([Part(text=REASONING)], artifact_id=answer, metadata=_meta("final_answer"))
        else:
            await up.add_artifact([Part(text=REASONING)], artifact_id=reasoning, metadata=_meta("reasoning"))
        status = "error" if fault == "tool-status" else "completed"
        await up.add_artifact(
            [_data({"tool": "search", "call_id": "c1", "status": status})],
            artifact_id=tool,
            name="search",
            metadata=_meta("tool_call"),
        )
        if fault == "drop-answer":
            return
        name = "reply" if fault == "rename" else "answer"
        for again in range(2 if fault == "double-answer" else 1):
            for i, chunk in enumerate(REWORDED if fault == "reword" else ANSWER):
                if boom and i == 1:
                    if fault == "rest-error-shape" and _over_http_json(ctx):
                        raise InternalError("agent failed")
                    raise (InvalidParamsError if fault == "error-code" else UnsupportedOperationError)("agent failed")
                last = i == len(ANSWER) - 1 and fault != "no-last-chunk"  # REWORDED: as many chunks
                await up.add_artifact(
                    [Part(text=chunk)],
                    artifact_id=answer,
                    name=name,
                    append=i > 0 or again > 0,
                    last_chunk=last,
                    metadata=_meta("final_answer"),
                )

    async def cancel(self, ctx: RequestContext, q: EventQueue) -> None:
        await TaskUpdater(q, ctx.task_id, ctx.context_id).cancel()


@contextlib.contextmanager
def drift_agent() -> Iterator[tuple[str, DriftAgent]]:
    """The agent on 127.0.0.1: JSON-RPC (v1.0, v0.3) at ``/``, HTTP+JSON (v1.0) at ``/rest``; yields
    its URL and its executor (set ``fault`` on it)."""
    executor = DriftAgent()
    with serve_executor(
        executor,
        name="drift-agent",
        description="streams the opencode channels contract; drifts on demand",
        interfaces=[("JSONRPC", "1.0", "/"), ("HTTP+JSON", "1.0", "/rest"), ("JSONRPC", "0.3", "/")],
        rest_prefix="/rest",
    ) as url:
        yield url, executor
