"""Where the replayed agent has got to: the replay clock (``--timing``) and each task's playback."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: the CLI checks --timing with parse_timing without loading the library
    from a2a_tape.replay.serve.library import Episode, Served


MIN_FACTOR, MAX_FACTOR = 1e-6, 1e6  # a replay a million times slower or faster, at most


def parse_timing(value: str | float) -> float:
    """The replay clock's scale: ``instant`` -> 0 (no waits), ``real`` -> 1, a speed-up factor F
    (``10`` or ``10x``: ten times faster; a finite number from :data:`MIN_FACTOR` to
    :data:`MAX_FACTOR`) -> 1/F. ``serve --timing`` and :class:`replay.serve.engine.ReplayEngine` read it alike."""
    if isinstance(value, (int, float)):
        factor = float(value)
    else:
        v = value.strip().lower()
        if v == "instant":
            return 0.0
        if v == "real":
            return 1.0
        try:
            factor = float(v.removesuffix("x"))
        except ValueError:
            raise ValueError(f"'{value}' is not instant, real or a speed-up factor such as 10") from None
    if not math.isfinite(factor) or not MIN_FACTOR <= factor <= MAX_FACTOR:
        raise ValueError(f"'{value}': the factor must be a finite number from 0.000001 to 1000000")
    return 1.0 / factor


class Playback:
    """How far the agent has got with one task of a served episode."""

    def __init__(self, task_id: str, episode: Episode, scale: float) -> None:
        self.task_id = task_id
        self.episode = episode
        self.on_release: Callable[[int], None] | None = None  # told each time more items are out (pushes)
        self._released = 0
        self.started = time.monotonic()
        self.scale = scale
        self.cancelled = False
        self.finished = False  # a stream sent every item (no need to count them)
        self._offsets: list[float] | None = None

    @property
    def items(self) -> list[Served]:
        """The episode's items (read in full only when asked: a stream reads them as it goes)."""
        return self.episode.served

    @property
    def offsets(self) -> list[float]:
        """When each item is due, from the start of the stream, on the replay clock."""
        if self._offsets is None:
            offsets, t = [], 0.0
            for s in self.items:
                t += s.gap * self.scale
                offsets.append(t)
            self._offsets = offsets
        return self._offsets

    @property
    def released(self) -> int:
        """How many of the episode's items the agent has produced (a stream: sent)."""
        return self._released

    @released.setter
    def released(self, n: int) -> None:
        self._released = n
        if self.on_release is not None:
            self.on_release(n)

    def release(self, n: int) -> None:
        if n > self.released:
            self.released = n

    @property
    def done(self) -> bool:
        return self.finished or self.released >= len(self.items)

    def advance(self) -> None:
        """The task went on while nobody watched: release what the clock says is out."""
        if self.cancelled:
            return
        if self.scale == 0:
            self.released = len(self.items)
            return
        elapsed = time.monotonic() - self.started
        n = self.released
        while n < len(self.items) and self.offsets[n] <= elapsed:
            n += 1
        self.released = n
