"""``a2a-tape verify``: send the recorded client again to a live agent, name the first divergence.

The work is :mod:`verify.live` (the live runs) and :mod:`inspection.verify_rules` (what is
compared); this module opens the logs, prints the report (text, ``--json``, ``--junit``) and owns
the exit code: 0 every task matches, 1 a divergence, 2 bad usage or an unreachable agent.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal, NamedTuple
from xml.etree import ElementTree as ET

import anyio
import msgspec
import typer

from a2a_tape import store
from a2a_tape.cli import options
from a2a_tape.cli.app import (
    EXIT_FAILED,
    EXIT_OK,
    DbOption,
    JsonOption,
    commands,
    db_location,
    emit_json,
    fail,
    find_run,
    open_db,
    out,
    say,
)
from a2a_tape.cli.progress import ProgressOption, bar
from a2a_tape.fold.runs import Run, pick_run, served_run, task_runs
from a2a_tape.inspection.verify_rules import Divergence, Rules
from a2a_tape.inspection.words import count
from a2a_tape.replay.serve.write_back import TapeChanged, TapeStamp, stamp_of, write_whole
from a2a_tape.store.tape_copy import is_tape
from a2a_tape.verify.live import (
    AgentUnreachable,
    TaskVerdict,
    Update,
    VerifyBinding,
    VerifyOptions,
    verify,
)
from a2a_tape.verify.requests import replayed

app = commands()


class VerifyBindingOption(StrEnum):
    """``verify --binding``: the binding the recorded requests are sent in (``verify.live.VerifyBinding``)."""

    auto = "auto"
    jsonrpc = "jsonrpc"
    http_json = "http+json"
    grpc = "grpc"

    @property
    def choice(self) -> VerifyBinding:
        return self.value


BindingArg = Annotated[
    VerifyBindingOption,
    typer.Option(
        "--binding", help="auto (each request in the binding it was recorded in), jsonrpc, http+json or grpc."
    ),
]

HEADERS_ENV = "A2A_TAPE_VERIFY_HEADERS"
"""Headers sent with every request (credentials), one ``Name: value`` a line, besides ``--header``."""


class TextOption(StrEnum):
    """``--text``: how the text of each artifact is compared."""

    exact = "exact"
    similar = "similar"
    ignore = "ignore"

    @property
    def choice(self) -> Literal["exact", "similar", "ignore"]:
        return self.value


class TaskReport(msgspec.Struct):
    """One task of ``verify --json``."""

    task_id: str
    recorded: str
    live: list[str]
    verdict: str  # match / diverged / flaky / skipped
    first: Divergence | None
    divergences: list[Divergence]
    disagreements: list[Divergence]
    note: str | None = None
    update: Update | None = None  # with --update
    binding: str | None = None  # with --across-bindings: the binding the live runs were sent in


class Summary(msgspec.Struct):
    tasks: int
    matched: int
    diverged: int
    flaky: int
    skipped: int
    updated: int = 0  # tasks whose live run serve replays from now on (--update)


class VerifyReport(msgspec.Struct):
    """``verify --json`` (docs/verify.md, "The JSON report")."""

    ok: bool
    against: str
    db: str
    into: str
    summary: Summary
    tasks: list[TaskReport]


def _env_headers() -> list[tuple[str, str]]:
    lines = [line.strip() for line in os.environ.get(HEADERS_ENV, "").splitlines() if line.strip()]
    for line in lines:
        name, sep, _ = line.partition(":")
        if not sep or not name.strip():
            fail(f"{HEADERS_ENV}: {line.split(':')[0]!r}... is not 'Name: value'")
    return options.header_pairs(lines)


def _recorded_run(st: store.Store, text: str) -> tuple[Run, int]:
    """The run a task is verified against: TASK@N, else the one serve replays (the one the last
    ``--update`` adopted, else its first run that is no verify run); and how many runs the task has."""
    task, number = find_run(st, text)
    runs = task_runs(st, task)
    served = served_run(runs) if number is None else None
    return (served if served is not None else pick_run(runs, task, number)), len(runs)


class Logs(NamedTuple):
    """Where verify reads the recordings and records its live runs: ``into`` names the latter;
    ``tape``: with ``--update`` of a tape, the tape's stamp when it was read (its private copy is
    both logs, and goes back into the tape once a task was updated: :func:`_write_tape`)."""

    source: store.Store
    target: store.Store
    into: str
    tape: TapeStamp | None = None


@contextlib.contextmanager
def _target(db: str | None, into: str | None, *, update: bool = False) -> Iterator[Logs]:
    """The logs of a verify. A tape is only read (its live runs go to ``--into``, else to a
    temporary log removed at the end), unless ``--update`` writes it back."""
    loc = db_location(db)
    tape = _is_tape(loc)
    if tape and update:
        stamp = stamp_of(Path(loc))  # before it is read: a change after it is a change
        with open_db(db, readonly=True) as copy:
            yield Logs(copy, copy, loc, stamp)
        return
    if not tape and into is None:
        with open_db(db) as st:
            yield Logs(st, st, loc)
        return
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(open_db(db, readonly=True))
        if into is None:
            where = stack.enter_context(tempfile.TemporaryDirectory(prefix="a2a-tape-verify-"))
            into, name = str(Path(where) / "verify.db"), "(a temporary log)"
        else:
            name = into
        target = stack.enter_context(open_db(into, create=True))
        yield Logs(source, target, name)


def _write_tape(logs: Logs, verdicts: Sequence[TaskVerdict]) -> None:
    """``--update`` of a tape: once a task was updated, the tape is written again whole from its
    copy (its recordings, this verify's live runs, the adoptions), atomically; never otherwise."""
    if logs.tape is None or not any(v.update is not None and v.update.served is not None for v in verdicts):
        return
    try:
        write_whole(logs.target, Path(logs.into), logs.tape, source="a2a-tape verify --update")
    except TapeChanged as exc:
        fail(f"verify --update: {exc} (nothing adopted; verify --update again)")
    except OSError as exc:
        fail(f"verify --update: cannot write {logs.into}: {exc.strerror or exc} (the tape is as it was)")


def _is_tape(loc: str) -> bool:
    return "://" not in loc and Path(loc).is_file() and is_tape(loc)


def _report(v: TaskVerdict) -> TaskReport:
    return TaskReport(
        v.task_id, v.recorded, v.live, v.verdict, v.first, v.divergences, v.disagreements, v.note, v.update, v.binding
    )


def _point(label: str, p: object) -> str:
    assert isinstance(p, msgspec.Struct)
    d = msgspec.structs.asdict(p)
    where = f"{d['run']}" + (f" #{d['position']}" if d["position"] is not None else "")
    kind = f" {d['kind']}" if d["kind"] else ""
    return f"    {label:<9}{where}{kind}: {d['what']}"


def _print_text(reports: Sequence[TaskReport]) -> None:
    for r in reports:
        head = f"{r.task_id}{f' over {r.binding}' if r.binding else ''}  {r.verdict}"
        if r.verdict == "skipped":
            out.print(f"{head} ({r.note})", markup=False, highlight=False, soft_wrap=True)
            continue
        out.print(
            f"{head}  (recorded {r.recorded}, live {', '.join(r.live)})", markup=False, highlight=False, soft_wrap=True
        )
        shown = r.disagreements if r.verdict == "flaky" else r.divergences
        if shown:
            first = shown[0]
            why = "the live runs disagree" if r.verdict == "flaky" else "first divergence"
            out.print(f"  {why}: {first.rule}: {first.message}", markup=False, highlight=False, soft_wrap=True)
            out.print(_point("recorded", first.recorded), markup=False, highlight=False, soft_wrap=True)
            out.print(_point("live", first.live), markup=False, highlight=False, soft_wrap=True)
            if len(shown) > 1:
                more = ", ".join(d.rule for d in shown[1:])
                out.print(f"  also: {more}", markup=False, highlight=False, soft_wrap=True)
        if r.update is not None:
            _print_update(r.update)


def _print_update(u: Update) -> None:
    if u.served is None:
        out.print(f"  not updated: {u.why}", markup=False, highlight=False, soft_wrap=True)
        return
    what = "; ".join(u.changes) if u.changes else "nothing beyond ids and chunk boundaries"
    out.print(
        f"  updated: serve replays {u.served} (was {u.was}); changed: {what}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _junit(path: str, reports: Sequence[TaskReport], against: str) -> None:
    failures = sum(1 for r in reports if r.verdict == "diverged")
    suite = ET.Element(
        "testsuite",
        name="a2a-tape verify",
        tests=str(len(reports)),
        failures=str(failures),
        skipped=str(sum(1 for r in reports if r.verdict == "skipped")),
    )
    for r in reports:
        name = f"{r.task_id} over {r.binding}" if r.binding else r.task_id
        case = ET.SubElement(suite, "testcase", classname=f"verify {against}", name=name)
        if r.verdict == "diverged" and r.first is not None:
            d = r.first
            fault = ET.SubElement(case, "failure", message=f"{d.rule}: {d.message}", type=d.rule)
            fault.text = f"recorded {d.recorded.run} #{d.recorded.position}: {d.recorded.what}\n"
            fault.text += f"live {d.live.run} #{d.live.position}: {d.live.what}\n"
        elif r.verdict == "skipped":
            ET.SubElement(case, "skipped", message=r.note or "")
        elif r.verdict == "flaky":
            ET.SubElement(case, "system-out").text = "flaky: " + "; ".join(d.message for d in r.disagreements)
    try:
        ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
    except OSError as exc:
        fail(f"--junit: cannot write {path}: {exc.strerror or exc}")


TasksArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Task ids (or unique prefixes; TASK@N: verify against run N); default: every task of the log.",
        show_default=False,
    ),
]

