"""``a2a-tape ui``: the log in a browser, read-only and live.

Routes (every one under the run's path prefix, ``/PREFIX/``, and behind :func:`.access.protect`:
the headers, the loopback guard, the prefix and the token; the paths below are under the prefix):

- ``/``: the task list (``?q=`` search, ``state``, ``context``, ``binding``, ``upstream``,
  ``since``, ``level``; ``before`` the key to go on from); ``/rows``: a further page of it
  (:mod:`.list_routes`);
- ``/tasks/{task_id}``: one task (``?n=`` or ``?position=``: the scrubber there);
  ``/task/rows``, ``/task/at``, ``/task/event``, ``/task/findings``, ``/task/text``: its parts,
  as fragments (:mod:`.task_routes`); ``/tasks/TASK@N``: its run N (the CLI's selector), a task
  of several runs its latest, the runs side by side above it; ``/task/runs``: the runs panel
  (:mod:`.run_routes`);
- ``/diff?a=..&b=..``: two tasks (or two runs, ``TASK@N``) side by side, ``diff``'s normalisation
  (:mod:`.diff_routes`);
- ``/live/tasks``, ``/live/task``, ``/live/run``: server-sent events as the log grows
  (:mod:`.event_streams`, each from its page's module);
- ``/static/``: the stylesheet, our script and the vendored htmx (no CDN, no build step).

Pages are rendered on the server (:mod:`.render`, the templates the static export uses too). The
store is read on worker threads (:class:`.app_state.UI`, the state every handler shares); the event
streams wait on the one :class:`.follower.Follower`. This module assembles the app.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from a2a_tape.inspection.ui.access import protect
from a2a_tape.inspection.ui.app_state import UI
from a2a_tape.inspection.ui.diff_routes import DiffRoutes
from a2a_tape.inspection.ui.follower import Follower
from a2a_tape.inspection.ui.list_routes import ListRoutes
from a2a_tape.inspection.ui.render import STATIC
from a2a_tape.inspection.ui.run_routes import RunRoutes
from a2a_tape.inspection.ui.task_routes import TaskRoutes
from a2a_tape.store import Store
from a2a_tape.wire.loopback import LOOPBACK_ONLY, Guard


def create_app(
    store: Store,
    *,
    token: str,
    port: int,
    where: str,
    prefix: str,
    guard: Guard = LOOPBACK_ONLY,
    codes: set[str] | None = None,
) -> Starlette:
    """The UI over ``store``, for the server on ``port``, under the path ``prefix``
    (:func:`.access.new_prefix`), readable with ``token`` by the clients ``guard`` lets in
    (loopback only by default: ``--allow-host``, ``--allow-remote``)."""
    from a2a_tape.inspection.ui.reading import keep_projection

    kept = keep_projection(store)
    writable = kept is not None
    follower = Follower(store, (lambda: keep_projection(store) or store.last_position()) if writable else None)
    ui = UI(store, where=where, follower=follower, writable=writable, root=prefix)
    listing, runs, diffs = ListRoutes(ui), RunRoutes(ui), DiffRoutes(ui)
    task = TaskRoutes(ui, runs)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        follower.start()
        try:
            yield
        finally:
            follower.stop()

    routes = [
        Route("/", listing.tasks),
        Route("/rows", listing.list_rows),
        Route("/tasks/{task_id:path}", task.task),
        Route("/task/rows", task.task_rows),
        Route("/task/at", task.task_at),
        Route("/task/event", task.task_event),
        Route("/task/findings", task.task_findings),
        Route("/task/text", task.task_text),
        Route("/task/runs", runs.task_runs),
        Route("/diff", diffs.diff),
        Route("/live/tasks", listing.live_tasks),
        Route("/live/task", task.live_task),
        Route("/live/run", runs.live_run),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Mount("/static", StaticFiles(directory=STATIC, follow_symlink=False), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=protect(token=token, port=port, guard=guard, prefix=prefix, codes=codes),
    )
    app.state.ui = ui
    return app
