"""The agent's lifecycle faults, judged as a fold goes (:mod:`fold.fold`) and when it is viewed.

Task state follows the log (the latest state reported wins, our own synthetic FAILED included) and
lifecycle faults are noted. The faults of the agent's lifecycle are judged on the agent's events
only (origin ``local`` events, ours, never make one), from the first terminal state it reported;
doctor reports these as they are, and adds only what a fold cannot see. Their codes are doctor's
(:mod:`fold.codes`, the one table):

- ``terminal-changed``: a terminal state replaced by another terminal state (completed -> failed;
  the new one is the reference from then on), or a finished task that goes back to an active or
  interrupted state;
- ``events-after-terminal``: an artifact update, a message, or a status update on the stream that
  ended the task, after the task reached a terminal state (the same state repeated by another
  exchange, a GetTask or a resubscribe, is fine). Each starts its positions with the terminal's.
  A stream that was open beside the one that ended the task (a resubscribe while a proxy reads the
  dropped stream to its end) delivers the same updates at its own pace: nothing on it is judged
  until it delivers the terminal state itself;
- ``closed-while-working`` (a warning here; doctor judges its level): an exchange that delivered
  stream updates ended while the task was still submitted/working. A stream ends when its exchange
  ends (the exchange's ended row, passed to ``view``); with the log alone, when the task's later
  events all came on other exchanges. Either way the state that counts is the task's when that
  stream ended, so a resubscribe opened beside a stream that is still open is not the first stream
  ending. Also when the log ends with the task submitted/working (the stream closed while working,
  or the recording is still going on).

Each is noted once per code on the task's state (:func:`note_fault`: the count exact, the first
positions kept); the other faults a fold notes (``rpc-error``, ``undecodable``, ``after-last-chunk``)
go through :func:`note_fault` too.
"""

from __future__ import annotations

from collections.abc import Mapping

from a2a_tape.fold.codes import CLOSED_WHILE_WORKING, EVENTS_AFTER_TERMINAL, TERMINAL_CHANGED
from a2a_tape.fold.task_state import NotedFault, TaskState
from a2a_tape.fold.views import Fault
from a2a_tape.store import TERMINAL_STATES, ArtifactUpdate, MessageItem, StatusUpdate, TaskSnapshot
from a2a_tape.store.events import is_active

_AFTER_TERMINAL: dict[type, str] = {
    ArtifactUpdate: "an artifact update",
    MessageItem: "a message",
    StatusUpdate: "a status update",
}
"""What an event after the terminal state is called in the ``events-after-terminal`` fault."""
MAX_POSITIONS = 50  # positions kept per fault (the count stays exact)
CODE = {"terminal-reopened": TERMINAL_CHANGED, "after-terminal": EVENTS_AFTER_TERMINAL}
"""A fault's code (:mod:`fold.codes`, doctor's) by the key the folded state keeps it under: the
state keeps its own keys (a persisted projection reads on), a view names them by the one table."""


def note_fault(s: TaskState, code: str, level: str, pos: int, message: str, since: int | None = None) -> None:
    """Note a fault at ``pos`` (``since``: the position it follows from, kept first)."""
    faults = s.faults
    f = faults.get(code)
    if f is None:
        faults[code] = NotedFault(code, level, message, [pos] if since is None or since == pos else [since, pos], 1)
        return
    f.count += 1
    f.message = message
    if level == "error":
        f.level = "error"
    if len(f.positions) < MAX_POSITIONS:
        f.positions.append(pos)


def judge_lifecycle(s: TaskState, pos: int, exchange_id: int | None, body: object) -> None:
    """The agent's lifecycle faults (module docstring): called for the agent's events that
    report a state, and for all of them once it reported a terminal one."""
    kind = type(body)
    state = body.state if isinstance(body, (StatusUpdate, TaskSnapshot)) else None
    if s.terminal is None:
        if state in TERMINAL_STATES:
            s.terminal, s.terminal_position, s.terminal_exchange = state, pos, exchange_id
            # the other streams of the task open now (a resubscribe beside a stream a proxy reads
            # to its end) deliver the same updates at their own pace: not after the end, until
            # each delivers the end itself
            s.catching_up = [k for k in s.before_end if k != exchange_id]
        return
    key = exchange_id or 0
    if key in s.catching_up:
        if state not in TERMINAL_STATES:
            return  # still catching up
        s.catching_up.remove(key)  # it has caught up: what follows on it is after the end
        if state == s.terminal:
            return  # (another terminal state is judged below)
    if state is not None and state not in ("unknown", s.terminal):
        was, since = s.terminal, s.terminal_position
        if state in TERMINAL_STATES:
            note_fault(s, "terminal-changed", "error", pos, f"terminal state changed: {was} -> {state}", since)
            s.terminal, s.terminal_position, s.terminal_exchange = state, pos, exchange_id
        else:
            note_fault(s, "terminal-reopened", "error", pos, f"a finished task went back: {was} -> {state}", since)
        return
    if state == s.terminal and exchange_id != s.terminal_exchange:
        return  # a GetTask / resubscribe answer repeating the final state
    what = _AFTER_TERMINAL.get(kind)
    if what is not None:
        after_terminal(s, pos, what)


def after_terminal(s: TaskState, pos: int, what: str) -> None:
    note_fault(
        s, "after-terminal", "error", pos, f"{what} arrived after the task was {s.terminal}", s.terminal_position
    )


def _state_at(s: TaskState, at: float, fallback: str) -> str:
    state = None
    for c in s.changes:
        if c.at > at:
            break
        state = c.state
    return fallback if state is None else state


def closed_streams(s: TaskState, closed: Mapping[int, float] | None) -> list[Fault]:
    """``closed-while-working``: a stream ended while the task was submitted/working.

    A stream ends when its exchange ends: ``closed`` maps the exchanges that ended (their
    ended row) to when. Without it (a log alone), a stream counts as ended once a later event
    of the task came on another exchange; the state that matters is the task's at the end of
    that stream, never when another exchange's item arrives (a resubscribe opened beside a
    still open stream is not the first stream ending).
    """
    out: list[Fault] = []
    last = s.last_position
    for key, st in s.streams.items():
        if st.last == last and is_active(s.state):
            continue  # the log ends on this stream with the task active: the log's end says it
        if closed is None:
            if st.last == last:
                continue  # the log ends on this stream (it may still be open)
            state = st.state
        else:
            ended = closed.get(key)
            if ended is None:
                continue  # still open (or never recorded as ended)
            state = _state_at(s, max(ended, st.at), st.state)
        if is_active(state):
            out.append(
                Fault(CLOSED_WHILE_WORKING, "warning", f"a stream ended while the task was {state}", [st.last], 1)
            )
    if len(out) > 1:
        positions = sorted(p for f in out for p in f.positions)
        return [Fault(CLOSED_WHILE_WORKING, "warning", out[-1].message, positions[:MAX_POSITIONS], len(out))]
    return out
