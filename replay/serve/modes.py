"""The replay server's two vocabularies, defined once (vcrpy keeps its record modes the same way):
``serve --record-mode`` / ``--match``, the engine, :class:`ReplayTransport` and the pytest plugin
all read these enums.

Record modes (vcrpy's names): ``none`` replays only; ``once`` records what does not match when
the recording was empty at the start; ``new_episodes`` records what does not match; ``all``
records every request. The last two need a live agent to record from (``--upstream``).

Match modes (:mod:`replay.serve.matching` says what each compares): ``method-text``, ``strict``,
``order``.

Members are strings (``StrEnum``): a mode compares equal to its name, prints as it, and a plain
string from a marker or a keyword argument is read with :meth:`RecordMode.of` / :meth:`MatchMode.of`,
which name the choices when it is none of them.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Self


class _Vocabulary(StrEnum):
    @classmethod
    def of(cls, value: str) -> Self:
        """The member named ``value``; ValueError naming the choices for any other string."""
        try:
            return cls(value)
        except ValueError:
            what = re.sub(r"(?<!^)(?=[A-Z])", " ", cls.__name__).lower()  # RecordMode: "record mode"
            choices = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown {what} {value!r} (use one of: {choices})") from None


class RecordMode(_Vocabulary):
    """What a replay does with a request its recordings do not answer."""

    none = "none"
    once = "once"
    new_episodes = "new_episodes"
    all = "all"

    @property
    def needs_upstream(self) -> bool:
        """Whether the mode records whatever the recording holds, so it cannot run without a live agent."""
        return self in (RecordMode.new_episodes, RecordMode.all)

    def records(self, upstream: str | None) -> bool:
        """Whether this mode, with this live agent (or none), can add to the recording: a
        recording that does not exist is then created, never otherwise."""
        return self is not RecordMode.none and bool(upstream)


class MatchMode(_Vocabulary):
    """How a request is matched to a recorded one (:class:`replay.serve.matching.Matcher`)."""

    method_text = "method-text"
    strict = "strict"
    order = "order"


class PushTiming(_Vocabulary):
    """When a replay POSTs a send's recorded pushes (:mod:`replay.serve.pushes`)."""

    instant = "instant"
    recorded = "recorded"
