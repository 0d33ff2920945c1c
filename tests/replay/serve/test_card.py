"""The agent card as the agent served it: every field, every response header (hop-by-hop and what
describes the recorded body aside; the replay's marker added), per ``A2A-Version``, URLs pointing at the replay; an
``If-None-Match`` on its ETag gets 304 as from the agent.

The agent is a real a2a-sdk 1.3.0 agent whose card has security schemes and requirements and a
``Cache-Control`` (the SDK adds the ETag), and which serves another card to v1.0 clients: its card
route is the SDK's own, chosen by the request's ``A2A-Version`` header."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from starlette.applications import Starlette
from starlette.routing import Route

from a2a_tape.recorder.transport import RecordingTransport
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.server import create_app
from a2a_tape.replay.serve.transport import ReplayTransport
from a2a_tape.store.observers import REPLAY_MARKER
from tests.recorder.proxy.conftest import running_proxy
from tests.support.sdk_agents import ChunkAgent
from tests.support.servers import closed_port, serve_app

CARD = "/.well-known/agent-card.json"
V1 = {"A2A-Version": "1.0"}
# what differs between two HTTP servers answering the same: when, and the length of other URLs
_PER_RESPONSE = {"date", "content-length"}


def _card(base_url: str, name: str, versions: tuple[str, ...]) -> AgentCard:
    return AgentCard(
        name=name,
        description="a card with security",
        version="2.1.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version=v, url=base_url + "/") for v in versions
        ],
        security_schemes={"bearer": SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))},
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList(list=[])})],
    )


@contextlib.contextmanager
def secure_agent() -> Iterator[str]:
    port = closed_port()  # nothing listens there; bound later by the server
    url = f"http://127.0.0.1:{port}"
    old = _card(url, "secure-agent", ("0.3", "1.0"))
    new = _card(url, "secure-agent v1", ("1.0",))
    old_route = create_agent_card_routes(old, cache_control="public, max-age=60")[0]
    new_route = create_agent_card_routes(new, cache_control="public, max-age=600")[0]

    async def card(request):
        version = request.headers.get("a2a-version", "")
        return await (new_route if version.startswith("1") else old_route).endpoint(request)

    handler = DefaultRequestHandler(agent_executor=ChunkAgent(), task_store=InMemoryTaskStore(), agent_card=old)
    app = Starlette(
        routes=[Route(CARD, card, methods=["GET"])]
        + create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True)
    )
    with serve_app(app, port=port) as served:
        yield served


def _headers(r: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in r.headers.items() if k not in _PER_RESPONSE}


def _same_card(live: httpx.Response, replayed: httpx.Response, live_url: str, replay_url: str) -> None:
    assert replayed.status_code == live.status_code == 200
    assert replayed.content == live.content.replace(live_url.encode(), replay_url.encode())
    assert _headers(replayed) == {**_headers(live), REPLAY_MARKER: "1"}  # the replay's marker, its own addition


@pytest.mark.parametrize("recorder", ["proxy", "transport"])
def test_the_card_is_served_as_the_agent_served_it_per_dialect(tmp_path, recorder):
    db = tmp_path / "card.db"
    with secure_agent() as agent:
        live = {v: httpx.get(agent + CARD, headers=V1 if v == "1.0" else {}) for v in ("0.3", "1.0")}
        if recorder == "proxy":
            with running_proxy(agent, db) as proxy:
                for v in ("0.3", "1.0"):
                    assert httpx.get(proxy.url + CARD, headers=V1 if v == "1.0" else {}).status_code == 200
        else:
            with httpx.Client(transport=RecordingTransport(db)) as c:
                for v in ("0.3", "1.0"):
                    assert c.get(agent + CARD, headers=V1 if v == "1.0" else {}).status_code == 200
    assert live["0.3"].json()["name"] != live["1.0"].json()["name"]
    assert "securitySchemes" in live["0.3"].json() and live["0.3"].headers["cache-control"]
    lib = Library.open(db)
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            for v in ("0.3", "1.0"):
                replayed = httpx.get(url + CARD, headers=V1 if v == "1.0" else {})
                _same_card(live[v], replayed, agent, url)
            # revalidation, as the agent answers it
            etag = live["1.0"].headers["etag"]
            again = httpx.get(url + CARD, headers={**V1, "If-None-Match": etag})
            assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    finally:
        lib.close()


def test_the_transport_serves_the_recorded_card_too(tmp_path):
    db = tmp_path / "card.db"
    with secure_agent() as agent:
        with httpx.Client(transport=RecordingTransport(db)) as c:
            live = c.get(agent + CARD)
    with httpx.Client(transport=ReplayTransport(db)) as c:
        replayed = c.get("http://replay.test" + CARD)
    assert replayed.content == live.content.replace(agent.encode(), b"http://replay.test")
    assert replayed.headers["etag"] == live.headers["etag"]
    assert replayed.headers["cache-control"] == "public, max-age=60"
    card = replayed.json()
    assert card["securitySchemes"] == live.json()["securitySchemes"] and "bearer" in card["securitySchemes"]
    assert card["securityRequirements"] == live.json()["securityRequirements"]
    assert "pushNotifications" not in card["capabilities"]
