"""Faults on demand: what real agents do to streams, reproduced at will.

Spelled ``name[=value]``, several joined by commas, per server (``--fault``, repeatable) or per
request (header ``X-A2A-Tape-Fault`` or query ``?fault=``; a request's faults replace the
server's). Items are counted as the client receives them (a duplicate is not counted twice).

- ``drop-after=N``: the response ends after N items while the task goes on, so the client
  can resubscribe or poll for the rest;
- ``stall-after=N``: after N items nothing more is sent, and the connection stays open;
- ``duplicate[=N]``: item N (default 2: the first item after the Task) is sent twice;
- ``delay=MS``: MS milliseconds before each item, on top of the timing (a finite number: ``inf``,
  ``nan`` or ``1e309`` is refused as any duration is);
- ``error-after=N``: after N items an ``event: error`` item (JSON-RPC -32603), then the end.

On the recorded pushes a send's task gets (``serve`` delivering them to the client's webhook,
:mod:`replay.serve.pushes`), counted from 1 in recorded order, ``last`` the task's last one (the
default):

- ``push-delay=MS``: MS milliseconds before each push, on top of ``--push-timing``;
- ``push-duplicate[=N|last]``: push N is POSTed twice;
- ``push-drop[=N|last]``: push N is never POSTed (``last``: the webhook never learns the end);
- ``push-reorder``: the last two pushes are POSTed in each other's place.

A whole-body answer (``message/send``, or a stream the agent answered with JSON) is one item:
``delay`` waits before it, ``error-after=0`` answers -32603 instead, ``drop-after=0`` ends the
response with no body, ``stall-after=0`` sends the headers and nothing more.
"""

from __future__ import annotations

import math

import msgspec

from a2a_tape.store.errors import A2ATapeError

FAULT_HEADER = "X-A2A-Tape-Fault"
FAULT_QUERY = "fault"


class FaultError(A2ATapeError, ValueError):
    """A fault spelled wrong: the message says which and how to spell it."""


class Faults(msgspec.Struct, frozen=True, omit_defaults=True):
    drop_after: int | None = None
    stall_after: int | None = None
    duplicate: int | None = None
    delay_ms: float = 0.0
    error_after: int | None = None
    push_delay_ms: float = 0.0
    push_duplicate: int | None = None  # counted from 1; 0: the last push
    push_drop: int | None = None  # as push_duplicate
    push_reorder: bool = False

    @classmethod
    def parse(cls, *specs: str | None) -> Faults:
        """``Faults.parse("drop-after=2,duplicate")``: the spellings of ``serve --faults`` (several
        specs combine); a wrong one raises :class:`FaultError` saying how to spell it."""
        return parse_faults(*specs)

    @property
    def any(self) -> bool:
        return self != NO_FAULTS

    def describe(self) -> str:
        parts = []
        if self.drop_after is not None:
            parts.append(f"drop-after={self.drop_after}")
        if self.stall_after is not None:
            parts.append(f"stall-after={self.stall_after}")
        if self.duplicate is not None:
            parts.append(f"duplicate={self.duplicate}")
        if self.delay_ms:
            parts.append(f"delay={self.delay_ms:g}")
        if self.error_after is not None:
            parts.append(f"error-after={self.error_after}")
        if self.push_delay_ms:
            parts.append(f"push-delay={self.push_delay_ms:g}")
        for name, n in (("push-duplicate", self.push_duplicate), ("push-drop", self.push_drop)):
            if n is not None:
                parts.append(f"{name}={n or 'last'}")
        if self.push_reorder:
            parts.append("push-reorder")
        return ",".join(parts) or "none"


NO_FAULTS = Faults()
MAX_DELAY_MS = 1e12  # milliseconds: about 31 years, the longest duration any option of ours takes
_COUNTED = {"drop-after": "drop_after", "stall-after": "stall_after", "error-after": "error_after"}
_HELP = (
    "drop-after=N, stall-after=N, duplicate[=N], delay=MS, error-after=N, "
    "push-delay=MS, push-duplicate[=N|last], push-drop[=N|last], push-reorder"
)


def _int(name: str, value: str | None, default: int | None = None) -> int:
    if value is None or value == "":
        if default is not None:
            return default
        raise FaultError(f"fault '{name}' needs a number, as in {name}=2")
    try:
        n = int(value)
    except ValueError:
        raise FaultError(f"fault '{name}={value}': {value!r} is not a whole number") from None
    if n < 0:
        raise FaultError(f"fault '{name}={value}': must be 0 or more")
    return n


def _push_number(name: str, value: str) -> int:
    """A push's number for ``push-drop`` / ``push-duplicate``: N from 1, or ``last`` (0; the default)."""
    if value in ("", "last"):
        return 0
    n = _int(name, value)
    if n < 1:
        raise FaultError(f"fault '{name}={value}': pushes count from 1 (or say last)")
    return n


def _delay(name: str, value: str) -> float:
    try:
        ms = float(value)
    except ValueError:
        raise FaultError(f"fault '{name}={value}': give milliseconds, as in {name}=50") from None
    if not math.isfinite(ms) or not 0 <= ms <= MAX_DELAY_MS:  # inf would never answer
        raise FaultError(f"fault '{name}={value}': give a finite number of milliseconds, 0 to {MAX_DELAY_MS:g}")
    return ms


def parse_faults(*specs: str | None) -> Faults:
    """Parse one or more specs (``"drop-after=2,duplicate"``); raise :class:`FaultError`."""
    counts: dict[str, int] = {}
    delay_ms = 0.0
    push = Faults()
    for spec in specs:
        for raw in (spec or "").split(","):
            token = raw.strip()
            if not token or token == "none":
                continue
            name, _, value = token.partition("=")
            name = name.strip().lower()
            value = value.strip()
            if name in _COUNTED:
                counts[_COUNTED[name]] = _int(name, value)
            elif name == "duplicate":
                n = _int(name, value, default=2)
                if n < 1:
                    raise FaultError("fault 'duplicate=N': N counts items from 1")
                counts["duplicate"] = n
            elif name == "delay":
                delay_ms = _delay(name, value)
            elif name == "push-delay":
                push = msgspec.structs.replace(push, push_delay_ms=_delay(name, value))
            elif name == "push-drop":
                push = msgspec.structs.replace(push, push_drop=_push_number(name, value.lower()))
            elif name == "push-duplicate":
                push = msgspec.structs.replace(push, push_duplicate=_push_number(name, value.lower()))
            elif name == "push-reorder" and not value:
                push = msgspec.structs.replace(push, push_reorder=True)
            else:
                raise FaultError(f"unknown fault '{token}' (use: {_HELP})")
    return msgspec.structs.replace(push, **counts, delay_ms=delay_ms)