AgainstArg = Annotated[
    str,
    typer.Option(
        "--against", metavar="URL", help="The live agent to send the recorded requests to.", callback=options.url
    ),
]

HeaderArg = Annotated[
    list[str] | None,
    typer.Option(
        "--header",
        "-H",
        help=f"A header 'Name: value' sent with every request (credentials; also ${HEADERS_ENV}, a line each).",
        callback=options.headers,
    ),
]

TextArg = Annotated[
    TextOption,
    typer.Option("--text", help="Compare the text of each artifact: exact, similar (ratio 0.8) or ignore."),
]

SlowerArg = Annotated[
    float | None,
    typer.Option(
        "--slower",
        metavar="FACTOR",
        help="Diverge when the time to first event or the total time exceeds FACTOR x the recorded one.",
        show_default="off",
        callback=options.seconds,
    ),
]

RunsArg = Annotated[
    int,
    typer.Option(
        "--runs", metavar="N", help="Live runs per task; live runs that disagree: flaky.", callback=options.count
    ),
]

IntoArg = Annotated[
    str | None,
    typer.Option(
        "--into",
        metavar="PATH",
        help="Record the live runs into this log; without it: the --db log, or for a tape a temporary log.",
        show_default=False,
    ),
]

TimeoutArg = Annotated[
    float,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        help="Seconds a call may wait for the agent (a stream: without an event).",
        callback=options.seconds,
    ),
]

