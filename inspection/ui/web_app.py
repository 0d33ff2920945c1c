"""``a2a-tape ui``: the log in a browser, read-only and live.

Routes (every one under the run's path prefix, ``/PREFIX/``, and behind :func:`.access.protect`:
the headers, the loopback guard, the prefix and the token; the paths below are under the prefix):

- ``/``: the task list (``?q=`` search, ``state``, ``context``, ``binding``, ``upstream``,
  ``since``, ``level``; ``before`` the key to go on from); ``/rows``: a further page of it;
- ``/tasks/{task_id}``: one task (``?n=`` or ``?position=``: the scrubber there);
  ``/task/rows``, ``/task/at``, ``/task/event``, ``/task/findings``, ``/task/runs``: its parts,
  as fragments; ``/tasks/TASK@N``: its run N (the CLI's selector), a task of several runs its
  latest, the runs side by side above it;
- ``/diff?a=..&b=..``: two tasks (or two runs, ``TASK@N``) side by side, ``diff``'s normalisation;
- ``/live/tasks``, ``/live/task``, ``/live/run``: server-sent events as the log grows (:mod:`.live`);
- ``/static/``: the stylesheet, our script and the vendored htmx (no CDN, no build step).

Pages are rendered on the server (:mod:`.render`, the templates the static export uses too). The
store is read on worker threads; the event streams wait on the one :class:`.live.Follower`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import quote, urlencode

import anyio
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from a2a_tape.fold.fold import RunRef
from a2a_tape.fold.views import TaskView
from a2a_tape.inspection.diff import normalised, run_sides
from a2a_tape.inspection.doctor import findings as doctor_findings
from a2a_tape.inspection.doctor_index import FaultCounter
from a2a_tape.inspection.listing import family_of
from a2a_tape.inspection.messages import LoneMessage
from a2a_tape.inspection.ui import diffview, pages, reading, rows
from a2a_tape.inspection.ui.access import protect
from a2a_tape.inspection.ui.follower import KEEPALIVE, Follower, sse
from a2a_tape.inspection.ui.reading import BadQuery, Filters
from a2a_tape.inspection.ui.render import STATIC, fragment, render
from a2a_tape.inspection.ui.scrub import At, Scrubber
from a2a_tape.inspection.ui.sections import message_section, task_section
from a2a_tape.inspection.verify_runs import judged
from a2a_tape.store import Store
from a2a_tape.wire.loopback import LOOPBACK_ONLY, Guard

KEEPALIVE_EVERY = 15.0
"""Seconds between keep-alive comments on a quiet event stream."""
RUN_PAGE_EVERY = 0.5
"""Seconds at least between two renderings of a run page as its task grows (a run page is the
run read whole: a fast stream is shown as it stands every half second, not once per commit)."""


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

    # -- the task list ------------------------------------------------------------------------

    async def tasks(self, request: Request) -> Response:
        try:
            f = reading.parse_filters(request.query_params.multi_items())
            before = reading.parse_position(request.query_params.get("before"), "before")
        except BadQuery as exc:
            return self.page("tasks.html", status_code=400, **self._list_context(Filters(), None, problem=str(exc)))
        page = await self.read(reading.task_list, self.store, f, before=before)
        return self.page("tasks.html", **self._list_context(f, page))

    async def list_rows(self, request: Request) -> Response:
        try:
            f = reading.parse_filters(request.query_params.multi_items())
            before = reading.parse_position(request.query_params.get("before"), "before")
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        page = await self.read(reading.task_list, self.store, f, before=before)
        context = self._list_context(f, page)
        return HTMLResponse(self.fragment("tasks.html", "rows", **context))

    def _list_context(self, f: Filters, page: reading.ListPage | None, problem: str | None = None) -> dict[str, Any]:
        found = [] if page is None else page.rows
        more = None
        if page is not None and page.more is not None:
            more = self.url("/rows", [*f.query(), ("before", str(page.more))])
        live = self.url("/live/tasks", [*f.query(), ("after", str(self.follower.position))])
        if problem is None and not self.writable:
            problem = "This log is read-only here: the list shows the task projection as it was last kept."
        end = "no tasks match" if not found and f != Filters() else ("no tasks recorded yet" if not found else "")
        return {
            "f": f,
            "rows": [_Linked(r, self.root) for r in found],
            "more": more,
            "live_url": live,
            "states": reading.STATES,
            "bindings": reading.BINDINGS,
            "problem": problem,
            "end_note": end or "the end of the list",
            "title": "a2a-tape: tasks",
            "drop": None,
        }

    # -- one task --------------------------------------------------------------------------------

    async def task(self, request: Request) -> Response:
        key = request.path_params["task_id"]
        found = await self.read(reading.select, self.store, key)
        if isinstance(found, reading.NotFound):
            return self._not_found(found.message)
        if isinstance(found, LoneMessage):
            return await self._message_page(key, found)
        if found.key != key:
            return RedirectResponse(self.href(found.key), 303)
        task_id = found.task_id
        try:
            n = reading.parse_position(request.query_params.get("n"), "n")
            position = reading.parse_position(request.query_params.get("position"), "position")
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        if (found.number or 1) > 1 or await self.read(reading.run_count, self.store, task_id) > 1:
            return await self._run_page(found)
        context = await self.read(self._task_context, task_id, n, position)
        return self.page("task_page.html", title=f"a2a-tape: task {task_id}", **context)

    def _not_found(self, message: str) -> Response:
        return self.page("notice.html", title="a2a-tape: not found", message=message, status_code=404)

    async def _run_page(self, found: reading.Selected) -> Response:
        """A task of several runs (or a run named): the run shown whole (its static section:
        its final state, findings and every event), the runs side by side above it."""
        context = await self.read(self._run_context, found)
        if isinstance(context, reading.NotFound):
            return self._not_found(context.message)
        return self.page("task_page.html", title=f"a2a-tape: task {context['shown']}", **context)

    def _run_context(self, found: reading.Selected) -> dict[str, Any] | reading.NotFound:
        got = reading.runs_of(self.store, found.task_id, found.number)
        if isinstance(got, reading.NotFound):
            return got
        runs, one = got
        label = f"run {one.number} of {len(runs)}" if len(runs) > 1 else None
        card = reading.card_fetch(self.store, one.exchanges)
        family = family_of(self.store, one.task_id)
        section = task_section(
            one.task_id, one.events, one.exchanges, run_label=label, card=card, family=family, task_link=self.href
        )
        live = self.url("/live/run", {"task": found.key, "after": str(self.follower.position)})
        return {
            "section": Markup(section),
            "shown": one.selector,
            "urls": {"diff": self.url("/diff", {"a": one.selector}), "live_run": live},
            **self._runs_context(runs, one.number),
        }

    async def live_run(self, request: Request) -> Response:
        """A run page's stream: the runs and the run shown, made again each time the task grows."""
        try:
            after = _resume(request)
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        found = await self.read(reading.select, self.store, request.query_params.get("task", ""))
        if not isinstance(found, reading.Selected):
            return PlainTextResponse("no such task or run\n", 404)
        return _stream(self._run_stream(found, after))

    async def _run_stream(self, found: reading.Selected, after: int) -> AsyncIterator[bytes]:
        last = 0.0
        async for grown in self._grown(after):
            if grown is None:
                yield KEEPALIVE
                continue
            wait = last + RUN_PAGE_EVERY - anyio.current_time()
            if wait > 0:  # a fast stream: the page is made again at most this often, with all that came
                await anyio.sleep(wait)
            html = await self.read(self._run_update, found, *grown)
            if html is not None:
                last = anyio.current_time()
                yield sse("run", html, grown[1])

    def _run_update(self, found: reading.Selected, after: int, upto: int) -> str | None:
        """The run page again when the task has events in ``(after, upto]`` (None: it has none)."""
        if not any(ev.position <= upto for ev in self.store.iter_task(found.task_id, after=after, limit=1)):
            return None
        context = self._run_context(found)
        if isinstance(context, reading.NotFound):
            return None
        return self.fragment("task_page.html", "run_page", **context)

    def _runs_context(self, runs: list[Any], current: int) -> dict[str, Any]:
        verdicts = judged(runs)  # each verify run against the run it was compared with, by verify's rules
        cards = [rows.run_card(r, verdicts.get(r.number)) for r in runs]
        return {"runs": cards, "pairs": rows.run_pairs(cards), "current": current, "href": self.href}

    async def task_runs(self, request: Request) -> Response:
        """The runs panel of a task's live page (loaded after the page: it reads the task whole)."""
        task_id = request.query_params.get("task", "")

        def read() -> str:
            got = reading.runs_of(self.store, task_id, None)
            if isinstance(got, reading.NotFound):
                return ""
            runs, one = got
            return self.fragment("runs.html", "runs", **self._runs_context(runs, one.number))

        return HTMLResponse(await self.read(read))

    async def _message_page(self, key: str, lone: LoneMessage) -> Response:
        """A lone Message reply's page: the task page's layout, headed as a message; it never
        grows (an answered send), so it is the static export's section, with every event."""
        name = lone.message_id or lone.context_id or lone.key
        if key != name:
            return RedirectResponse(self.href(name), 303)
        section = await self.read(message_section, lone)
        return self.page("task_page.html", title=f"a2a-tape: message {name}", section=Markup(section), urls={})

    def _task_context(self, task_id: str, n: int | None, position: int | None) -> dict[str, Any]:
        st = self.store
        cursor = self.follower.position
        exchanges = st.exchanges(task_id)
        view = reading.task_view(st, task_id, exchanges)
        if position is not None:
            at = self.scrubber.at_position(task_id, position, view.events)
        else:
            at = self.scrubber.at(task_id, view.events if n is None else n, view.events, final=view)
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
            task_link=self.href,
        )
        context["at"] = at
        context["urls"] = self._task_urls(task_id, cursor)
        context["from_position"] = start or None
        if more and events:
            context["more"] = self._rows_url(task_id, events[-1])
        return context

    def _task_urls(self, task_id: str, cursor: int) -> dict[str, str]:
        q = {"task": task_id}
        return {
            "live": self.url("/live/task", {**q, "after": str(cursor)}),
            "at": self.url("/task/at", q),
            "findings": self.url("/task/findings", q),
            "text": self.url("/task/text", q),
            "position": self.href(task_id) + "?position=",
            "page": self.href(task_id),
            "diff": self.url("/diff", {"a": task_id}),
            "runs": self.url("/task/runs", q),
        }

    def _rows_url(self, task_id: str, last: Any) -> str:
        return self.url("/task/rows", {"task": task_id, "after": str(last.position)})

    async def task_rows(self, request: Request) -> Response:
        task_id, after = request.query_params.get("task", ""), request.query_params.get("after")
        try:
            position = reading.parse_position(after, "after") or 0
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        return HTMLResponse(await self.read(self._rows_fragment, task_id, position))

    def _rows_fragment(self, task_id: str, after: int) -> str:
        st = self.store
        events, more = reading.timeline(st, task_id, after=after)
        exchanges = st.exchanges(task_id)
        view = reading.task_view(st, task_id, exchanges)
        previous = reading.previous_time(st, task_id, after) if after else None
        card = reading.card_fetch(st, exchanges)
        context = pages.task_context(view, exchanges, events, findings=None, previous_at=previous, card=card)
        context["urls"] = self._task_urls(task_id, self.follower.position)
        if more and events:
            context["more"] = self._rows_url(task_id, events[-1])
        return self.fragment("task.html", "rows", **context)

    async def task_at(self, request: Request) -> Response:
        task_id = request.query_params.get("task", "")
        try:
            n = reading.parse_position(request.query_params.get("n"), "n")
            position = reading.parse_position(request.query_params.get("position"), "position")
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        return HTMLResponse(await self.read(self._at_fragment, task_id, n, position))

    def _at_fragment(self, task_id: str, n: int | None, position: int | None) -> str:
        view = reading.task_view(self.store, task_id, self.store.exchanges(task_id))
        if position is not None:
            at = self.scrubber.at_position(task_id, position, view.events)
        else:
            at = self.scrubber.at(task_id, view.events if n is None else n, view.events, final=view)
        return self._channels(view, at)

    def _channels(self, view: TaskView, at: At) -> str:
        context = {
            "h": rows.header(view, []),
            "view": at.view,
            "tools": rows.tool_table(at.view),
            "at": at,
            "urls": self._task_urls(view.task_id, self.follower.position),
        }
        return self.fragment("task.html", "channels", **context)

    async def task_text(self, request: Request) -> Response:
        """The whole answer (or reasoning) after ``n`` events, as plain text: what a page clips."""
        task_id, what = request.query_params.get("task", ""), request.query_params.get("what", "answer")
        try:
            n = reading.parse_position(request.query_params.get("n"), "n")
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        if what not in ("answer", "reasoning"):
            return PlainTextResponse("what: answer or reasoning\n", 400)

        def read() -> str | None:
            view = reading.task_view(self.store, task_id, self.store.exchanges(task_id))
            at = self.scrubber.at(task_id, view.events if n is None else n, view.events, final=view)
            return at.view.final_answer if what == "answer" else at.view.reasoning

        found = await self.read(read)
        return PlainTextResponse(found or "", headers={"content-disposition": "inline"})

    async def task_event(self, request: Request) -> Response:
        task_id = request.query_params.get("task", "")
        try:
            position = reading.parse_position(request.query_params.get("position"), "position")
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        ev = None if position is None else await self.read(reading.event_at, self.store, task_id, position)
        if ev is None:
            return PlainTextResponse("no such event in this task\n", 404)
        return HTMLResponse(render("event.html", e=pages.event_detail(ev)))

    async def task_findings(self, request: Request) -> Response:
        task_id = request.query_params.get("task", "")
        return HTMLResponse(await self.read(self._findings_fragment, task_id))

    def _findings_fragment(self, task_id: str) -> str:
        st = self.store
        exchanges = st.exchanges(task_id)
        found = doctor_findings(task_id, list(st.iter_task(task_id)), exchanges)
        return self.fragment(
            "task.html",
            "findings",
            findings=rows.finding_rows(found),
            urls=self._task_urls(task_id, self.follower.position),
        )

    # -- diff ------------------------------------------------------------------------------------

    async def diff(self, request: Request) -> Response:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        context = await self.read(self._diff_context, a, b)
        status = 404 if context["problem"] else 200  # a task or run that is not there
        return self.page("diff.html", title="a2a-tape: diff", status_code=status, **context)

    def _diff_context(self, a: str, b: str) -> dict[str, Any]:
        """Two tasks, or two runs (``TASK@N``; a task alone beside a run: its latest run), as
        ``a2a-tape diff`` compares them."""
        st = self.store
        found = [reading.select(st, k) if k else None for k in (a, b)]
        problems = [f.message for f in found if isinstance(f, reading.NotFound)]
        problems += [
            f"{k!r} is a lone Message reply, not a task."
            for k, f in zip((a, b), found, strict=True)
            if isinstance(f, LoneMessage)
        ]
        result, what = None, "tasks"
        sa, sb = found
        if not problems and isinstance(sa, reading.Selected) and isinstance(sb, reading.Selected):
            if sa.number is None and sb.number is None:
                ta, tb = sa.task_id, sb.task_id
                result = diffview.compare(normalised(ta, st.read_task(ta)), normalised(tb, st.read_task(tb)))
            else:
                picked = []
                for side in (sa, sb):
                    got = reading.runs_of(st, side.task_id, side.number)
                    if isinstance(got, reading.NotFound):
                        problems.append(got.message)
                    else:
                        picked.append(got[1])
                if not problems:
                    ra, rb = picked
                    what = "runs"
                    result = diffview.compare(*run_sides(ra, rb), labels=(ra.selector, rb.selector))
        problem = " ".join(problems) or None
        return {"a": a, "b": b, "problem": problem, "result": result, "what": what, "href": self.href}

    # -- live ------------------------------------------------------------------------------------

    async def live_tasks(self, request: Request) -> Response:
        try:
            f = reading.parse_filters(request.query_params.multi_items())
            after = _resume(request)
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        return _stream(self._list_stream(f, after))

    async def _grown(self, after: int) -> AsyncIterator[tuple[int, int] | None]:
        """``(from, to)`` each time the log grows past ``after`` (None after a quiet while: time for a
        keep-alive); ends when the server stops."""
        while not self.follower.closing:
            upto = await self.follower.past(after, KEEPALIVE_EVERY)
            if self.follower.closing:
                return
            if upto <= after:
                yield None
                continue
            yield after, upto
            after = upto

    async def _list_stream(self, f: Filters, after: int) -> AsyncIterator[bytes]:
        async for grown in self._grown(after):
            if grown is None:
                yield KEEPALIVE
                continue
            for html in await self.read(self._list_updates, f, *grown):
                yield sse("task", html, grown[1])

    def _list_updates(self, f: Filters, after: int, upto: int) -> list[str]:
        """The rows of the tasks with events in ``(after, upto]``, one message each: the page puts
        each at the top in place of its old row (a hidden row when it no longer passes the filters)."""
        st = self.store
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
            row = _Linked(rows.list_row(view, faults, runs=runs.get(t, ())), self.root)
            keep = reading.passes(st, view, f, faults)
            out.append(
                self.fragment(
                    "tasks.html",
                    "rows",
                    rows=[row] if keep else [],
                    more=None,
                    end_note=None,
                    drop=None if keep else row.dom_id,
                )
            )
        return out

    async def live_task(self, request: Request) -> Response:
        task_id = request.query_params.get("task", "")
        try:
            after = _resume(request)
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        return _stream(self._task_stream(task_id, after))

    async def _task_stream(self, task_id: str, after: int) -> AsyncIterator[bytes]:
        last_at = await self.read(_last_time, self.store, task_id, after)
        async for grown in self._grown(after):
            if grown is None:
                yield KEEPALIVE
                continue
            update = await self.read(self._task_update, task_id, *grown, last_at)
            if update is not None:
                last_at = update.last_at
                for event, html in (("rows", update.rows), ("header", update.header), ("channels", update.channels)):
                    yield sse(event, html, grown[1])

    def _task_update(self, task_id: str, after: int, upto: int, last_at: float | None) -> pages.Update | None:
        st = self.store
        new = [ev for ev in st.iter_task(task_id, after=after) if ev.position <= upto]
        if not new:
            return None
        exchanges = st.exchanges(task_id)
        view = reading.task_view(st, task_id, exchanges)
        card = reading.card_fetch(st, exchanges)
        context = pages.task_context(view, exchanges, new, findings=None, previous_at=last_at, card=card)
        context["urls"] = self._task_urls(task_id, upto)
        at = self.scrubber.at(task_id, view.events, view.events, final=view)
        context["at"] = at
        return pages.Update(
            rows=self.fragment("task.html", "rows", **context),
            header=self.fragment("task.html", "header", **context),
            channels=self._channels(view, at),
            last_at=new[-1].received_at,
        )


