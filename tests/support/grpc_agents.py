"""A real a2a-sdk 1.3.0 agent over gRPC (its own ``GrpcHandler``) beside its JSON-RPC app, on 127.0.0.1.

The agent is :class:`tests.support.sdk_agents.ChunkAgent` (same texts, same behaviours), or the
executor given (``executor=``: verify's drift agent over gRPC); its card
lists the gRPC interface first (``HOST:PORT``, no scheme, as the TCK's agent writes it), then
JSON-RPC 1.0. The gRPC server runs on an event loop of its own in a thread; the JSON-RPC app with
uvicorn (:mod:`tests.support.servers`). ``push=True``: push notifications on, as in
:func:`tests.support.sdk_agents.make_agent_app` (a2a-sdk's in-memory config store and httpx sender).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.support.servers import bind_loopback, serve_app


@dataclass
class GrpcAgent:
    url: str  # the HTTP base URL (card, JSON-RPC)
    target: str  # HOST:PORT of the gRPC server
    executor: object


@contextlib.contextmanager
def running_grpc_agent(**kw) -> Iterator[GrpcAgent]:
    import grpc
    from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, a2a_pb2_grpc
    from starlette.applications import Starlette

    from tests.support.sdk_agents import ChunkAgent, pushing

    sock = bind_loopback()
    http_port = sock.getsockname()[1]
    sock.close()
    url = f"http://127.0.0.1:{http_port}"
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, object] = {}
    executor = kw.get("executor") or ChunkAgent(delay=kw.get("delay", 0.0), slow_delay=kw.get("slow_delay", 0.3))
    push = bool(kw.get("push", False))

    async def start() -> None:
        server = grpc.aio.server()
        port = server.add_insecure_port("127.0.0.1:0")
        target = f"127.0.0.1:{port}"
        card = AgentCard(
            name="chunk-agent",
            description="streams chunks",
            version="1.0.0",
            capabilities=AgentCapabilities(streaming=True, push_notifications=push),
            default_input_modes=["text"],
            default_output_modes=["text"],
            skills=[AgentSkill(id="chunks", name="chunks", description="streams chunks", tags=["test"])],
            supported_interfaces=[
                AgentInterface(protocol_binding="GRPC", protocol_version="1.0", url=target),
                AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url + "/"),
            ],
        )
        handler = DefaultRequestHandler(
            agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card, **pushing(push)
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
        await server.start()
        box.update(server=server, target=target, card=card, handler=handler)
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
    app = Starlette(
        routes=create_agent_card_routes(box["card"]) + create_jsonrpc_routes(box["handler"], rpc_url="/")  # type: ignore[arg-type]
    )
    try:
        with serve_app(app, port=http_port) as served:
            assert served == url
            yield GrpcAgent(url, str(box["target"]), executor)
    finally:
        asyncio.run_coroutine_threadsafe(_stopped(box["server"]), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


async def _stopped(server: Any) -> None:
    """The gRPC server stopped, then every task still on its loop cancelled and awaited there. A loop
    closed with tasks pending leaves their coroutines to the garbage collector, which closes them later
    in whatever thread it runs: a2a-sdk's ActiveTask producer then shuts its culsans queue in its
    ``finally``, whose lock a suspended task of the dead loop may hold, and that worker of the suite hung
    for good (py-spy: the main thread in culsans ``Queue.shutdown``, inside an unrelated test)."""
    await server.stop(0)
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
