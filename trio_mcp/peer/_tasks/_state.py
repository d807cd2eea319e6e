"""The task status transition table (MCP 2025-11-25, "Task Status Lifecycle").

One table, role-agnostic, in the manner of h11's ``_state.py``: the receiver
uses it to move its own tasks, and the requestor's handle uses it to check what
it observes. It does not know which side is client or server.

The legal edges are exactly the spec's::

    working        -> input_required | completed | failed | cancelled
    input_required -> working | completed | failed | cancelled
    completed, failed, cancelled: terminal, no edge out

``EXPIRE`` (the TTL ran out) is not a status: from any state it deletes the
task, written here as ``None``.
"""

from __future__ import annotations

import enum
from typing import Final

from .._messages import TaskStatus


class TaskEvent(enum.Enum):
    """Something that happens to a task."""

    NEED_INPUT = "need_input"
    INPUT_GIVEN = "input_given"
    COMPLETE = "complete"
    FAIL = "fail"
    CANCEL = "cancel"
    EXPIRE = "expire"


class IllegalTransition(Exception):
    """The event has no edge out of the current status (a bug, or a lost race)."""

    def __init__(self, status: TaskStatus | None, event: TaskEvent) -> None:
        where = status.value if status is not None else "deleted"
        super().__init__(f"no transition from {where!r} on {event.value!r}")
        self.status = status
        self.event = event


W, IR = TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED
C, F, X = TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED

#: (status, event) -> next status. Missing pairs are illegal.
TRANSITIONS: Final[dict[tuple[TaskStatus, TaskEvent], TaskStatus]] = {
    (W, TaskEvent.NEED_INPUT): IR,
    (W, TaskEvent.COMPLETE): C,
    (W, TaskEvent.FAIL): F,
    (W, TaskEvent.CANCEL): X,
    (IR, TaskEvent.INPUT_GIVEN): W,
    (IR, TaskEvent.COMPLETE): C,
    (IR, TaskEvent.FAIL): F,
    (IR, TaskEvent.CANCEL): X,
}

#: The status every task starts in.
INITIAL_STATUS: Final = W


def next_status(status: TaskStatus | None, event: TaskEvent) -> TaskStatus | None:
    """Return the status after ``event``, or ``None`` when the task is deleted.

    Args:
        status: The current status, or ``None`` for a deleted task.
        event: What happened.

    Raises:
        IllegalTransition: ``event`` is not allowed from ``status``; in
            particular every event on a terminal status except ``EXPIRE``, and
            every event on a deleted task.
    """
    if status is None:
        raise IllegalTransition(status, event)
    if event is TaskEvent.EXPIRE:
        return None
    try:
        return TRANSITIONS[status, event]
    except KeyError:
        raise IllegalTransition(status, event) from None
