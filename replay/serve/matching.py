"""Match a request to a recorded episode, with vcrpy's vocabulary.

- ``method-text`` (default): the same operation (send / stream, whatever the dialect) and the
  same message text; a send may also be answered from a streamed recording of the same text.
  A recording of this very request (the same shape, :mod:`replay.serve.shape`) comes first. A request
  with no text is matched by its whole shape only, never pooled with other requests that have
  no text.
- ``strict``: the same operation and the same shape: the whole request less its ids (JSON-RPC
  id, messageId, taskId, contextId), its dialect's spellings and the protocol's defaults.
- ``order``: the next recorded send, in recorded order, whatever it says.

Unused episodes are preferred; once all matching ones were played, the last is played again
(a client that retries gets the same answer). Among unused ones of the same text, the one whose
recorded messageId shares the longest word prefix with the request's comes first (a suite that
names its messages ``<purpose>-<run>`` sends one text for several purposes; a random id shares no
word with another), else the first recorded. When nothing matches, :meth:`Matcher.closest`
names the nearest recording and the first field that differs, for the error message.

``match_on`` (:mod:`capture.hooks`, vcrpy's name): a user's matchers, ``matcher(request,
recorded)``, each of which must agree before a recorded send may answer; they narrow what the mode
offers (with ``order`` they alone decide, in recorded order). Why the closest recording was turned
down (an ``AssertionError``'s message) is kept for the miss's line (:attr:`Matcher.refusals`).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from a2a_tape.capture.hooks import A2ARequest, RequestMatcher, matchers_of, matches
from a2a_tape.replay.serve.library import Episode, message_text
from a2a_tape.replay.serve.modes import MatchMode
from a2a_tape.replay.serve.rpc import RpcRequest
from a2a_tape.replay.serve.shape import Shape, common_fields, first_difference


class Matcher:
    def __init__(
        self,
        episodes: list[Episode],
        mode: str = "method-text",
        match_on: RequestMatcher | Sequence[RequestMatcher] | None = None,
    ) -> None:
        self.episodes = episodes
        self.mode = MatchMode.of(mode)
        self.matchers = matchers_of(match_on)
        self.refusals: dict[int, str] = {}  # episode id -> why a match_on matcher last turned it down

    def _agreeing(self, found: list[Episode], asked: A2ARequest | None) -> list[Episode]:
        """The episodes every ``match_on`` matcher accepts for ``asked`` (all of them without matchers)."""
        if not self.matchers or asked is None:
            return found
        kept = []
        for ep in found:
            why = matches(self.matchers, asked, ep.as_request)
            if why is None:
                kept.append(ep)
            else:
                self.refusals[ep.id] = why
        return kept

    def _candidates(self, req: RpcRequest, shape: Shape, operation: str, asked: A2ARequest | None) -> list[Episode]:
        if self.mode == "order":
            return self._agreeing(list(self.episodes), asked)
        key = shape.key
        if self.mode == "strict":
            return self._agreeing(
                [ep for ep in self.episodes if ep.operation == operation and ep.shape.key == key], asked
            )
        exact_shape = self._agreeing(
            [ep for ep in self.episodes if ep.operation == operation and ep.shape.key == key], asked
        )
        if exact_shape:  # this very request was recorded: its answer before any other of the same text
            return exact_shape
        text = message_text(req)
        if not text:  # no text to tell requests apart: the whole shape does
            same = [ep for ep in self.episodes if not ep.text and ep.shape.key == key]
        else:  # a recorded request the agent refused answers only itself (above)
            same = [ep for ep in self.episodes if ep.text == text and not ep.refused]
        same = self._agreeing(same, asked)
        exact = [ep for ep in same if ep.operation == operation]
        return exact or same

    def _pick(self, found: list[Episode], message_id: str | None = None) -> Episode | None:
        if not found:
            return None
        fresh = [ep for ep in found if ep.used == 0]
        if len(fresh) > 1 and message_id:
            best = max(_word_prefix(message_id, _message_id(ep)) for ep in fresh)
            if best:
                fresh = [ep for ep in fresh if _word_prefix(message_id, _message_id(ep)) == best]
        ep = fresh[0] if fresh else found[-1]
        ep.used += 1
        return ep

    def match(self, req: RpcRequest, shape: Shape, operation: str, asked: A2ARequest | None = None) -> Episode | None:
        """The recorded send that answers ``req``; ``asked``: the request as ``match_on`` sees it."""
        return self._pick(self._candidates(req, shape, operation, asked), _request_message_id(req))

    def match_shape(self, shape: Shape, operation: str) -> Episode | None:
        """A recording of exactly this request (one an a2a-sdk agent refuses: its params
        unreadable, a required field missing; the recorded agent may have answered it), whatever
        the match mode."""
        key = shape.key
        return self._pick([ep for ep in self.episodes if ep.operation == operation and ep.shape.key == key])

    def closest(self, req: RpcRequest | None, shape: Shape, operation: str) -> tuple[Episode, str | None] | None:
        """The nearest recording and the first field where the request differs from it."""
        if not self.episodes:
            return None
        text = message_text(req)

        def score(ep: Episode) -> tuple[bool, float, int]:
            s = difflib.SequenceMatcher(None, ep.text, text).ratio()
            return (ep.operation == operation, s, common_fields(shape.params, ep.shape.params))

        best = max(self.episodes, key=score)
        if best.text != text:  # what a reader changed; the fields in key order would name an id first
            return best, first_difference(text, best.text, "the text")
        return best, first_difference(shape.params, best.shape.params)


_SEPARATORS = "-_:./"


def _request_message_id(req: RpcRequest | None) -> str | None:
    if req is None or req.params is None or req.params.message is None:
        return None
    return req.params.message.messageId


def _message_id(ep: Episode) -> str | None:
    return _request_message_id(ep.request)


def _word_prefix(a: str, b: str | None) -> int:
    """How much of ``a`` ``b`` repeats, in whole words: the same id counts past any prefix; else
    the common prefix up to its last separator (``tck-input-required-`` of two runs' ids), so
    that two random ids, which share a character or two by chance, share nothing."""
    if not b:
        return 0
    if a == b:
        return len(a) + 1
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    while n and a[n - 1] not in _SEPARATORS:
        n -= 1
    return n
