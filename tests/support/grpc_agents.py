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

from tests.support.grpc_loop import loop_in_thread, stop_serving
from tests.support.servers import closed_port, serve_app


@dataclass
class GrpcAgent:
    url: str  # the HTTP base URL (card, JSON-RPC)
    target: str  # HOST:PORT of the gRPC server
    executor: object
    loop: asyncio.AbstractEventLoop  # the gRPC server's own (in a thread)


@contextlib.contextmanager
def running_grpc_agent(**kw) -> Iterator[GrpcAgent]:
    import grpc
    from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, a2a_pb2_grpc
    from starlette.applications import Starlette

    from tests.support.sdk_agents import ChunkAgent, pushing

    http_port = closed_port()  # nothing listens there; bound later by the server
    url = f"http://127.0.0.1:{http_port}"
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

    loop, thread = loop_in_thread()
    asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
    app = Starlette(
        routes=create_agent_card_routes(box["card"]) + create_jsonrpc_routes(box["handler"], rpc_url="/")  # type: ignore[arg-type]
    )
    try:
        with serve_app(app, port=http_port) as served:
            assert served == url
            yield GrpcAgent(url, str(box["target"]), executor, loop)
    finally:
        stop_serving(box["server"], loop, thread)  # no task left pending on the loop (tests.support.grpc_loop)
