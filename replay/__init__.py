"""replay: the offline side of a2a-tape (projections, contract profiles, replay, inspection).

Imports only :mod:`store`. The projection API:

- :class:`TaskFold` folds one task's stored events; :func:`fold_events` folds a list in memory;
- :class:`Projector` keeps the folded states in the store, incrementally (``catch_up``) or
  from scratch (``rebuild``), byte-identical either way;
- :class:`TaskView` (with :class:`ArtifactView`, :class:`ToolCall`, :class:`Fault`) is what
  ``a2a-tape channels --json`` prints.
"""

from __future__ import annotations

from .profiles import BLOCKS, CHANNELS, GENERIC, LANES, classify
from .projection import (
    ArtifactView,
    Fault,
    IgnoredEvent,
    Projector,
    TaskFold,
    TaskView,
    ToolCall,
    encode_view,
    fold_events,
    views_digest,
)

__all__ = [
    "ArtifactView",
    "BLOCKS",
    "CHANNELS",
    "Fault",
    "GENERIC",
    "IgnoredEvent",
    "LANES",
    "Projector",
    "TaskFold",
    "TaskView",
    "ToolCall",
    "classify",
    "encode_view",
    "fold_events",
    "views_digest",
]
