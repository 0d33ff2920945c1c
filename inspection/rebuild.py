"""Rebuild every projection of a store from position 0: the task views and their index
(:class:`fold.projection.Projector`), the search index and doctor's findings.

Each is also rebuilt by itself when the rules that make its rows change (its version marker), and
each keeps its own cursor; this is the one call that drops and makes them all again (after a
restore, or to check that incremental == rebuild on a real log).
"""

from __future__ import annotations

from collections.abc import Callable

from a2a_tape.fold.projection import Projector
from a2a_tape.inspection.doctor_index import DoctorIndex
from a2a_tape.inspection.search_index import SearchIndex
from a2a_tape.store import Store


def rebuild_all(store: Store, *, progress: Callable[[str, int, int], None] | None = None) -> None:
    """``progress(what, done, total)``: events indexed / tasks examined so far."""
    Projector(store).rebuild()
    SearchIndex(store).rebuild(progress=None if progress is None else lambda d, t: progress("search", d, t))
    DoctorIndex(store).rebuild(progress=None if progress is None else lambda d, t: progress("doctor", d, t))
