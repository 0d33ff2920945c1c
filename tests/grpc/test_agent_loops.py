"""The test gRPC agents (a2a-sdk's, tests/support/grpc_agents.py; the hand-written one,
tests/support/grpc_fake.py) leave no task pending on their own event loop when they stop: each
is cancelled and awaited there before the loop closes (tests/support/grpc_loop.py). A task left
pending went to the garbage collector, which ran its ``finally`` later in another thread, and a
suite worker hung on a lock a suspended task of the dead loop held."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Iterator

import pytest

from tests.support.grpc_agents import running_grpc_agent
from tests.support.grpc_fake import running_fake_grpc_agent


@contextlib.contextmanager
def _sdk() -> Iterator[asyncio.AbstractEventLoop]:
    with running_grpc_agent() as agent:
        yield agent.loop


@contextlib.contextmanager
def _fake() -> Iterator[asyncio.AbstractEventLoop]:
    with running_fake_grpc_agent() as (_target, handler):
        yield handler.loop


AGENTS: dict[str, Callable[[], contextlib.AbstractContextManager[asyncio.AbstractEventLoop]]] = {
    "sdk": _sdk,
    "fake": _fake,
}


async def _forever(cleaned: list[str]) -> None:
    try:
        await asyncio.Event().wait()  # as a handler's background work that outlives its call
    finally:
        cleaned.append("on its own loop")


@pytest.mark.parametrize("agent", AGENTS)
def test_a_task_left_on_the_agent_loop_is_cancelled_there_before_it_closes(agent):
    cleaned: list[str] = []
    with AGENTS[agent]() as loop:
        left: concurrent.futures.Future[None] = asyncio.run_coroutine_threadsafe(_forever(cleaned), loop)
    assert loop.is_closed()
    assert left.cancelled()  # not pending on a closed loop, for the garbage collector to close later
    assert cleaned == ["on its own loop"]  # its finally ran on the loop, before the loop closed
