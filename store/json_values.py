"""JSON values as the agent wrote them, for the code that keeps, folds or sends on what it read.

JSON puts no bound on a number; msgspec refuses one a float cannot hold (``1e999``: "Number out
of range"), where Python's ``json`` and JavaScript's ``JSON.parse`` read Infinity. Refused, one
such number in a data part or in metadata would make the whole item unreadable, and the answer
beside it would be lost from every view (channels, replay, doctor). These decoders read it:
when the fast decode refuses a number, the payload is decoded again with every float kept as its
own text (:class:`msgspec.Raw`), so encoding the value again writes the digits the agent sent.
Integers of any size decode as Python ints already; ``NaN`` and ``Infinity`` are not JSON, and
a payload holding them stays unreadable (and says so).

A document nested deeper than the interpreter's recursion limit (~1000 levels) makes msgspec raise
``RecursionError``, which no caller expects from a decoder: here it is a :class:`msgspec.DecodeError`
saying so (:data:`TOO_DEEP`), so a hostile body is refused, passed on or recorded as unreadable like
any other that is not JSON, instead of crashing the request, the proxy's handler or the import.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

T = TypeVar("T")


def _as_written(text: str) -> msgspec.Raw:
    return msgspec.Raw(text.encode())


TOO_DEEP = "JSON nested too deep to read (more levels than the recursion limit)"


class Decoder(Generic[T]):
    """A typed decoder (``Decoder(Frame)``) for what comes from outside: in its ``Any`` fields it
    reads numbers out of range as :func:`decode_json` does, and a document nested too deep is a
    :class:`msgspec.DecodeError`; as fast as msgspec's own otherwise (one call more)."""

    __slots__ = ("fast", "as_written")

    def __init__(self, type_: type[T]) -> None:
        self.fast = msgspec.json.Decoder(type_)
        self.as_written = msgspec.json.Decoder(type_, float_hook=_as_written)

    def decode(self, payload: bytes | str) -> T:
        """As msgspec's ``decode``; a document nested too deep raises :class:`msgspec.DecodeError`."""
        try:
            try:
                return self.fast.decode(payload)
            except msgspec.ValidationError:  # a wrong type fails the second decode the same way
                return self.as_written.decode(payload)
        except RecursionError:
            raise msgspec.DecodeError(TOO_DEEP) from None


_ANY: Decoder[Any] = Decoder(object)  # msgspec reads ``object`` as any JSON value


def decode_json(payload: bytes | str) -> Any:
    """Any JSON value; a number out of a float's range is kept as written (for ``Any`` a refused
    number is the only way JSON fails). Raises :class:`msgspec.DecodeError` (or its
    :class:`msgspec.ValidationError`) for what is not JSON, a document nested too deep included."""
    return _ANY.decode(payload)
