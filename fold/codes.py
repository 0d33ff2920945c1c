"""The fault codes: one table, the only one. Every view that names a fault names it by these codes:
``a2a-tape doctor`` (its findings, ``--json`` and ``--help``), the fold's faults (``channels``,
``channels --json``, the golden recordings' expected files), the task list's counts and the UI.

The fold notes the faults it can see while folding (lifecycle, stream ends, JSON-RPC errors, the
stored copy); doctor (:mod:`inspection.doctor`) takes those of :data:`FROM_FOLD` from it as they are
and finds the rest itself (``closed-while-working`` at its own level: an error when the task was
never settled; the fold says it as a warning while it cannot know more).
"""

from __future__ import annotations

CLOSED_WHILE_WORKING = "closed-while-working"
EVENTS_AFTER_TERMINAL = "events-after-terminal"
TERMINAL_CHANGED = "terminal-changed"
AFTER_LAST_CHUNK = "after-last-chunk"
RPC_ERROR = "rpc-error"
STORED_COPY_DIFFERS = "stored-copy-differs"
UNDECODABLE = "undecodable"
PUSH_MISSED_STATE = "push-missed-state"
PUSH_AFTER_TERMINAL = "push-after-terminal"
PUSH_WITHOUT_TOKEN = "push-without-token"
PUSH_OTHER_TASK = "push-other-task"
PUSH_ONLY = "push-only"

CHECKS: dict[str, str] = {
    CLOSED_WHILE_WORKING: "a stream ended while the task was still submitted/working",
    EVENTS_AFTER_TERMINAL: "events arrived after the task reached a terminal state",
    TERMINAL_CHANGED: "a terminal state changed afterwards (e.g. completed, then working)",
    "first-item": "a stream's first item is neither a Task nor a lone Message",
    "answer-shown-twice": "the final answer is doubled (by the agent, or for a naive client by a snapshot)",
    "text-crosses-channels": "one artifact carried text of more than one channel",
    "artifact-not-closed": "an artifact never got lastChunk (while others did, or the task never finished)",
    "sequence-gap": "upstream sequence numbers skip values",
    "sequence-repeat": "upstream sequence numbers or event ids repeat",
    "interrupted-no-follow-up": "the task waits for input or auth and nothing followed",
    UNDECODABLE: "an item could not be decoded",
    AFTER_LAST_CHUNK: "text appended to an artifact after its lastChunk (from the projection)",
    RPC_ERROR: "a JSON-RPC error arrived on the task's stream (from the projection)",
    STORED_COPY_DIFFERS: "the agent's stored task (a GetTask answer after the stream ended it) differs from the stream",
    PUSH_MISSED_STATE: "a state the agent streamed or stored was never pushed to the task's webhook",
    PUSH_AFTER_TERMINAL: "a push arrived after the push of the task's terminal state",
    PUSH_WITHOUT_TOKEN: "a push came without the config's token, or with another",
    PUSH_OTHER_TASK: "a push for the task came to a webhook no config of the task names",
    PUSH_ONLY: "the log knows the task by its pushes alone: its send, stream or stored copy was never recorded",
}
"""Every fault code, with what it means (doctor's ``--help`` prints this table; ``--json``
consumers rely on the codes)."""

FROM_FOLD = frozenset({TERMINAL_CHANGED, EVENTS_AFTER_TERMINAL, AFTER_LAST_CHUNK, RPC_ERROR, STORED_COPY_DIFFERS})
"""The fold's faults doctor reports as the fold notes them (the others it finds itself)."""
