# Copyright The A2A Authors (a2aproject/a2a-tck). Licensed under the Apache License, Version 2.0 (the TCK's LICENSE);
# ported to a2a-sdk 1.3.0 by the a2a-tape project (../shared/oracles/tck1-sut/sut_agent.py), copied here as it is
# (formatted by ruff, its three unused imports removed; the code otherwise unchanged).
"""A2A TCK 1.0 System Under Test, ported to the released a2a-sdk 1.3.0 (PyPI).

Source: a2aproject/a2a-tck, branch 1.0-dev, commit 357c4a8, `sut/a2a-python/sut_agent.py` (generated from the
TCK's Gherkin scenarios). The original is written against an unreleased a2a-python checkout
(`a2a-sdk = { path = "../../../a2a-python" }` in its pyproject) and does not import on a2a-sdk 1.3.0. The agent
logic (the messageId-prefix routing of TckAgentExecutor, every branch, its texts, parts and states), the card
(name, description, version, provider, capabilities, modes, skill, the three interfaces JSONRPC at `/`,
HTTP+JSON at `/a2a/rest`, GRPC at http_port+1) and the three transports are kept as they were. What changed,
and why:

1. `a2a.server.apps` (A2AStarletteApplication, A2ARESTFastAPIApplication) does not exist in 1.3.0: the app is
   `Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url='/') +
   create_rest_routes(handler, path_prefix='/a2a/rest'))` (a2a.server.routes). No v0.3 compatibility is
   enabled, as the original enables none.
2. DefaultRequestHandler (1.3.0: DefaultRequestHandlerV2) requires `agent_card=`; it is given the same card.
3. GrpcHandler(agent_card, request_handler) -> GrpcHandler(request_handler) (1.3.0's signature).
4. 1.3.0's request handler refuses a status update for a task that does not exist yet ("Agent should enqueue
   Task before TaskStatusUpdateEvent event"); the original relies on the SDK creating the task. So before the
   first event of a new task (every branch but the direct-message and reject ones) the executor enqueues
   Task(id, context_id, status SUBMITTED, history=[the message]), what the SDK's older task manager made.
5. Listening: the original binds 0.0.0.0 (HTTP) and [::] (gRPC) and names `localhost` in the card. Here the
   host and port come from argv (`sut_agent.py HOST PORT`, default 127.0.0.1 9999; SUT_HOST=host:port and
   GRPC_PORT still work as before) and both servers bind that host only (loopback), so the card's URLs are
   http://HOST:PORT, http://HOST:PORT/a2a/rest and HOST:PORT+1 (no scheme, as in the original). uvicorn's log
   level is `warning` (the original: `info`, one line per request).
6. SUT_PUSH=1 turns push notifications on: the card says so, and the handler gets a2a-sdk 1.3.0's
   InMemoryPushNotificationConfigStore and BasePushNotificationSender (no push-URL screening, so a webhook on
   loopback is accepted). Off by default, as in the original. (As ../shared/oracles/tck1-sut/sut_agent.py has it.)
"""

import asyncio
import logging
import os
import sys

import a2a.types.a2a_pb2_grpc as a2a_grpc
import grpc.aio
import uvicorn
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks.base_push_notification_sender import BasePushNotificationSender
from a2a.server.tasks.inmemory_push_notification_config_store import InMemoryPushNotificationConfigStore
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import (
    A2AError,
)
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Value
from starlette.applications import Starlette

# SUT_PUSH=1 turns push notifications on (off by default, as the TCK's generated SUT has them).
PUSH = os.environ.get("SUT_PUSH") == "1"

REST_URL = "/a2a/rest"

_STREAMING_TIMEOUT_S = 2

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger("TckSutAgent")

# Branches that answer without a task (port change 4: no initial Task for these).
_NO_TASK_PREFIXES = ("tck-message-response", "tck-reject-task")


