"""The replay server: recordings answering as the agent did (HTTP, in-process, the pytest plugin).

:class:`engine.ReplayEngine` answers one request from the recordings (:mod:`library`, matched by
:mod:`matching` on a request's :mod:`shape`, played back by :mod:`playback` with :mod:`faults`);
:mod:`server` and :mod:`transport` put it on a socket or behind an httpx transport; :mod:`forward`
records what the recordings do not answer (the record modes). Imports the fold core (``replay``)
and the store, never :mod:`a2a_tape.inspection`.
"""
