"""What a client asked the replay server for, as it asked: the request line a recording mode sends upstream."""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import unquote_plus

from a2a_tape.replay.serve.faults import FAULT_QUERY


class Target(NamedTuple):
    """What a client asked for, as it asked: the HTTP method, the path and the query (a
    ``GET /tasks/{id}?historyLength=1`` goes upstream as that, a ``DELETE`` as a ``DELETE``)."""

    method: str
    path: str
    query: str = ""

    def url(self, upstream: str) -> str:
        """The target at ``upstream`` (its path under the upstream's), less our own ``?fault=``."""
        path = self.path if self.path.startswith("/") else "/" + self.path
        query = "&".join(p for p in self.query.split("&") if p and unquote_plus(p.partition("=")[0]) != FAULT_QUERY)
        return upstream + path + ("?" + query if query else "")
