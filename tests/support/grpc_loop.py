"""The event loop a test's gRPC server runs on, in a thread of its own, and how it stops.

A loop closed with tasks pending leaves their coroutines to the garbage collector, which closes them
later in whatever thread it runs: a2a-sdk's ActiveTask producer then shuts its culsans queue in its
``finally``, whose lock a suspended task of the dead loop may hold, and that worker of the suite hung
for good (py-spy: the main thread in culsans ``Queue.shutdown``, inside an unrelated test). So every
server of ours on such a loop stops through :func:`stop_serving`: the server stopped, then each task
still on the loop cancelled and awaited there, then the loop closed.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any


def loop_in_thread() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """A new event loop running in a daemon thread (started)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    return loop, thread


def stop_serving(server: Any, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Stop the ``grpc.aio`` ``server`` running on ``loop`` (in ``thread``), cancel and await every
    task left on the loop, then stop and close the loop (see the module docstring)."""
    asyncio.run_coroutine_threadsafe(_stopped(server), loop).result(timeout=10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


async def _stopped(server: Any) -> None:
    await server.stop(0)
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
