"""Who recorded an exchange: its observer, the unit a run is made of (docs/design.md, "Runs").

Each recording of a task by one observer is a *run* of that task: one ``record`` process, one
proxy process's relay, one ``RecordingTransport`` or ``RecordingInterceptor`` instance, one
serve record-mode session. An observer is a random id made once by that recorder, with its
*source* (how it saw the task) and the host it ran on; every exchange it begins carries the three
(``exchanges.observer``, ``.source``, ``.host``). An import keeps the observers a tape names; a
tape written before runs is split by role (``store.tape``), as a log before runs is (``store.schema``).

A recorder that makes none gets its process's own, one per role (:func:`stamp`, called by every
backend's ``begin_exchange``): a path that forgets cannot fold into another observer's run. The
exception is recovery (role ``recovery``): its GetTask or synthetic FAILED completes the run it
recovers, so its exchanges carry no observer and join the task's latest run
(:func:`a2a_tape.fold.runs.split_runs`).
"""

from __future__ import annotations

import secrets
import socket
from typing import Final, NamedTuple

from a2a_tape.store.records import Exchange

SOURCES: Final = ("client", "proxy", "in-process", "replay", "import", "probe", "verify")
"""The sources a run can have: a client of ours (``record``), the proxy's relay, an in-process
transport or interceptor, serve's record mode, an imported tape, a probe, a verify run."""

JOINS_RUN: Final = frozenset({"recovery", "push"})
"""Roles whose exchanges carry no observer: they complete the task's latest run (a recovery's
GetTask or synthetic FAILED; a push the agent POSTed to the proxy's receiver, which is no second
side of the task but the webhook side of the run that relayed it)."""

REPLAY_MARKER: Final = "x-a2a-tape-replay"
"""The response header (on gRPC, the initial-metadata key) with which ``serve`` and
``ReplayTransport`` mark each answer of their own (not one a recording mode forwards from the live
agent). A recorder that reads it on an answer stamps that exchange's source ``replay``
(:meth:`capture.exchange.Capture.answered_by`, the one place): a replay recorded back is a run
of source ``replay``, whichever path recorded it. Anyone can send it: an agent that does only
relabels the runs recorded from it (docs/design.md, "Runs")."""

REPLAYED_SOURCES: Final = frozenset({"client", "proxy", "in-process", "probe"})
"""The sources a replay's answer turns into ``replay``. A verify run keeps its own (it is compared
as a verify run whatever answered it); an import never reads an answer."""

_SOURCE_OF_ROLE: Final = {
    "client": "client",
    "proxy": "proxy",
    "import": "import",
    "probe": "probe",
    "replay": "replay",
}


class Observer(NamedTuple):
    """One recorder of exchanges: ``id`` (random), ``source`` (:data:`SOURCES`), ``host``."""

    id: str
    source: str
    host: str

    def stamp(self, exchange: Exchange) -> Exchange:
        """``exchange`` with this observer's fields (the exchange is changed and returned)."""
        exchange.observer, exchange.source, exchange.host = self.id, self.source, self.host
        return exchange


def new_observer(source: str) -> Observer:
    """A new observer (a random id of 16 hex digits) of this host."""
    return Observer(secrets.token_hex(8), source, _host())


_HOST: list[str] = []


def _host() -> str:
    if not _HOST:
        try:
            _HOST.append(socket.gethostname() or "localhost")
        except OSError:  # pragma: no cover - a host without a name
            _HOST.append("localhost")
    return _HOST[0]


_PROCESS: dict[str, Observer] = {}


def process_observer(role: str) -> Observer:
    """This process's observer for ``role`` (made on first use, then kept)."""
    obs = _PROCESS.get(role)
    if obs is None:
        obs = _PROCESS[role] = new_observer(_SOURCE_OF_ROLE.get(role, "client"))
    return obs


def stamp(exchange: Exchange) -> Exchange:
    """``exchange`` with an observer: its own, else its process's for its role (none for a
    recovery: it joins the run it recovers)."""
    if exchange.observer is None and exchange.role not in JOINS_RUN:
        process_observer(exchange.role).stamp(exchange)
    return exchange
