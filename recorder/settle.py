"""Resubscribe, else poll with backoff, until a task settles or stalls (docs/design.md section 5).

One rule for both followers of a task still SUBMITTED/WORKING once its stream is gone: the
client (``a2a-tape record``, :mod:`recorder.record`) and the startup recovery
(:mod:`recorder.recovery`). Each says how it talks to the agent and records what it hears (a
:class:`Follower`); this module decides what to ask next:

1. GetTask: a settled task (terminal, or waiting for input) ends it; a failed GetTask loses it;
2. no progress for ``stall_timeout`` seconds: stalled (the follower cancels, or resends);
3. the agent streams and resubscribes are left: resubscribe (the follower applies the first
   event as a snapshot); a refused resubscribe turns to polling;
4. else wait (exponential backoff with jitter, never past the stall deadline), then 1 again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio


@dataclass(frozen=True)
class Backoff:
    initial: float = 0.2
    maximum: float = 5.0
    jitter: float = 0.25  # each wait is its delay times a factor in [1 - jitter, 1 + jitter]

    def waits(self) -> Iterator[float]:
        delay = self.initial
        while True:
            yield delay * random.uniform(1 - self.jitter, 1 + self.jitter)
            delay = min(delay * 2, self.maximum)


class Follower(Protocol):
    def settled(self) -> bool:
        """Whether the task is terminal or interrupted, by what was recorded so far."""

    def progress_at(self) -> float:
        """The monotonic time of the task's last progress."""

    async def get_task(self) -> str | None:
        """GetTask, recorded; None when it answered, else why the task is lost."""

    async def resubscribe(self) -> str | None:
        """Resubscribe, recorded, until the stream ends; None, or why the agent refused it."""

    async def note(self, action: str, detail: str) -> None:
        """Record a decision (origin ``local``), before it is acted on."""


@dataclass
class Settled:
    how: Literal["settled", "stalled", "lost"]
    why: str = ""  # lost: the reason
    resubscribes: int = 0
    polled: bool = False


async def settle(
    f: Follower, *, streaming: bool, stall_timeout: float, backoff: Backoff, max_resubscribes: int | None = None
) -> Settled:
    """Follow the task to its end by the rule of the module docstring."""
    out = Settled("settled")
    waits: Iterator[float] | None = None
    while True:
        why = await f.get_task()
        if why is not None:
            out.how, out.why = "lost", why
            return out
        if f.settled():
            return out
        left = stall_timeout - (time.monotonic() - f.progress_at())
        if left <= 0:
            out.how = "stalled"
            return out
        if streaming and (max_resubscribes is None or out.resubscribes < max_resubscribes):
            out.resubscribes += 1
            await f.note("resubscribed", f"attempt {out.resubscribes}; the first event is applied as a snapshot")
            refused = await f.resubscribe()
            if refused is not None:
                await f.note("resubscribe refused", f"{refused}; polling from now on")
                streaming = False
            continue
        if waits is None:
            await f.note("polling", f"GetTask with backoff from {backoff.initial:g} s to {backoff.maximum:g} s")
            out.polled = True
            waits = backoff.waits()
        await anyio.sleep(max(0.0, min(next(waits), left)))
