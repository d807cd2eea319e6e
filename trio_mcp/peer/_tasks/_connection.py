"""What the task runtime needs from a connection, defined here, below the peer.

The peer's connections implement these protocols; the registry, the actors
and the handles import nothing from the session or the features, so the task
runtime can be tested, stored and reasoned about on its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, final

import trio

T = TypeVar("T")


class TaskConnection(Protocol):
    """A live connection to a requestor, as a receiver's task actor sees it."""

    @property
    def is_open(self) -> bool:
        """False once the connection has closed."""
        ...

    def notify_soon(self, method: str, params: Any = None) -> None:
        """Queue an optional notification without waiting."""
        ...

    async def request_raw(
        self, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Send a request and return the raw result JSON.

        Raises:
            RemoteError: The requestor answered with an error.
            ConnectionClosed: The connection closed first.
        """
        ...


class RequestorConnection(Protocol):
    """A connection to a receiver, as a requestor's :class:`TaskHandle` sees it."""

    @property
    def task_waiters(self) -> StatusWaiters:
        """Wake-ups set by ``notifications/tasks/status`` on this connection."""
        ...

    async def request(self, method: str, params: Any, result_type: type[T]) -> T:
        """Send a request and return its typed result."""
        ...

    async def request_raw(
        self, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Send a request and return the raw result JSON."""
        ...

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``fn(*args)`` in the connection's nursery."""
        ...

    def forget_progress(self, token: str | int) -> None:
        """Stop delivering progress for ``token``."""
        ...


@final
class StatusWaiters:
    """One wake-up event per followed task, set by a status notification.

    A requestor never relies on ``notifications/tasks/status`` (they are
    optional); it polls, and an event only ends a poll's sleep early.
    """

    def __init__(self) -> None:
        self._events: dict[str, trio.Event] = {}
        self._closed = False

    def event(self, task_id: str) -> trio.Event:
        """An event set at the next status notification for ``task_id``."""
        event = self._events.get(task_id)
        if event is None:
            event = self._events[task_id] = trio.Event()
            if self._closed:
                event.set()
        return event

    def wake(self, task_id: str) -> None:
        """A status notification for ``task_id`` arrived."""
        event = self._events.pop(task_id, None)
        if event is not None:
            event.set()

    def discard(self, task_id: str) -> None:
        """Forget ``task_id``'s event (the task is terminal or no longer followed)."""
        self._events.pop(task_id, None)

    def discard_if_unwaited(self, task_id: str) -> None:
        """Forget ``task_id``'s event unless some follower still waits on it."""
        event = self._events.get(task_id)
        if event is not None and not event.statistics().tasks_waiting:
            del self._events[task_id]

    def close(self) -> None:
        """The connection closed: wake every follower, now and later."""
        self._closed = True
        for event in self._events.values():
            event.set()

    def __len__(self) -> int:
        return len(self._events)
