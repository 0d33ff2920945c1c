"""The UI's state and what every route handler does with it: read the store off the event loop,
make an address under the run's path prefix, render a page or a live fragment (:mod:`.web_app`
assembles the routes; :mod:`.list_routes`, :mod:`.task_routes`, :mod:`.run_routes` and
:mod:`.diff_routes` are the handlers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

import anyio
from starlette.responses import HTMLResponse, Response

from a2a_tape.inspection.ui.follower import Follower
from a2a_tape.inspection.ui.render import fragment, render
from a2a_tape.inspection.ui.scrub import Scrubber
from a2a_tape.store import Store


def task_href(task_id: str, root: str = "") -> str:
    """A task's page, or its run's (``TASK@N``: the '@' kept as written, as the CLI reads it),
    under ``root`` (the run's prefix)."""
    return root + "/tasks/" + quote(task_id, safe="@")


class UI:
    """The app's state: the store, the follower, the scrubber's kept folds, and ``root``: the
    path prefix every address it makes starts with (:mod:`.access`: the run's own)."""

    def __init__(self, store: Store, *, where: str, follower: Follower, writable: bool, root: str = "") -> None:
        self.store = store
        self.where = where
        self.follower = follower
        self.writable = writable
        self.root = root
        self.scrubber = Scrubber(store)

    def href(self, task_id: str) -> str:
        """A task's (or run's) page under the prefix."""
        return task_href(task_id, self.root)

    def url(self, path: str, query: Any = None) -> str:
        """``path`` of the app (``/diff``) under the prefix, with ``query`` (pairs or a dict) if any."""
        return self.root + path + (("?" + urlencode(query)) if query else "")

    def fragment(self, template: str, block: str, **context: Any) -> str:
        """One block of a live page, its addresses under the prefix."""
        return fragment(template, block, live=True, root=self.root, **context)

    async def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a reader of the store on a worker thread (the loop never waits on the log)."""
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    def page(self, template: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(render(template, live=True, where=self.where, root=self.root, **context), status_code)

    def not_found(self, message: str) -> Response:
        return self.page("notice.html", title="a2a-tape: not found", message=message, status_code=404)