AcrossArg = Annotated[
    bool,
    typer.Option(
        "--across-bindings",
        help="Send each recorded client over every binding the agent's card offers (JSON-RPC, HTTP+JSON, gRPC), "
        "each compared with the recording: errors by what A2A names them, in each binding's shape.",
    ),
]

UpdateArg = Annotated[
    bool,
    typer.Option(
        "--update",
        help="After a match, serve replays the live run from now on (the recording stays, as an earlier run); "
        "never after a divergence. A tape is written again whole, atomically. Not with --into.",
    ),
]

JunitArg = Annotated[
    str | None,
    typer.Option("--junit", metavar="FILE", help="Also write a JUnit XML report (a test case per task)."),
]


@app.command("verify")
def verify_cmd(
    tasks: TasksArg = None,
    against: AgainstArg = "",
    binding: BindingArg = VerifyBindingOption.auto,
    header: HeaderArg = None,
    text: TextArg = TextOption.ignore,
    slower: SlowerArg = None,
    runs: RunsArg = 1,
    into: IntoArg = None,
    timeout: TimeoutArg = 30.0,
    junit: JunitArg = None,
    update: UpdateArg = False,
    across_bindings: AcrossArg = False,
    progress: ProgressOption = False,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """Send each recorded task's requests again to a live agent, record the answer as a new run of
    the task (source verify), compare it with the recording at contract level, name the first divergence.

    Exit 0 when every task matches, 1 on a divergence, 2 on bad usage or an unreachable agent."""
    if not against:
        fail("verify needs --against URL: the live agent to send the recorded requests to")
    if slower is not None and slower < 1:
        fail(f"--slower {slower:g}: a factor of 1 or more")
    if across_bindings and binding.choice != "auto":
        fail(f"--across-bindings sends over every binding the card offers: not with --binding {binding.choice}")
    if across_bindings and update:
        fail("--update adopts one live run per task: not with --across-bindings (one per binding)")
    if update and into is not None:
        fail("--update makes a live run the one serve replays: it goes with the recordings, not --into")
    extra = _env_headers() + options.header_pairs(header or [])
    opts = VerifyOptions(
        url=against,
        binding=binding.choice,
        headers=extra,
        rules=Rules(text=text.choice, slower=slower),
        runs=runs,
        call_timeout=timeout,
        stall_timeout=timeout,
        across=across_bindings,
    )
    with _target(db, into, update=update) as logs:
        source, target = logs.source, logs.target
        names = tasks or [t.task_id for t in source.task_events()]
        found = [_recorded_run(source, t) for t in names]
        recorded = [run for run, _ in found]
        known = {run.task_id: n for run, n in found} if target is source else None
        todo = [r for r in recorded if replayed(r)]
        skipped = [
            TaskReport(r.task_id, r.selector, [], "skipped", None, [], [], "no client request recorded to send again")
            for r in recorded
            if not replayed(r)
        ]
        with bar("verify", asked=progress, unit="runs", show=bool(todo)) as report:
            try:
                verdicts = anyio.run(lambda: verify(target, todo, opts, progress=report, adopt=update, known=known))
            except AgentUnreachable as exc:
                fail(f"the agent at {against} cannot be verified: {exc}")
        _write_tape(logs, verdicts)
    reports = [_report(v) for v in verdicts] + skipped
    _finish(reports, against, db_location(db), logs.into, json=json, junit=junit)


def _finish(reports: list[TaskReport], against: str, db: str, into: str, *, json: bool, junit: str | None) -> None:
    summary = Summary(
        tasks=len(reports),
        matched=sum(1 for r in reports if r.verdict == "match"),
        diverged=sum(1 for r in reports if r.verdict == "diverged"),
        flaky=sum(1 for r in reports if r.verdict == "flaky"),
        skipped=sum(1 for r in reports if r.verdict == "skipped"),
        updated=sum(1 for r in reports if r.update is not None and r.update.served is not None),
    )
    ok = summary.diverged == 0
    if junit is not None:
        _junit(junit, reports, against)
    if json:
        emit_json(VerifyReport(ok, against, db, into, summary, reports))
    else:
        _print_text(reports)
        say(
            f"verify: {count(summary.tasks, 'task')} against {against}: {summary.matched} match, "
            f"{summary.diverged} diverged, {summary.flaky} flaky, {summary.skipped} skipped"
            + (f", {summary.updated} updated" if any(r.update is not None for r in reports) else "")
        )
    raise typer.Exit(EXIT_OK if ok else EXIT_FAILED)
