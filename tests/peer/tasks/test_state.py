"""The task-status transition table (``_tasks/_state.py``) against the spec's edges."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trio_mcp.peer._messages import (
    TaskStatus,
)
from trio_mcp.peer._tasks._state import TRANSITIONS, IllegalTransition, TaskEvent, next_status

# --- the state table ----------------------------------------------------------------------

_EVENTS = list(TaskEvent)


def test_state_table_is_exactly_the_spec_edges() -> None:
    W, IR = TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED
    edges = {(src, dst) for (src, _), dst in TRANSITIONS.items()}
    terminal = {TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED}
    assert edges == {(W, IR), (IR, W)} | {(s, t) for s in (W, IR) for t in terminal}


@given(st.lists(st.sampled_from(_EVENTS), max_size=30))
@settings(max_examples=500)
def test_state_random_event_sequences_never_leave_a_terminal_state(
    events: list[TaskEvent],
) -> None:
    status: TaskStatus | None = TaskStatus.WORKING
    for event in events:
        before = status
        try:
            status = next_status(status, event)
        except IllegalTransition:
            # Illegal: from a terminal (except expiry), from a deleted task,
            # or input given while working.
            assert (
                before is None
                or before.is_terminal
                or (before is TaskStatus.WORKING and event is TaskEvent.INPUT_GIVEN)
                or (before is TaskStatus.INPUT_REQUIRED and event is TaskEvent.NEED_INPUT)
            )
            continue
        if before is not None and before.is_terminal:
            assert event is TaskEvent.EXPIRE and status is None
        if status is not None and before is not None:
            assert (before, status) in {(s, d) for (s, _), d in TRANSITIONS.items()}
