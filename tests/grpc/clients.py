"""Clients for the gRPC tests: the a2a-sdk 1.3.0 client over gRPC (as a user's code runs it) and
raw calls on bytes (to see exactly what crossed: messages, metadata, status, trailers)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
from a2a.client import ClientConfig
from a2a.client.client_factory import create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, a2a_pb2
from google.protobuf import json_format

PATH = "/lf.a2a.v1.A2AService/"


def card(url: str) -> dict[str, Any]:
    return httpx.get(url + "/.well-known/agent-card.json").json()


def sdk_send(url: str, text: str, *, message_id: str = "m-1", stream: bool = True, interceptors=()) -> list[dict]:
    """The a2a-sdk client, gRPC only, from the card at ``url``: each answer as its JSON mapping
    (ids as they came)."""

    async def run() -> list[dict]:
        config = ClientConfig(
            streaming=stream,
            grpc_channel_factory=lambda u: grpc.aio.insecure_channel(u, interceptors=list(interceptors)),
            supported_protocol_bindings=["GRPC"],
        )
        client = await create_client(url, client_config=config)
        msg = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])
        out = []
        try:
            async for ev in client.send_message(SendMessageRequest(message=msg)):
                out.append(json_format.MessageToDict(ev))
        finally:
            await client.close()
        return out

    return asyncio.run(run())


def sdk_get(url: str, task_id: str) -> dict:
    async def run() -> dict:
        config = ClientConfig(
            grpc_channel_factory=lambda u: grpc.aio.insecure_channel(u), supported_protocol_bindings=["GRPC"]
        )
        client = await create_client(url, client_config=config)
        try:
            return json_format.MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
        finally:
            await client.close()

    return asyncio.run(run())


@dataclass
class Raw:
    """One call as a client saw it on the wire."""

    messages: list[bytes] = field(default_factory=list)
    initial: list[tuple[str, Any]] = field(default_factory=list)
    trailers: list[tuple[str, Any]] = field(default_factory=list)
    code: str = "OK"
    details: str = ""


def raw_call(
    target: str,
    method: str,
    request: bytes,
    *,
    streaming: bool,
    metadata: tuple[tuple[str, Any], ...] = (("a2a-version", "1.0"),),
    timeout: float = 20.0,
    after_each=None,
    interceptors=None,
) -> Raw:
    """A call on bytes; ``after_each(k)`` runs after the k-th message arrived (k from 1);
    ``interceptors(target)`` gives the channel's interceptors (a recording client)."""

    async def run() -> Raw:
        out = Raw()
        chosen = interceptors(target) if interceptors is not None else None
        async with grpc.aio.insecure_channel(target, interceptors=chosen) as channel:
            path = method if method.startswith("/") else PATH + method
            if streaming:
                call = channel.unary_stream(path)(request, metadata=metadata, timeout=timeout)
            else:
                call = channel.unary_unary(path)(request, metadata=metadata, timeout=timeout)
            try:
                if streaming:
                    async for m in call:
                        out.messages.append(m)
                        if after_each is not None:
                            after_each(len(out.messages))
                else:
                    out.messages.append(await call)
            except grpc.aio.AioRpcError:
                pass
            out.initial = list(await call.initial_metadata() or ())
            out.trailers = list(await call.trailing_metadata() or ())
            out.code = (await call.code()).name
            out.details = await call.details() or ""
        return out

    return asyncio.run(run())


def send_request(text: str, message_id: str = "m-raw") -> bytes:
    msg = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])
    return SendMessageRequest(message=msg).SerializeToString()


def stream_response(raw: bytes) -> dict:
    r = a2a_pb2.StreamResponse()
    r.ParseFromString(raw)
    return json_format.MessageToDict(r)
