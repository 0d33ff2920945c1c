"""A verify run's verdict, read back from the log: what ``a2a-tape verify`` said when it made the run.

``verify`` files each live run under the recorded task, as a run of source ``verify`` (:mod:`verify.live`).
The log keeps the run, not the report; a view that lists the runs of a task (the UI's task page) judges
each verify run again here, by verify's own rule: the contracts of the two runs compared by
:mod:`inspection.verify_rules` (:func:`~inspection.run_contract.contract`, :func:`~inspection.verify_rules.compare`),
never a comparison of its own.

Which run it was compared with: the one ``serve`` replayed when the verify run began
(:func:`fold.runs.served_run` as the log stood at its first event: the recording, or the run an earlier
``verify --update`` adopted). Judged with verify's default rules (text ignored, no time factor): a verify
run made with ``--text`` or ``--slower``, or of a run named ``TASK@N``, was judged otherwise by the
command, and the view says which rules it used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from a2a_tape.fold.runs import Run, served_run
from a2a_tape.inspection.run_contract import Contract, contract
from a2a_tape.inspection.verify_rules import Divergence, Rules, compare

Verdict = Literal["match", "diverged"]


class RunVerdict(msgspec.Struct, frozen=True):
    """A verify run against the run it was compared with: ``first`` the first divergence (None: match)."""

    live: str  # TASK@N, the verify run
    recorded: str  # TASK@N, the run it was compared with
    verdict: Verdict
    first: Divergence | None
    also: list[str]  # the rules of the other divergences, in order


def judged(runs: Sequence[Run], rules: Rules = Rules()) -> dict[int, RunVerdict]:
    """Each verify run of a task (by run number) against the run it was compared with; a verify run
    with no run before it (a log of verify runs alone: ``verify --into``) has no verdict."""
    kept: dict[int, Contract] = {}

    def of(run: Run) -> Contract:
        if run.number not in kept:
            kept[run.number] = contract(run.selector, run.task_id, run.events, run.exchanges)
        return kept[run.number]

    out: dict[int, RunVerdict] = {}
    for live in runs:
        if live.source != "verify":
            continue
        recorded = served_run([r for r in runs if r is not live], before=live.first_position)
        if recorded is None:
            continue
        found = compare(of(recorded), of(live), rules)
        out[live.number] = RunVerdict(
            live.selector,
            recorded.selector,
            "diverged" if found else "match",
            found[0] if found else None,
            [d.rule for d in found[1:]],
        )
    return out
