"""A fake OpenCode server: the upstream opencode-a2a 1.4.0 needs, which we cannot run here.

OpenCode itself (``opencode serve``) is a JavaScript/Bun program with a model behind it; neither is in a
registry we can install from. This is a hand-written stand-in for the few HTTP endpoints opencode-a2a
calls on a streamed message, answering as OpenCode does in shape (``opencode_a2a.opencode_upstream_client``
is the reference for what it reads):

- ``POST /session``: a new session ``{"id", "title", ...}``;
- ``GET /event``: the server's event bus (SSE, one JSON object per ``data:``): for each prompt, a
  reasoning part, a tool part (``bash``, completed), the answer as a text part in three deltas, then
  ``session.idle``, which ends the task;
- ``POST /session/{id}/message``: the prompt; it answers the assistant message (``info`` and ``parts``)
  once its events are on the bus;
- anything else: an empty JSON object (logged in :attr:`FakeOpenCode.calls`).

The bus keeps every event, and each listener gets them all from the first: opencode-a2a may subscribe just
after it prompts (a race no sleep should settle), and it reads only the events of its own session (a new
one per task). The non-streaming path does not listen at all.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

ANSWER = ["The answer ", "is ", "42."]


class FakeOpenCode:
    """The fake's state: sessions, the event bus, and every call it got."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.changed = asyncio.Condition()
        self._ids = itertools.count(1)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/event", self.event_stream, methods=["GET"]),
                Route("/session", self.create_session, methods=["POST"]),
                Route("/session/{sid}/message", self.prompt, methods=["POST"]),
                Route("/{path:path}", self.anything, methods=["GET", "POST", "DELETE", "PATCH", "PUT"]),
            ]
        )

    async def anything(self, request: Request) -> Response:
        self.calls.append(f"{request.method} {request.url.path}")
        return JSONResponse({})

    async def create_session(self, request: Request) -> Response:
        self.calls.append("POST /session")
        sid = f"ses_fake{next(self._ids)}"
        return JSONResponse({"id": sid, "title": "fake session", "version": "0.0.0-fake", "time": {"created": 0}})

    async def event_stream(self, request: Request) -> Response:
        self.calls.append("GET /event")

        async def gen() -> AsyncIterator[bytes]:
            seen = 0
            yield b": connected\n\n"
            while True:
                async with self.changed:
                    await self.changed.wait_for(lambda at=seen: len(self.events) > at)
                    new = self.events[seen:]
                    seen = len(self.events)
                for ev in new:
                    yield b"data: " + json.dumps(ev).encode() + b"\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def prompt(self, request: Request) -> Response:
        sid = request.path_params["sid"]
        self.calls.append("POST /session/{sid}/message")
        body = await request.json()
        text = "".join(p.get("text", "") for p in body.get("parts", []) if isinstance(p, dict))
        mid = f"msg_fake{next(self._ids)}"
        async with self.changed:
            self.events.extend(_script(sid, mid, text))
            self.changed.notify_all()
        info = {"id": mid, "sessionID": sid, "role": "assistant", "time": {"created": 0, "completed": 1}}
        parts = [{"id": f"{mid}-text", "sessionID": sid, "messageID": mid, "type": "text", "text": "".join(ANSWER)}]
        return JSONResponse({"info": info, "parts": parts})


def _part(sid: str, mid: str, pid: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"id": f"{mid}-{pid}", "sessionID": sid, "messageID": mid, "type": kind, **fields}


def _script(sid: str, mid: str, text: str) -> list[dict[str, Any]]:
    """What OpenCode's bus carries for one prompt: reasoning, a tool call, the answer in deltas, idle."""
    updated = "message.part.updated"
    out: list[dict[str, Any]] = [
        {"type": "message.updated", "properties": {"info": {"id": mid, "sessionID": sid, "role": "assistant"}}},
        {
            "type": updated,
            "properties": {"part": _part(sid, mid, "think", "reasoning", text=f"Thinking about {text!r}.")},
        },
        {
            "type": updated,
            "properties": {
                "part": _part(
                    sid,
                    mid,
                    "tool",
                    "tool",
                    tool="bash",
                    callID="call_fake1",
                    state={"status": "completed", "input": {"command": "echo 42"}, "output": "42\n", "title": "echo"},
                )
            },
        },
    ]
    so_far = ""
    for chunk in ANSWER:
        so_far += chunk
        out.append(
            {"type": updated, "properties": {"part": _part(sid, mid, "text", "text", text=so_far), "delta": chunk}}
        )
    out.append({"type": "session.idle", "properties": {"sessionID": sid}})
    return out
