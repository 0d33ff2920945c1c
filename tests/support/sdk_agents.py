"""Real A2A agents built with a2a-sdk 1.3.0 (a test dependency), modelled on the agent that
produced ``recordings/`` (three chunks on artifact ``art-1``).

What the user's text asks for decides the behaviour:
- ``ask``: the task goes to input-required after WORKING;
- ``boom``: the executor raises after the first chunk (``event: error`` / a plain error item);
- ``reply``: a lone Message, no task (``reply alone``: the Message names no task id either;
  ``reply bare``: neither a task id nor a context id, the official helloworld agent's shape);
- ``slow``: chunks ``SLOW_DELAY`` apart (for drop / resubscribe tests);
- ``many N``: N chunks instead of 3;
- ``big N SIZE``: N chunks of SIZE bytes each, as fast as the agent can send them (memory bounds);
- ``spaced``: each chunk begins with the space before its word (`` chunk-0``), as streamed prose does;
- ``gated``: each chunk waits for the test to release it (``executor.gate.release()``), so a
  test can look at a task while it is being recorded, at a step it chooses;
- anything else: three chunks, then completed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, Message, Part, Role, Task, TaskState, TaskStatus
from starlette.applications import Starlette

from tests.support.servers import closed_port, serve_app


def pushing(on: bool) -> dict[str, Any]:
    """A DefaultRequestHandler's push notifications (a2a-sdk's in-memory config store and httpx sender)
    when ``on``; nothing when not. Every test agent that pushes (JSON-RPC and gRPC) takes them here."""
    if not on:
        return {}
    configs = InMemoryPushNotificationConfigStore()
    # 60 s, not httpx's 5 s: a sender that gives up on a push sends the next one while the first is still
    # on its way, so a loaded machine (a proxy's push round trip reached 11 s at a load of 17 on 2 cores,
    # tests/oracles/test_push_load.py) would reorder what the webhook gets; the agent's order is the point
    client = httpx.AsyncClient(timeout=60.0)
    return {"push_config_store": configs, "push_sender": BasePushNotificationSender(client, configs)}


class ChunkAgent(AgentExecutor):
    def __init__(self, delay: float = 0.0, slow_delay: float = 0.3) -> None:
        self.delay = delay
        self.slow_delay = slow_delay
        self.executions = 0
        self.gate = threading.Semaphore(0)  # released by a test, one chunk of a ``gated`` task each

    async def execute(self, ctx: RequestContext, q: EventQueue) -> None:
        self.executions += 1
        text = ctx.get_user_input()
        if "reply" in text:
            await q.enqueue_event(
                Message(
                    message_id=f"m-{ctx.task_id}",
                    context_id=None if "bare" in text else ctx.context_id,
                    task_id=None if "alone" in text or "bare" in text else ctx.task_id,
                    role=Role.ROLE_AGENT,
                    parts=[Part(text="direct reply")],
                )
            )
            return
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
        if "ask" in text:
            await up.requires_input(up.new_agent_message([Part(text="need more input")]))
            return
        n = 3
        words = text.split()
        if "many" in words:
            n = int(words[words.index("many") + 1])
        size = 0
        if "big" in words:
            n, size = int(words[words.index("big") + 1]), int(words[words.index("big") + 2])
        delay = self.slow_delay if "slow" in text else self.delay
        for i in range(n):
            if delay:
                await asyncio.sleep(delay)
            if "gated" in text and not await asyncio.to_thread(self.gate.acquire, timeout=60):
                raise RuntimeError("the test never released this chunk")
            if "boom" in text and i == 1:
                raise RuntimeError("agent exploded mid-stream")
            chunk = f" chunk-{i}" if "spaced" in text else f"chunk-{i} "
            await up.add_artifact(
                [Part(text=chunk + "x" * size if size else chunk)],
                artifact_id="art-1",
                name="out",
                append=i > 0,
                last_chunk=i == n - 1,
            )
        await up.complete()

    async def cancel(self, ctx: RequestContext, q: EventQueue) -> None:
        await TaskUpdater(q, ctx.task_id, ctx.context_id).cancel()


def make_agent_app(
    base_url: str,
    *,
    streaming: bool = True,
    delay: float = 0.0,
    slow_delay: float = 0.3,
    rpc_urls: tuple[str, ...] = ("/",),
    push: bool = False,
    rest: bool = False,
):
    """An a2a-sdk agent app answering both dialects at ``/`` (and each other path of
    ``rpc_urls``: one agent, one task store, behind several paths); returns (app, executor).
    ``push``: push notifications on (a2a-sdk's in-memory config store and httpx sender);
    ``rest``: HTTP+JSON too, under ``/a2a/rest``."""
    executor = ChunkAgent(delay=delay, slow_delay=slow_delay)
    card = AgentCard(
        name="chunk-agent",
        description="streams chunks",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=push),
        default_input_modes=["text"],
        default_output_modes=["text"],
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version=v, url=base_url + "/") for v in ("1.0", "0.3")
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card, **pushing(push)
    )
    routes = create_agent_card_routes(card) + [
        r for u in rpc_urls for r in create_jsonrpc_routes(handler, rpc_url=u, enable_v0_3_compat=True)
    ]
    app = Starlette(routes=routes + (create_rest_routes(handler, path_prefix="/a2a/rest") if rest else []))
    return app, executor


@contextlib.contextmanager
def serve_executor(
    executor: AgentExecutor,
    *,
    name: str,
    description: str,
    interfaces: Sequence[tuple[str, str, str]],
    rest_prefix: str | None = None,
    v03_compat: bool = True,
) -> Iterator[str]:
    """``executor`` as a real a2a-sdk 1.3.0 agent on 127.0.0.1, its SDK task store in memory: JSON-RPC
    at ``/``, HTTP+JSON under ``rest_prefix`` when given; its card lists ``interfaces`` as
    ``(binding, version, path)`` in that order. Yields its URL."""
    port = closed_port()  # nothing listens there; bound later by the server
    url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name=name,
        description=description,
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        supported_interfaces=[
            AgentInterface(protocol_binding=binding, protocol_version=version, url=url + path)
            for binding, version, path in interfaces
        ],
    )
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_agent_card_routes(card)
    if rest_prefix is not None:
        routes += create_rest_routes(handler, path_prefix=rest_prefix)
    routes += create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=v03_compat)
    with serve_app(Starlette(routes=routes), port=port):
        yield url


@contextlib.contextmanager
def two_binding_agent() -> Iterator[str]:
    """A real a2a-sdk 1.3.0 agent: HTTP+JSON at /a2a/rest (first in its card), JSON-RPC at /; yields its URL."""
    interfaces = [("HTTP+JSON", "1.0", "/a2a/rest"), ("JSONRPC", "1.0", "/")]
    with serve_executor(
        ChunkAgent(),
        name="two-bindings",
        description="HTTP+JSON first",
        interfaces=interfaces,
        rest_prefix="/a2a/rest",
        v03_compat=False,
    ) as url:
        yield url
