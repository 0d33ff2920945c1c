"""Match a request to a recorded episode, with vcrpy's vocabulary.

- ``method-text`` (default): the same operation (send / stream, whatever the dialect) and the
  same message text; a send may also be answered from a streamed recording of the same text.
- ``strict``: the whole request less its ids (JSON-RPC id, messageId, taskId, contextId) and
  its dialect's spellings (roles, part kinds) must be equal.
- ``order``: the next recorded send, in recorded order, whatever it says.

Unused episodes are preferred; once all matching ones were played, the last is played again
(a client that retries gets the same answer). When nothing matches, :meth:`Matcher.closest`
names the nearest recording for the error message.
"""

from __future__ import annotations

import difflib
from typing import Literal

import msgspec

from a2a_tape.store.decode import normalise_role
from a2a_tape.store.wire import WireMessage, WirePart

from .library import Episode, message_text
from .rpc import Params, RpcRequest

MatchMode = Literal["method-text", "strict", "order"]
MATCH_MODES: tuple[str, ...] = ("method-text", "strict", "order")

_encoder = msgspec.json.Encoder(order="sorted")


class _StrictKey(msgspec.Struct):
    operation: str
    params: Params | None


def strict_key(req: RpcRequest | None, operation: str) -> bytes:
    """The request as compared by ``strict``: ids removed, dialect spellings normalised."""
    if req is None:
        return b""
    params = req.params
    if params is not None:
        msg = params.message
        if msg is not None:
            msg = WireMessage(
                role=normalise_role(msg.role),
                parts=[_norm_part(p) for p in msg.parts],
                metadata=msg.metadata,
            )
        params = msgspec.structs.replace(params, message=msg, id=None)
    return _encoder.encode(_StrictKey(operation, params))


def _norm_part(p: WirePart) -> WirePart:
    kind = p.kind or ("text" if p.text is not None else "data" if p.data is not None else "file")
    return msgspec.structs.replace(p, kind=kind)


class Matcher:
    def __init__(self, episodes: list[Episode], mode: str = "method-text") -> None:
        if mode not in MATCH_MODES:
            raise ValueError(f"unknown match mode {mode!r} (use one of: {', '.join(MATCH_MODES)})")
        self.episodes = episodes
        self.mode = mode
        self._keys: dict[int, bytes] = {}

    def _key(self, ep: Episode) -> bytes:
        key = self._keys.get(ep.id)
        if key is None:
            key = self._keys[ep.id] = strict_key(ep.request, ep.operation)
        return key

    def _candidates(self, req: RpcRequest, operation: str) -> list[Episode]:
        if self.mode == "order":
            return list(self.episodes)
        if self.mode == "strict":
            key = strict_key(req, operation)
            return [ep for ep in self.episodes if self._key(ep) == key]
        text = message_text(req)
        same = [ep for ep in self.episodes if ep.text == text]
        exact = [ep for ep in same if ep.operation == operation]
        return exact or same

    def match(self, req: RpcRequest, operation: str) -> Episode | None:
        found = self._candidates(req, operation)
        if not found:
            return None
        fresh = [ep for ep in found if ep.used == 0]
        ep = fresh[0] if fresh else found[-1]
        ep.used += 1
        return ep

    def closest(self, req: RpcRequest, operation: str) -> Episode | None:
        if not self.episodes:
            return None
        text = message_text(req)

        def score(ep: Episode) -> float:
            s = difflib.SequenceMatcher(None, ep.text, text).ratio()
            return s + (0.5 if ep.operation == operation else 0.0)

        return max(self.episodes, key=score)
