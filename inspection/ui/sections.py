"""One task's section, or one lone Message reply's, as HTML (``ui/templates/task.html``): the same
section in the live UI and in ``export --format html``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from a2a_tape.inspection.doctor import findings
from a2a_tape.inspection.listing import Family
from a2a_tape.inspection.messages import LoneMessage
from a2a_tape.inspection.steps import task_view
from a2a_tape.inspection.ui import pages
from a2a_tape.inspection.ui.render import render
from a2a_tape.store import Exchange, StoredEvent


def task_section(
    task_id: str,
    events: Sequence[StoredEvent],
    exchanges: Iterable[Any] = (),
    *,
    run_label: str | None = None,
    card: Exchange | None = None,
    family: Family | None = None,
    task_link: Callable[[str], str] | None = None,
) -> str:
    """One task's section (``ui/templates/task.html``, the live UI's task view without a script):
    its final state and every event. ``run_label``: which run of the task these events are
    (``run 2 of 3``), for a task of several runs; ``card``: the agent-card fetch that began them;
    ``family``, ``task_link``: its parent and children, and their pages (:func:`pages.task_context`)."""
    exchanges = list(exchanges)
    view = task_view(task_id, events, exchanges)
    found = findings(task_id, events, exchanges)
    context = pages.task_context(
        view, exchanges, events, findings=found, preview=None, card=card, family=family, task_link=task_link
    )
    return render("task.html", live=False, run_label=run_label, **context)


def message_section(m: LoneMessage) -> str:
    """A lone Message reply's section: the task section's layout, headed as a message (no task)."""
    exchanges = [m.exchange]
    view = task_view(m.key, m.events, exchanges)
    found = findings(m.key, m.events, exchanges)
    context = pages.task_context(view, exchanges, m.events, findings=found, preview=None, kind="message")
    return render("task.html", live=False, **context)
