"""Read-only inspection commands: ``tasks``, ``show``, ``channels``."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import msgspec
import typer
from rich.table import Table

from store import decode_item

from .app import DbOption, JsonOption, app, emit_json, find_task, open_db, out


class ShowRow(msgspec.Struct):
    seq: int
    position: int
    kind: str
    received_at: float
    origin: str
    sse_event: str | None
    exchange_id: int | None
    data: Any  # the payload as received: msgspec.Raw when it is JSON, else the text / None
    raw: str | None = None  # the payload text when it is not JSON


@app.command("show")
def show_cmd(
    task: Annotated[str, typer.Argument(help="Task id (or a unique prefix).")],
    raw: Annotated[bool, typer.Option("--raw", help="Print the exact recorded bytes, one item per line.")] = False,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """The timeline of raw events of one task."""
    st = open_db(db)
    with st:
        task_id = find_task(st, task)
        events = st.read_task(task_id)
    if raw:
        for ev in events:
            sys.stdout.buffer.write(bytes(ev.payload) + b"\n")
        sys.stdout.flush()
        return
    rows = []
    for ev in events:
        item = decode_item(ev.payload)
        is_json = item.kind != "undecodable" or not item.body.reason.startswith(("invalid JSON", "undecodable"))  # type: ignore[union-attr]
        rows.append(
            ShowRow(
                seq=ev.seq, position=ev.position, kind=item.kind, received_at=ev.received_at, origin=ev.origin,
                sse_event=ev.sse_event, exchange_id=ev.exchange_id,
                data=msgspec.Raw(bytes(ev.payload)) if is_json else None,
                raw=None if is_json else bytes(ev.payload).decode("utf-8", "replace"),
            )
        )
    if json:
        emit_json(rows)
        return
    t0 = events[0].received_at if events else 0.0
    table = Table(title=f"task {task_id}", show_lines=False)
    for col in ("seq", "pos", "+s", "kind", "origin", "what"):
        table.add_column(col)
    for ev, row in zip(events, rows):
        item = decode_item(ev.payload)
        table.add_row(
            str(row.seq), str(row.position), f"{ev.received_at - t0:.3f}", row.kind,
            "LOCAL" if row.origin == "local" else "", _summary(item),
        )
    out.print(table)


def _summary(item) -> str:
    b = item.body
    k = item.kind
    if k == "artifact":
        mode = "append" if b.append else "replace"
        text = b.artifact.text.replace("\n", " ")
        return f"{b.artifact.artifact_id} {mode}{' last' if b.last_chunk else ''}: {text[:60]}"
    if k in ("status", "task"):
        return b.state
    if k == "message":
        return f"{b.message.role}: {b.message.text[:60]}"
    if k == "error":
        return f"error {b.code}: {b.message[:60]}"
    if k == "note":
        return f"{b.action}: {b.detail[:60]}"
    if k == "undecodable":
        return b.reason[:70]
    return b.summary
