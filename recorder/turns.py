"""The next turn of a conversation (``record --continue TASK``): which ids the message carries.

A2A's rules (specification, "Task immutability" and "Multi-turn conversations"):

- a task that is not finished (``input-required`` or ``auth-required``: it waits for the user;
  ``submitted`` / ``working``: still running) is continued by a message naming it: the message
  carries its ``taskId`` and ``contextId``, and the agent's answer is more of the same task. In
  the log it is a new *run* of that task (each ``record`` is an observer of its own):
  ``tasks --runs`` lists a run per turn;
- a finished task (``completed``, ``failed``, ``canceled``, ``rejected``) cannot be restarted:
  the next turn is a new task in the same context, the message carrying the ``contextId`` and
  naming the task it follows in ``referenceTaskIds``;
- a lone Message reply (no task) is continued in its context (``contextId`` only).
"""

from __future__ import annotations

from typing import NamedTuple

from a2a_tape.store.events import TERMINAL_STATES


class Turn(NamedTuple):
    """The ids the next message carries."""

    context_id: str | None
    task_id: str | None = None  # the task it continues (None: the agent makes a new task)
    reference_task_ids: tuple[str, ...] = ()  # the finished task a new one follows from

    @property
    def describe(self) -> str:
        """One line for the user: what the message continues."""
        if self.task_id is not None:
            return f"continuing task {self.task_id} (context {self.context_id})"
        if self.reference_task_ids:
            return (
                f"task {self.reference_task_ids[0]} is finished: a new task in its context {self.context_id}, "
                "referring to it"
            )
        return f"a new message in context {self.context_id}"


def next_turn(task_id: str, context_id: str | None, state: str) -> Turn:
    """The next turn after task ``task_id`` (its context and its state as the log says)."""
    if state in TERMINAL_STATES:
        return Turn(context_id, None, (task_id,))
    return Turn(context_id, task_id)


def next_message_turn(context_id: str | None) -> Turn:
    """The next turn after a lone Message reply: its context, no task."""
    return Turn(context_id)
