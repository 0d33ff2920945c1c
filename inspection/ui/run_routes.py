"""A task's runs in the UI: the page of a run (a task of several runs, or ``/tasks/TASK@N``: the run
shown whole, the runs side by side above it), the runs panel of a task's page (``/task/runs``) and
a run page's live stream (``/live/run``: the page made again as the task grows)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from a2a_tape.inspection.listing import family_of
from a2a_tape.inspection.ui import reading, rows
from a2a_tape.inspection.ui.app_state import UI
from a2a_tape.inspection.ui.event_streams import event_stream, grown, resume
from a2a_tape.inspection.ui.follower import KEEPALIVE, sse
from a2a_tape.inspection.ui.reading import BadQuery
from a2a_tape.inspection.ui.sections import task_section
from a2a_tape.inspection.verify_runs import judged

RUN_PAGE_EVERY = 0.5
"""Seconds at least between two renderings of a run page as its task grows (a run page is the
run read whole: a fast stream is shown as it stands every half second, not once per commit)."""


class RunRoutes:
    """The runs of a task over ``ui``'s store."""

    def __init__(self, ui: UI) -> None:
        self.ui = ui

    async def run_page(self, found: reading.Selected) -> Response:
        """A task of several runs (or a run named): the run shown whole (its static section:
        its final state, findings and every event), the runs side by side above it."""
        ui = self.ui
        context = await ui.read(self._run_context, found)
        if isinstance(context, reading.NotFound):
            return ui.not_found(context.message)
        return ui.page("task_page.html", title=f"a2a-tape: task {context['shown']}", **context)

    def _run_context(self, found: reading.Selected) -> dict[str, Any] | reading.NotFound:
        ui = self.ui
        got = reading.runs_of(ui.store, found.task_id, found.number)
        if isinstance(got, reading.NotFound):
            return got
        runs, one = got
        label = f"run {one.number} of {len(runs)}" if len(runs) > 1 else None
        card = reading.card_fetch(ui.store, one.exchanges)
        family = family_of(ui.store, one.task_id)
        section = task_section(
            one.task_id, one.events, one.exchanges, run_label=label, card=card, family=family, task_link=ui.href
        )
        live = ui.url("/live/run", {"task": found.key, "after": str(ui.follower.position)})
        return {
            "section": Markup(section),
            "shown": one.selector,
            "urls": {"diff": ui.url("/diff", {"a": one.selector}), "live_run": live},
            **self.runs_context(runs, one.number),
        }

    def runs_context(self, runs: list[Any], current: int) -> dict[str, Any]:
        verdicts = judged(runs)  # each verify run against the run it was compared with, by verify's rules
        cards = [rows.run_card(r, verdicts.get(r.number)) for r in runs]
        return {"runs": cards, "pairs": rows.run_pairs(cards), "current": current, "href": self.ui.href}

    async def task_runs(self, request: Request) -> Response:
        """The runs panel of a task's live page (loaded after the page: it reads the task whole)."""
        ui = self.ui
        task_id = request.query_params.get("task", "")

        def read() -> str:
            got = reading.runs_of(ui.store, task_id, None)
            if isinstance(got, reading.NotFound):
                return ""
            runs, one = got
            return ui.fragment("runs.html", "runs", **self.runs_context(runs, one.number))

        return HTMLResponse(await ui.read(read))

    # -- live --------------------------------------------------------------------------------------

    async def live_run(self, request: Request) -> Response:
        """A run page's stream: the runs and the run shown, made again each time the task grows."""
        try:
            after = resume(request)
        except BadQuery as exc:
            return PlainTextResponse(str(exc), 400)
        found = await self.ui.read(reading.select, self.ui.store, request.query_params.get("task", ""))
        if not isinstance(found, reading.Selected):
            return PlainTextResponse("no such task or run\n", 404)
        return event_stream(self._run_stream(found, after))

    async def _run_stream(self, found: reading.Selected, after: int) -> AsyncIterator[bytes]:
        last = 0.0
        async for got in grown(self.ui.follower, after):
            if got is None:
                yield KEEPALIVE
                continue
            wait = last + RUN_PAGE_EVERY - anyio.current_time()
            if wait > 0:  # a fast stream: the page is made again at most this often, with all that came
                await anyio.sleep(wait)
            html = await self.ui.read(self._run_update, found, *got)
            if html is not None:
                last = anyio.current_time()
                yield sse("run", html, got[1])

    def _run_update(self, found: reading.Selected, after: int, upto: int) -> str | None:
        """The run page again when the task has events in ``(after, upto]`` (None: it has none)."""
        if not any(ev.position <= upto for ev in self.ui.store.iter_task(found.task_id, after=after, limit=1)):
            return None
        context = self._run_context(found)
        if isinstance(context, reading.NotFound):
            return None
        return self.ui.fragment("task_page.html", "run_page", **context)
