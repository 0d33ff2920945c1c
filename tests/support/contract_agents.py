"""A real a2a-sdk 1.3.0 agent that streams the opencode contracts (docs/design.md section 4).

Its executor emits what an opencode-style agent streams: reasoning, then the answer in deltas,
under ``metadata.opencode`` (channels) or ``metadata.shared.stream`` (blocks). Its task store is
a2a-sdk's own (``InMemoryTaskStore`` fed by the SDK's TaskManager), which folds those events
naively, as the SDK does for any agent: every ``append: true`` chunk extends the stored artifact,
the final snapshot (sent with ``append: true`` and the full text) included, and the user's echo
stays in the answer. So the agent's GetTask answer differs from what it streamed, exactly as a
real agent built this way does (issue 30): the stream is right, the stored copy is not.

The user's text picks the contract: ``channels``, ``blocks``, ``echo-user``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part, Task, TaskState, TaskStatus

from tests.support.sdk_agents import serve_executor

ANSWER = ["The answer ", "is ", "42."]
REASONING = "The user asks for the answer."
ECHO_ANSWER = "pong"
"""What each contract's stream makes the final answer: ``"".join(ANSWER)``, or ``pong`` for echo-user."""


def _channels(channel: str, message_id: str, **more: str) -> dict:
    return {"opencode": {"channel": channel, "message_id": message_id, **more}}


def _blocks(block_type: str, seq: int, **more: str) -> dict:
    return {
        "shared": {
            "stream": {"block_type": block_type, "message_id": "msg-1", "event_id": f"e{seq}", "sequence": seq, **more}
        }
    }


class ContractAgent(AgentExecutor):
    async def execute(self, ctx: RequestContext, q: EventQueue) -> None:
        text = ctx.get_user_input()
        await q.enqueue_event(
            Task(
                id=ctx.task_id,
                context_id=ctx.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[ctx.message],
            )
        )
        up = TaskUpdater(q, ctx.task_id, ctx.context_id)
        await up.start_work()
        answer, reasoning = f"{ctx.task_id}:stream", f"{ctx.task_id}:stream:reasoning"
        if "blocks" in text:
            await up.add_artifact([Part(text=REASONING)], artifact_id=reasoning, metadata=_blocks("reasoning", 1))
            for i, chunk in enumerate(ANSWER):
                await up.add_artifact(
                    [Part(text=chunk)], artifact_id=answer, append=i > 0, metadata=_blocks("text", i + 2)
                )
            # the trap: the final snapshot with append=true and the FULL text
            full = _blocks("text", len(ANSWER) + 2, source="final_snapshot")
            await up.add_artifact(
                [Part(text="".join(ANSWER))], artifact_id=answer, append=True, last_chunk=True, metadata=full
            )
        elif "echo-user" in text:
            # the user's own text echoed on the answer channel first (a client must not show it)
            await up.add_artifact(
                [Part(text=text)], artifact_id=answer, metadata=_channels("final_answer", "u1", role="user")
            )
            await up.add_artifact(
                [Part(text=ECHO_ANSWER)], artifact_id=answer, append=True, metadata=_channels("final_answer", "m1")
            )
        else:  # channels
            await up.add_artifact([Part(text=REASONING)], artifact_id=reasoning, metadata=_channels("reasoning", "m1"))
            for i, chunk in enumerate(ANSWER):
                meta = _channels("final_answer", "m1", event_type="delta")
                await up.add_artifact([Part(text=chunk)], artifact_id=answer, append=i > 0, metadata=meta)
        await up.complete()

    async def cancel(self, ctx: RequestContext, q: EventQueue) -> None:
        await TaskUpdater(q, ctx.task_id, ctx.context_id).cancel()


@contextlib.contextmanager
def contract_agent() -> Iterator[str]:
    """The agent on 127.0.0.1 (JSON-RPC, v1.0 and v0.3); yields its URL."""
    with serve_executor(
        ContractAgent(),
        name="contract-agent",
        description="streams the opencode contracts; stores them as the SDK does",
        interfaces=[("JSONRPC", "1.0", "/"), ("JSONRPC", "0.3", "/")],
    ) as url:
        yield url
