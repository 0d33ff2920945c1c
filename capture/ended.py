"""An exchange as its capture wrote it, handed on when it ends: the live OTLP export's input (docs/otel.md).

:class:`capture.exchange.Capture` keeps, when its driver asks (:meth:`Capture.keep_written
<capture.exchange.Capture.keep_written>`), what it wrote of its exchange: the row as begun and the
fields written since (its response head, its end), and every event it appended under the exchange,
as the log stored them (position, arrival, origin), each with the item it decoded on its way in.
The live export builds the exchange's span from that (:func:`capture.otlp.ended_span`), the same span
``export --format otlp`` builds from the log, without reading the exchange and its events back nor
decoding them again. Nothing here is read from the log, and nothing is copied but the row at its end.
"""

from __future__ import annotations

import msgspec

from a2a_tape.store.decode import TextChunk
from a2a_tape.store.events import Item
from a2a_tape.store.records import Exchange, StoredEvent

MAX_KEPT_EVENTS = 1_000
"""Events a capture keeps for its exchange's record: an exchange with more (a long stream) is handed on
by id and read back from the log, so an open stream never holds more than this many in memory."""

Decoded = Item | TextChunk | None
"""An event's item as its capture decoded it (a plain text chunk by the narrow decoder); None: not
decoded on the way in (a note of ours): the reader decodes it."""


class EndedExchange(msgspec.Struct, frozen=True):
    """One ended exchange as written: ``row`` (as the log holds it now), its ``events`` in the order
    appended, ``items[k]`` the decoded item of ``events[k]``."""

    row: Exchange
    events: list[StoredEvent]
    items: list[Decoded]
