"""Export a task as a Mermaid sequence diagram: Client, Recorder and Agent.

Each exchange draws its request (Client to Recorder to Agent); then every recorded event is one
arrow: upstream events go Agent to Recorder (the recorder writes them before forwarding), and
events a2a-tape added itself (origin local: a recovery note, a synthetic FAILED) go Recorder to
Client. Every arrow label starts with ``[position]`` so a reader can find it in ``show``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from a2a_tape.inspection.steps import summary
from a2a_tape.store import Exchange, Recordings, StoredEvent, decode_item

PARTICIPANTS = ("Client", "Recorder", "Agent")


def label(text: str, limit: int = 70) -> str:
    """Text safe inside a Mermaid message (no statement breaks, no entity or comment syntax)."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    out = []
    for ch in text:
        if ch == "#":
            out.append("#35;")
        elif ch == ";":
            out.append("#59;")
        elif ch == "<":
            out.append("#lt;")
        elif ch == ">":
            out.append("#gt;")
        elif ch == "%":
            out.append("#37;")
        elif ch == ":":
            out.append("#58;")
        else:
            out.append(ch)
    return "".join(out)


def build_mermaid(store: Recordings, task_ids: Iterable[str], *, progress: Callable[[int], None] | None = None) -> str:
    """The diagram; ``progress(n)`` is called after each task (for a progress bar)."""
    lines = ["sequenceDiagram"]
    lines += [f"    participant {p}" for p in PARTICIPANTS]
    for n, task_id in enumerate(task_ids, 1):
        if progress is not None and n > 1:
            progress(n - 1)
        lines += _arrows(f"task {task_id}", task_id, store.read_task(task_id), store.exchanges(task_id))
    return "\n".join(lines) + "\n"


def message_mermaid(key: str, events: Sequence[StoredEvent], exchanges: Iterable[Exchange]) -> str:
    """The diagram of a lone Message reply (no task): its exchange and its events."""
    lines = ["sequenceDiagram", *(f"    participant {p}" for p in PARTICIPANTS)]
    lines += _arrows(f"message {key} (no task)", None, events, exchanges)
    return "\n".join(lines) + "\n"


def _arrows(title: str, task_id: str | None, events: Sequence[StoredEvent], exchanges: Iterable[Exchange]) -> list[str]:
    """A Note naming what follows, then each exchange's request and each event as an arrow."""
    by_id = {ex.id: ex for ex in exchanges}
    lines = [f"    Note over Client,Agent: {label(title)}"]
    current: object = object()
    for ev in events:
        if ev.exchange_id != current:
            current = ev.exchange_id
            ex = by_id.get(ev.exchange_id)
            if ex is not None:
                what = label(ex.rpc_method or ex.http_method or "request")
                lines.append(f"    Client->>Recorder: {what}")
                lines.append(f"    Recorder->>Agent: {what}")
        item = decode_item(bytes(ev.payload))
        said = summary(item, task_id)
        if task_id is not None:  # the task id is in the Note above: drop it from artifact ids so the text fits
            said = said.replace(task_id + ":", "…:")
        text = label(f"[{ev.position}] {item.kind} {said}", limit=90)
        if ev.origin == "local":
            lines.append(f"    Recorder-->>Client: {text}")
        else:
            lines.append(f"    Agent-->>Recorder: {text}")
    return lines
