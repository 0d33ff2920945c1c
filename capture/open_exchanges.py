"""The exchanges open lately, kept in memory for the live OTLP export's inferred callers (docs/otel.md).

:mod:`capture.lineage` joins a call to the exchanges that were open when it began. Asking the log for
them (``exchanges_open_within``) scans every exchange row: fine once for a listing, too slow once per
span on a log that grows for as long as a proxy runs. :class:`OpenExchanges` asks that once, when the
export starts (what has been open since it began), then reads only the rows begun since (by id: the
primary key) and the end of each row it holds open, and forgets a row once no call still to be sent can
have begun while it was open.

What it holds answers as the log would: every exchange open when a call began, for any call that began
after :attr:`since` and whose start is not before the ``keep_from`` it is refreshed with. Rows read by id
are read again from the id of two refreshes ago, so a row whose insert was committed after a higher id's
(PostgreSQL hands out ids before commit) is still seen.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterable

from a2a_tape.store import Exchange, Recordings

RETAIN = 10.0
"""Seconds an ended row is kept at least (see :meth:`OpenExchanges.refresh`)."""


class OpenExchanges:
    """Exchange rows open since :attr:`since`, or begun since (see the module's docstring)."""

    def __init__(self, since: float) -> None:
        self.since = since
        self._rows: dict[int, Exchange] = {}
        self._open: dict[int, Exchange] = {}  # the rows not ended
        self._ended: list[tuple[float, int]] = []  # (ended_at, id) of the others, in order
        self._tops: list[int] | None = None  # the last exchange id at the two refreshes before
        self._forgot_before = since  # rows that ended before this may have been forgotten

    def covers(self, moment: float) -> bool:
        """Whether :meth:`open_at` holds every row open at ``moment`` (none was forgotten, none missed)."""
        return self._tops is not None and moment >= self._forgot_before

    def __len__(self) -> int:
        return len(self._rows)

    def refresh(self, st: Recordings, keep_from: Iterable[int] = (), *, now: float | None = None) -> None:
        """Read what changed in the log; then forget rows that ended before the earliest start of the
        exchanges ``keep_from`` (the calls still to be sent), of the rows still open, and of
        :data:`RETAIN` seconds before ``now`` (a row begun then may not be readable yet: its insert
        comes after)."""
        now = time.time() if now is None else now
        top = st.last_exchange_id()
        if self._tops is None:
            for row in st.exchanges_open_within(self.since, math.inf):
                self._put(row)
            self._tops = [top, top]
        else:
            after = self._tops[0]
            for row in st.exchanges(after_id=after):
                self._put(row)
            for ex_id in [i for i in self._open if i <= after]:
                fresh = st.get_exchange(ex_id)
                if fresh is not None:
                    self._put(fresh)
            self._tops = [self._tops[1], top]
        starts = [now - RETAIN]
        starts += [row.started_at for row in self._open.values()]
        starts += [self._rows[i].started_at for i in keep_from if i in self._rows]
        floor = min(starts)
        self._forgot_before = max(self._forgot_before, floor)
        cut = bisect.bisect_left(self._ended, (floor, -1))
        for _, ex_id in self._ended[:cut]:
            del self._rows[ex_id]
        del self._ended[:cut]

    def _put(self, row: Exchange) -> None:
        if row.id is None:
            return
        old = self._rows.get(row.id)
        if old is not None:  # what was learnt of an open row from its first events (its task, its context)
            row.task_id = row.task_id or old.task_id
            row.context_id = row.context_id or old.context_id
            if old.ended_at is not None:
                self._ended.remove((old.ended_at, row.id))
        self._rows[row.id] = row
        if row.ended_at is None:
            self._open[row.id] = row
        else:
            self._open.pop(row.id, None)
            bisect.insort(self._ended, (row.ended_at, row.id))

    def open_at(self, moment: float) -> list[Exchange]:
        """The rows open at ``moment`` (begun by it, not ended before it), as ``exchanges_open_within(moment,
        moment)`` gives them (in the order read, not by id: the rule sorts them by start)."""
        found = [row for row in self._open.values() if row.started_at <= moment]
        for _, ex_id in self._ended[bisect.bisect_left(self._ended, (moment, -1)) :]:
            row = self._rows[ex_id]
            if row.started_at <= moment:
                found.append(row)
        return found