class TckAgentExecutor(AgentExecutor):
    """TCK agent executor with messageId-prefix routing."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Execute the agent's logic based on the messageId prefix."""
        task_id = context.task_id
        context_id = context.context_id
        if task_id is None or context_id is None:
            return

        updater = TaskUpdater(event_queue, task_id, context_id)
        message = context.message
        if message is None:
            await self._initial_task(context, event_queue)
            await updater.complete(updater.new_agent_message([Part(text="No message provided")]))
            return

        message_id = message.message_id
        if not message_id.startswith(_NO_TASK_PREFIXES):
            await self._initial_task(context, event_queue)

        if message_id.startswith("tck-stream-artifact-chunked"):
            await updater.start_work()
            await updater.add_artifact(parts=[Part(text="chunk-1 ")], append=True)
            await updater.add_artifact(parts=[Part(text="chunk-2")], append=True, last_chunk=True)
            await updater.complete()
            return

        if message_id.startswith("test-resubscribe-message-id"):
            await updater.start_work()
            await asyncio.sleep(4)
            await updater.complete()
            return

        if message_id.startswith("tck-stream-artifact-text"):
            await updater.start_work()
            await updater.add_artifact(parts=[Part(text="Streamed text content")])
            await updater.complete()
            return

        if message_id.startswith("tck-stream-artifact-file"):
            await updater.start_work()
            await updater.add_artifact(parts=[Part(raw=b"tck", media_type="text/plain", filename="output.txt")])
            await updater.complete()
            return

        if message_id.startswith("tck-stream-ordering-001"):
            await updater.start_work()
            await updater.add_artifact(parts=[Part(text="Ordered output")])
            await updater.complete()
            return

        if message_id.startswith("tck-artifact-file-url"):
            await updater.add_artifact(
                parts=[Part(url="https://example.com/output.txt", media_type="text/plain", filename="output.txt")]
            )
            await updater.complete()
            return

        if message_id.startswith("tck-message-response"):
            await event_queue.enqueue_event(updater.new_agent_message([Part(text="Direct message response")]))
            return

        if message_id.startswith("tck-input-required"):
            await updater.requires_input()
            return

        if message_id.startswith("tck-complete-task"):
            await updater.complete(updater.new_agent_message([Part(text="Hello from TCK")]))
            return

        if message_id.startswith("tck-artifact-text"):
            await updater.add_artifact(parts=[Part(text="Generated text content")])
            await updater.complete()
            return

        if message_id.startswith("tck-artifact-file"):
            await updater.add_artifact(parts=[Part(raw=b"tck", media_type="text/plain", filename="output.txt")])
            await updater.complete()
            return

        if message_id.startswith("tck-artifact-data"):
            await updater.add_artifact(parts=[Part(data=json_format.Parse('{"key": "value", "count": 42}', Value()))])
            await updater.complete()
            return

        if message_id.startswith("tck-reject-task"):
            raise A2AError("rejected")

        if message_id.startswith("tck-stream-001"):
            await updater.start_work()
            await updater.add_artifact(parts=[Part(text="Stream hello from TCK")])
            await updater.complete()
            return

        if message_id.startswith("tck-stream-002"):
            await updater.complete()
            return

        if message_id.startswith("tck-stream-003"):
            await updater.start_work()
            await updater.add_artifact(parts=[Part(text="Stream task lifecycle")])
            await updater.complete()
            return

        # Default: complete the task with an echo response
        await updater.complete(updater.new_agent_message([Part(text="Unhandled messageId prefix: " + message_id)]))

    @staticmethod
    async def _initial_task(context: RequestContext, event_queue: EventQueue) -> None:
        """Port change 4: a2a-sdk 1.3.0 wants the Task enqueued before its first status update."""
        if context.current_task is not None:
            return
        history = [context.message] if context.message is not None else []
        await event_queue.enqueue_event(
            Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=history,
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel a task."""
        task_id = context.task_id
        context_id = context.context_id
        if task_id is None or context_id is None:
            return
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.cancel()


def _get_env(name: str, default: str) -> str:
    value = os.environ.get(name, "")
    return value if value else default


async def main() -> None:
    """Start the TCK SUT agent with all three transports."""
    if len(sys.argv) > 2:  # port change 5
        host = f"{sys.argv[1]}:{sys.argv[2]}"
    else:
        host = _get_env("SUT_HOST", "127.0.0.1:9999")
    bind_host = host.rsplit(":", 1)[0] if ":" in host else "127.0.0.1"
    http_port = int(host.rsplit(":", 1)[-1]) if ":" in host else 9999
    grpc_port = int(_get_env("GRPC_PORT", str(http_port + 1)))

    agent_card = AgentCard(
        name="A2A Python SDK System Under Test (SUT)",
        description="Auto-generated System Under Test for A2A TCK conformance",
        version="1.0.0",
        provider=AgentProvider(
            organization="A2A Project",
            url="https://github.com/a2aproject",
        ),
        supported_interfaces=[
            AgentInterface(
                url=f"http://{host}",
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            ),
            AgentInterface(
                url=f"http://{host}{REST_URL}",
                protocol_binding="HTTP+JSON",
                protocol_version="1.0",
            ),
            AgentInterface(
                url=f"{host.rsplit(':', 1)[0]}:{grpc_port}",
                protocol_binding="GRPC",
                protocol_version="1.0",
            ),
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=PUSH,
        ),
        default_input_modes=["text"],
        default_output_modes=["text"],
        skills=[
            AgentSkill(
                id="tck",
                name="TCK Conformance",
                description="Handles TCK conformance test messages",
                tags=["tck"],
            ),
        ],
    )

    task_store = InMemoryTaskStore()
    push = {}
    if (
        PUSH
    ):  # SUT_PUSH=1: push notifications on (the a2a-sdk's in-memory config store and its sender; no URL screening)
        import httpx

        push_store = InMemoryPushNotificationConfigStore()
        push = {
            "push_config_store": push_store,
            "push_sender": BasePushNotificationSender(httpx.AsyncClient(timeout=10), push_store),
        }
    request_handler = DefaultRequestHandler(  # port change 2
        agent_executor=TckAgentExecutor(),
        task_store=task_store,
        agent_card=agent_card,
        **push,
    )

    # JSON-RPC at /, HTTP+JSON under /a2a/rest, the card at /.well-known/agent-card.json (port change 1)
    main_app = Starlette(
        routes=create_agent_card_routes(agent_card)
        + create_jsonrpc_routes(request_handler, rpc_url="/")
        + create_rest_routes(request_handler, path_prefix=REST_URL)
    )

    config = uvicorn.Config(main_app, host=bind_host, port=http_port, log_level="warning")
    uvicorn_server = uvicorn.Server(config)

    # gRPC
    grpc_server = grpc.aio.server()
    grpc_server.add_insecure_port(f"{bind_host}:{grpc_port}")
    servicer = GrpcHandler(request_handler)  # port change 3
    a2a_grpc.add_A2AServiceServicer_to_server(servicer, grpc_server)

    logger.info(
        "Starting HTTP server on %s:%s and gRPC on %s:%s...",
        bind_host,
        http_port,
        bind_host,
        grpc_port,
    )

    await grpc_server.start()
    try:
        await asyncio.gather(uvicorn_server.serve(), grpc_server.wait_for_termination())
    finally:
        await grpc_server.stop(0)


if __name__ == "__main__":
    asyncio.run(main())
