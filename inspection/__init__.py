"""Inspection: what happened to a task, read from the log (tasks, show, channels, doctor, diff,
grep, exports).

Every view here reads the log through the fold core (``replay``) and the store's readers, and
keeps its own projections (the search index, doctor's findings) rebuildable from the log.
Imports the fold core and the store, never :mod:`a2a_tape.replay.serve`.
"""
