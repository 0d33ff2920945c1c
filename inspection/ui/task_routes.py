"""One task in the UI: its page (``/tasks/{task_id}``; ``?n=`` or ``?position=``: the scrubber
there; a task of several runs, or a run named, is :mod:`.run_routes`' page; a lone Message reply
its own), the page's parts as fragments (``/task/rows``, ``/task/at``, ``/task/event``,
``/task/findings``, ``/task/text``) and its live stream (``/live/task``: new rows, the header
and the channels as the task grows)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from a2a_tape.fold.views import TaskView
from a2a_tape.inspection.doctor import findings as doctor_findings
from a2a_tape.inspection.listing import family_of
from a2a_tape.inspection.messages import LoneMessage
from a2a_tape.inspection.ui import pages, reading, rows
from a2a_tape.inspection.ui.app_state import UI
from a2a_tape.inspection.ui.event_streams import event_stream, grown, resume
from a2a_tape.inspection.ui.follower import KEEPALIVE, sse
from a2a_tape.inspection.ui.reading import BadQuery
from a2a_tape.inspection.ui.render import render
from a2a_tape.inspection.ui.run_routes import RunRoutes
from a2a_tape.inspection.ui.scrub import At
from a2a_tape.inspection.ui.sections import message_section
from a2a_tape.store import Store


class TaskRoutes:
    """One task over ``ui``'s store; ``runs``: the page of a task of several runs."""

    def __init__(self, ui: UI, runs: RunRoutes) -> None:
        self.ui = ui
        self.runs = runs

    async def task(self, request: Request) -> Response:
        ui = self.ui
        key = request.path_params["task_id"]
        found = await ui.read(reading.select, ui.store, key)
        if isinstance(found, reading.NotFound):
            return ui.not_found(found.message)
        if isinstance(found, LoneMessage):
            return await self._message_page(key, found)
        if found.key != key:
            return RedirectResponse(ui.href(found.key), 303)
        task_id = found.task_id
        try:
            n = reading.parse_position(request.query_params.get("n"), "n")
            position = reading.parse_position(request.query_params.get("position"), "position")
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        if (found.number or 1) > 1 or await ui.read(reading.run_count, ui.store, task_id) > 1:
            return await self.runs.run_page(found)
        context = await ui.read(self._task_context, task_id, n, position)
        return ui.page("task_page.html", title=f"a2a-tape: task {task_id}", **context)

    async def _message_page(self, key: str, lone: LoneMessage) -> Response:
        """A lone Message reply's page: the task page's layout, headed as a message; it never
        grows (an answered send), so it is the static export's section, with every event."""
        ui = self.ui
        name = lone.message_id or lone.context_id or lone.key
        if key != name:
            return RedirectResponse(ui.href(name), 303)
        section = await ui.read(message_section, lone)
        return ui.page("task_page.html", title=f"a2a-tape: message {name}", section=Markup(section), urls={})

    def _task_context(self, task_id: str, n: int | None, position: int | None) -> dict[str, Any]:
        ui = self.ui
        st = ui.store
        cursor = ui.follower.position
        exchanges = st.exchanges(task_id)
        view = reading.task_view(st, task_id, exchanges)
        if position is not None:
            at = ui.scrubber.at_position(task_id, position, view.events)
        else:
            at = ui.scrubber.at(task_id, view.events if n is None else n, view.events, final=view)
        start = 0
        if position is not None and position > view.first_position:
            start = position - 1  # the timeline opens at the position asked for
        events, more = reading.timeline(st, task_id, after=start)
        card = reading.card_fetch(st, exchanges)
        context = pages.task_context(
            view,
            exchanges,
            events,
            findings=None,
            channels=at.view,
            card=card,
            family=family_of(st, task_id),
            task_link=ui.href,
        )
        context["at"] = at
        context["urls"] = self._task_urls(task_id, cursor)
        context["from_position"] = start or None
        if more and events:
            context["more"] = self._rows_url(task_id, events[-1])
        return context

    def _task_urls(self, task_id: str, cursor: int) -> dict[str, str]:
        ui = self.ui
        q = {"task": task_id}
        return {
            "live": ui.url("/live/task", {**q, "after": str(cursor)}),
            "at": ui.url("/task/at", q),
            "findings": ui.url("/task/findings", q),
            "text": ui.url("/task/text", q),
            "position": ui.href(task_id) + "?position=",
            "page": ui.href(task_id),
            "diff": ui.url("/diff", {"a": task_id}),
            "runs": ui.url("/task/runs", q),
        }

    def _rows_url(self, task_id: str, last: Any) -> str:
        return self.ui.url("/task/rows", {"task": task_id, "after": str(last.position)})

    # -- the page's parts --------------------------------------------------------------------------

    async def task_rows(self, request: Request) -> Response:
        task_id, after = request.query_params.get("task", ""), request.query_params.get("after")
        try:
            position = reading.parse_position(after, "after") or 0
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        return HTMLResponse(await self.ui.read(self._rows_fragment, task_id, position))

    def _rows_fragment(self, task_id: str, after: int) -> str:
        ui = self.ui
        st = ui.store
        events, more = reading.timeline(st, task_id, after=after)
        exchanges = st.exchanges(task_id)
        view = reading.task_view(st, task_id, exchanges)
        previous = reading.previous_time(st, task_id, after) if after else None
        card = reading.card_fetch(st, exchanges)
        context = pages.task_context(view, exchanges, events, findings=None, previous_at=previous, card=card)
        context["urls"] = self._task_urls(task_id, ui.follower.position)
        if more and events:
            context["more"] = self._rows_url(task_id, events[-1])
        return ui.fragment("task.html", "rows", **context)

    async def task_at(self, request: Request) -> Response:
        task_id = request.query_params.get("task", "")
        try:
            n = reading.parse_position(request.query_params.get("n"), "n")
            position = reading.parse_position(request.query_params.get("position"), "position")
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        return HTMLResponse(await self.ui.read(self._at_fragment, task_id, n, position))

    def _at_fragment(self, task_id: str, n: int | None, position: int | None) -> str:
        ui = self.ui
        view = reading.task_view(ui.store, task_id, ui.store.exchanges(task_id))
        if position is not None:
            at = ui.scrubber.at_position(task_id, position, view.events)
        else:
            at = ui.scrubber.at(task_id, view.events if n is None else n, view.events, final=view)
        return self._channels(view, at)

    def _channels(self, view: TaskView, at: At) -> str:
        context = {
            "h": rows.header(view, []),
            "view": at.view,
            "tools": rows.tool_table(at.view),
            "at": at,
            "urls": self._task_urls(view.task_id, self.ui.follower.position),
        }
        return self.ui.fragment("task.html", "channels", **context)

    async def task_text(self, request: Request) -> Response:
        """The whole answer (or reasoning) after ``n`` events, as plain text: what a page clips."""
        ui = self.ui
        task_id, what = request.query_params.get("task", ""), request.query_params.get("what", "answer")
        try:
            n = reading.parse_position(request.query_params.get("n"), "n")
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        if what not in ("answer", "reasoning"):
            return PlainTextResponse("what: answer or reasoning\n", 400)

        def read() -> str | None:
            view = reading.task_view(ui.store, task_id, ui.store.exchanges(task_id))
            at = ui.scrubber.at(task_id, view.events if n is None else n, view.events, final=view)
            return at.view.final_answer if what == "answer" else at.view.reasoning

        found = await ui.read(read)
        return PlainTextResponse(found or "", headers={"content-disposition": "inline"})

    async def task_event(self, request: Request) -> Response:
        task_id = request.query_params.get("task", "")
        try:
            position = reading.parse_position(request.query_params.get("position"), "position")
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        ev = None if position is None else await self.ui.read(reading.event_at, self.ui.store, task_id, position)
        if ev is None:
            return PlainTextResponse("no such event in this task\n", 404)
        return HTMLResponse(render("event.html", e=pages.event_detail(ev)))

    async def task_findings(self, request: Request) -> Response:
        task_id = request.query_params.get("task", "")
        return HTMLResponse(await self.ui.read(self._findings_fragment, task_id))

    def _findings_fragment(self, task_id: str) -> str:
        ui = self.ui
        st = ui.store
        exchanges = st.exchanges(task_id)
        found = doctor_findings(task_id, list(st.iter_task(task_id)), exchanges)
        return ui.fragment(
            "task.html",
            "findings",
            findings=rows.finding_rows(found),
            urls=self._task_urls(task_id, ui.follower.position),
        )

    # -- live --------------------------------------------------------------------------------------

    async def live_task(self, request: Request) -> Response:
        task_id = request.query_params.get("task", "")
        try:
            after = resume(request)
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        return event_stream(self._task_stream(task_id, after))

    async def _task_stream(self, task_id: str, after: int) -> AsyncIterator[bytes]:
        ui = self.ui
        last_at = await ui.read(_last_time, ui.store, task_id, after)
        async for got in grown(ui.follower, after):
            if got is None:
                yield KEEPALIVE
                continue
            update = await ui.read(self._task_update, task_id, *got, last_at)
            if update is not None:
                last_at = update.last_at
                for event, html in (("rows", update.rows), ("header", update.header), ("channels", update.channels)):
                    yield sse(event, html, got[1])

    def _task_update(self, task_id: str, after: int, upto: int, last_at: float | None) -> pages.Update | None:
        ui = self.ui
        st = ui.store
        new = [ev for ev in st.iter_task(task_id, after=after) if ev.position <= upto]
        if not new:
            return None
        exchanges = st.exchanges(task_id)
        view = reading.task_view(st, task_id, exchanges)
        card = reading.card_fetch(st, exchanges)
        context = pages.task_context(view, exchanges, new, findings=None, previous_at=last_at, card=card)
        context["urls"] = self._task_urls(task_id, upto)
        at = ui.scrubber.at(task_id, view.events, view.events, final=view)
        context["at"] = at
        return pages.Update(
            rows=ui.fragment("task.html", "rows", **context),
            header=ui.fragment("task.html", "header", **context),
            channels=self._channels(view, at),
            last_at=new[-1].received_at,
        )


def _last_time(store: Store, task_id: str, upto: int) -> float | None:
    """When the task's last event at or before position ``upto`` arrived, as the projection has
    it (None when the projection is past ``upto`` or has no such task)."""
    view = reading.views_of(store, [task_id]).get(task_id)
    return view.last_at if view is not None and view.last_position <= upto else None
