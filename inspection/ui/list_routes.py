"""The task list's routes: the page (``/``), a further page of it (``/rows``) and its live stream
(``/live/tasks``): each task that grows comes back as its row, in place of the old one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from a2a_tape.fold.task_state import RunRef
from a2a_tape.inspection.doctor_index import FaultCounter
from a2a_tape.inspection.ui import reading, rows
from a2a_tape.inspection.ui.app_state import UI, task_href
from a2a_tape.inspection.ui.event_streams import event_stream, grown, resume
from a2a_tape.inspection.ui.follower import KEEPALIVE, sse
from a2a_tape.inspection.ui.reading import BadQuery, Filters


class ListRoutes:
    """The task list over ``ui``'s store (``?q=`` search, ``state``, ``context``, ``binding``,
    ``upstream``, ``since``, ``level``; ``before`` the key to go on from)."""

    def __init__(self, ui: UI) -> None:
        self.ui = ui

    async def tasks(self, request: Request) -> Response:
        try:
            f, page = await self._read_page(request)
        except BadQuery as exc:
            context = self._list_context(Filters(), None, problem=str(exc))
            return self.ui.page("tasks.html", status_code=400, **context)
        return self.ui.page("tasks.html", **self._list_context(f, page))

    async def list_rows(self, request: Request) -> Response:
        try:
            f, page = await self._read_page(request)
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        return HTMLResponse(self.ui.fragment("tasks.html", "rows", **self._list_context(f, page)))

    async def _read_page(self, request: Request) -> tuple[Filters, reading.ListPage]:
        """The filters and the page of the list they select; BadQuery for a query that names neither."""
        f = reading.parse_filters(request.query_params.multi_items())
        before = reading.parse_position(request.query_params.get("before"), "before")
        return f, await self.ui.read(reading.task_list, self.ui.store, f, before=before)

    def _list_context(self, f: Filters, page: reading.ListPage | None, problem: str | None = None) -> dict[str, Any]:
        ui = self.ui
        found = [] if page is None else page.rows
        more = None
        if page is not None and page.more is not None:
            more = ui.url("/rows", [*f.query(), ("before", str(page.more))])
        live = ui.url("/live/tasks", [*f.query(), ("after", str(ui.follower.position))])
        if problem is None and not ui.writable:
            problem = "This log is read-only here: the list shows the task projection as it was last kept."
        end = "no tasks match" if not found and f != Filters() else ("no tasks recorded yet" if not found else "")
        return {
            "f": f,
            "rows": [Linked(r, ui.root) for r in found],
            "more": more,
            "live_url": live,
            "states": reading.STATES,
            "bindings": reading.BINDINGS,
            "problem": problem,
            "end_note": end or "the end of the list",
            "title": "a2a-tape: tasks",
            "drop": None,
        }

    # -- live --------------------------------------------------------------------------------------

    async def live_tasks(self, request: Request) -> Response:
        try:
            f = reading.parse_filters(request.query_params.multi_items())
            after = resume(request)
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        return event_stream(self._list_stream(f, after))

    async def _list_stream(self, f: Filters, after: int) -> AsyncIterator[bytes]:
        async for got in grown(self.ui.follower, after):
            if got is None:
                yield KEEPALIVE
                continue
            for html in await self.ui.read(self._list_updates, f, *got):
                yield sse("task", html, got[1])

    def _list_updates(self, f: Filters, after: int, upto: int) -> list[str]:
        """The rows of the tasks with events in ``(after, upto]``, one message each: the page puts
        each at the top in place of its old row (a hidden row when it no longer passes the filters)."""
        ui = self.ui
        st = ui.store
        touched = st.tasks_touched(after, upto)
        runs: dict[str, list[RunRef]] = {}
        views = reading.views_of(st, touched, runs)
        out = []
        counted = FaultCounter(st)
        for t in touched:
            view = views.get(t)
            if view is None:
                continue
            faults = counted(t)  # doctor's counts, as the list shows them
            row = Linked(rows.list_row(view, faults, runs=runs.get(t, ())), ui.root)
            keep = reading.passes(st, view, f, faults)
            out.append(
                ui.fragment(
                    "tasks.html",
                    "rows",
                    rows=[row] if keep else [],
                    more=None,
                    end_note=None,
                    drop=None if keep else row.dom_id,
                )
            )
        return out


class Linked:
    """A list row and its links: its page, and its runs' when it has several (the template reads them)."""

    def __init__(self, row: rows.TaskListRow, root: str) -> None:
        self._row = row
        key = row.task_id if row.task_id is not None else row.message_key  # a lone Message reply: its page too
        self.href = task_href(key, root) if key else None
        self.run_links = [
            None if link is None else (link, task_href(link.selector, root)) for link in rows.run_links(row)
        ]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, name)
