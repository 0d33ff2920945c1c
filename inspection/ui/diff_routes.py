"""The UI's diff (``/diff?a=..&b=..``): two tasks, or two runs (``TASK@N``), side by side, with
``a2a-tape diff``'s normalisation."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from a2a_tape.inspection.diff import normalised, run_sides
from a2a_tape.inspection.messages import LoneMessage
from a2a_tape.inspection.ui import diffview, reading
from a2a_tape.inspection.ui.app_state import UI


class DiffRoutes:
    """The diff page over ``ui``'s store."""

    def __init__(self, ui: UI) -> None:
        self.ui = ui

    async def diff(self, request: Request) -> Response:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        context = await self.ui.read(self._diff_context, a, b)
        status = 404 if context["problem"] else 200  # a task or run that is not there
        return self.ui.page("diff.html", title="a2a-tape: diff", status_code=status, **context)

    def _diff_context(self, a: str, b: str) -> dict[str, Any]:
        """Two tasks, or two runs (``TASK@N``; a task alone beside a run: its latest run), as
        ``a2a-tape diff`` compares them."""
        st = self.ui.store
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
        return {"a": a, "b": b, "problem": problem, "result": result, "what": what, "href": self.ui.href}
