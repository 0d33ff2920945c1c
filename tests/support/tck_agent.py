"""The system under test for the official A2A TCK: a real a2a-sdk 1.3.0 agent on 127.0.0.1.

The TCK ships its own python SUT (``python-sut/tck_core_agent``), written for an older a2a-sdk; it does
not import on 1.3.0. This agent behaves the same way with the 1.3.0 API:

- every message to an unknown task creates a task (SUBMITTED snapshot, then WORKING);
- after a short pause it adds one text artifact and completes with an agent message;
- a message to a task that already ended changes nothing;
- cancel is allowed while the task is WORKING (the pause is what makes that observable), refused with
  TaskNotCancelableError once it ended;
- the card declares streaming and, like the TCK's SUT, a bearer and an OAuth2 security scheme (declared,
  not enforced), one skill, and both dialects on JSON-RPC at ``/``.

Run it by hand with ``python -m tests.support.tck_agent --port 9999``.
"""

from __future__ import annotations

import asyncio

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    AuthorizationCodeOAuthFlow,
    HTTPAuthSecurityScheme,
    OAuth2SecurityScheme,
    OAuthFlows,
    Part,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Task,
    TaskNotCancelableError,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette

# Long enough for a client to see WORKING and cancel, short enough for a few hundred TCK tests.
WORK_DELAY = 0.3

_ENDED = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
}


def answer_for(text: str) -> str:
    """The artifact text for a user's text (the TCK's SUT greets; so does this one)."""
    if not text.strip():
        return "Hello! Please provide a message for me to respond to."
    return f"Hello World! You said: '{text}'."


class TckAgent(AgentExecutor):
    def __init__(self, work_delay: float = WORK_DELAY) -> None:
        self.work_delay = work_delay
        self._canceled: set[str] = set()

    async def execute(self, ctx: RequestContext, q: EventQueue) -> None:
        assert ctx.task_id and ctx.context_id  # the request handler assigns both before executing
        task = ctx.current_task
        if task is not None and task.status.state in _ENDED:
            return
        if task is None:
            await q.enqueue_event(
                Task(
                    id=ctx.task_id,
                    context_id=ctx.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[ctx.message] if ctx.message else [],
                )
            )
        up = TaskUpdater(q, ctx.task_id, ctx.context_id)
        await up.start_work()
        await asyncio.sleep(self.work_delay)
        if ctx.task_id in self._canceled:
            return
        text = answer_for(ctx.get_user_input())
        await up.add_artifact([Part(text=text)], name="response", last_chunk=True)
        await up.complete(up.new_agent_message([Part(text=text)]))

    async def cancel(self, ctx: RequestContext, q: EventQueue) -> None:
        assert ctx.task_id and ctx.context_id
        task = ctx.current_task
        if task is not None and task.status.state in _ENDED:
            raise TaskNotCancelableError(message=f"task is {TaskState.Name(task.status.state)}")
        self._canceled.add(ctx.task_id)
        await TaskUpdater(q, ctx.task_id, ctx.context_id).cancel()


def agent_card(base_url: str) -> AgentCard:
    bearer = SecurityScheme(
        http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer", description="HTTP bearer token")
    )
    oauth2 = SecurityScheme(
        oauth2_security_scheme=OAuth2SecurityScheme(
            description="OAuth 2.0",
            flows=OAuthFlows(
                authorization_code=AuthorizationCodeOAuthFlow(
                    authorization_url="https://auth.example.com/authorize",
                    token_url="https://auth.example.com/token",
                    scopes={"read": "read access", "write": "write access"},
                )
            ),
        )
    )
    return AgentCard(
        name="tck-agent",
        description="a2a-sdk 1.3.0 agent with the TCK core agent's behaviour",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        skills=[
            AgentSkill(
                id="greet",
                name="greet",
                description="answers every message with one artifact",
                tags=["tck", "testing"],
                examples=["hello"],
            )
        ],
        security_schemes={"bearerAuth": bearer, "oauth2": oauth2},
        security_requirements=[
            SecurityRequirement(schemes={"bearerAuth": StringList(list=[])}),
            SecurityRequirement(schemes={"oauth2": StringList(list=["read", "write"])}),
        ],
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version=v, url=base_url + "/") for v in ("1.0", "0.3")
        ],
    )


def make_tck_agent_app(base_url: str, *, work_delay: float = WORK_DELAY):
    """The agent's Starlette app for ``base_url``; returns (app, executor)."""
    executor = TckAgent(work_delay=work_delay)
    card = agent_card(base_url)
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(
        routes=create_agent_card_routes(card, cache_control="public, max-age=60")
        + create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True)
    )
    return app, executor


def main(argv: list[str] | None = None) -> None:
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9999)
    args = parser.parse_args(argv)
    app, _ = make_tck_agent_app(f"http://127.0.0.1:{args.port}")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
