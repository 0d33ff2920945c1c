"""How many of a thing, said as people say it: ``1 event``, ``2 events``, ``1 match``, ``0 tasks``.

One function for every count an inspection or a command prints for people (``task(s)`` and
``1 events`` read badly in a log); ``--json`` counts are numbers and never pass here.
"""

from __future__ import annotations

_IRREGULAR = {"match": "matches", "is": "are", "was": "were"}


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, the noun plural unless ``n`` is 1 (``plural`` when its plural is not
    the noun with an ``s``; ``match`` and a few others are known); ``n`` with thousands commas."""
    if n == 1:
        return f"1 {noun}"
    return f"{n:,} {plural or _IRREGULAR.get(noun) or noun + 's'}"