def _last_time(store: Store, task_id: str, upto: int) -> float | None:
    """When the task's last event at or before position ``upto`` arrived, as the projection has
    it (None when the projection is past ``upto`` or has no such task)."""
    view = reading.views_of(store, [task_id]).get(task_id)
    return view.last_at if view is not None and view.last_position <= upto else None


def _resume(request: Request) -> int:
    """Where an event stream starts: after the browser's ``Last-Event-ID`` (a reconnection), else
    after the ``after`` the page was rendered at."""
    given = request.headers.get("last-event-id") or request.query_params.get("after")
    return reading.parse_position(given, "after") or 0


def _stream(events: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream", headers={"x-accel-buffering": "no"})


class _Linked:
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

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        follower.start()
        try:
            yield
        finally:
            follower.stop()

    routes = [
        Route("/", ui.tasks),
        Route("/rows", ui.list_rows),
        Route("/tasks/{task_id:path}", ui.task),
        Route("/task/rows", ui.task_rows),
        Route("/task/at", ui.task_at),
        Route("/task/event", ui.task_event),
        Route("/task/findings", ui.task_findings),
        Route("/task/text", ui.task_text),
        Route("/task/runs", ui.task_runs),
        Route("/diff", ui.diff),
        Route("/live/tasks", ui.live_tasks),
        Route("/live/task", ui.live_task),
        Route("/live/run", ui.live_run),
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
