"""The task requestor feature: follow tasks the other side hosts.

``tasks/get|result|list|cancel`` as methods, :class:`~trio_mcp.TaskHandle`
construction, and the (optional) ``notifications/tasks/status`` that wakes a
handle's poll early.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from .._messages import ListTasksResult, Notification, Task, converter
from .._tasks import TaskHandle
from ._base import PeerCore

log = logging.getLogger("trio_mcp.peer")
T = TypeVar("T")


class TaskRequestor(PeerCore):
    """Requestor-side ``tasks/*`` methods and status wake-ups."""

    def install(self) -> None:
        self.session.notification_handlers["notifications/tasks/status"] = self._on_task_status

    def _on_task_status(self, note: Notification) -> None:
        try:
            task = converter.structure(note.params or {}, Task)
        except Exception:
            log.info("malformed notifications/tasks/status ignored")
            return
        self.task_waiters.wake(task.task_id)

    def handle_from_create_result(self, raw: dict[str, Any], result_type: type[T]) -> TaskHandle[T]:
        """Wrap a raw ``CreateTaskResult`` from this peer in a :class:`TaskHandle`.

        In 2026-07-28, the answer of a ``tools/call``: a task (``resultType:
        "task"``) or the result itself (a handle already completed).

        Raises:
            RemoteProtocolError: ``raw`` is not a ``CreateTaskResult``.
        """
        return self.client_era.task_handle(raw, result_type)

    def task_handle(self, task_id: str, result_type: type[T] = dict) -> TaskHandle[T]:  # type: ignore[assignment]
        """A handle on a task known only by id (e.g. after reconnecting); see :meth:`task`."""
        return self.client_era.reattach(task_id, result_type)

    def task(self, task_id: str, result_type: type[T] = dict) -> TaskHandle[T]:  # type: ignore[assignment]
        """Reattach to a task by id, from a new connection or process (either era).

        The task must belong to this connection's requestor identity (an
        authenticated identity, e.g. a bearer token, outlives a connection).
        Nothing is sent until the handle is used. ``result_type``: what
        :meth:`TaskHandle.result` structures the result into (e.g.
        ``CallToolResult``; raw JSON by default).
        """
        return self.task_handle(task_id, result_type)

    async def get_task(self, task_id: str, *, meta: dict[str, Any] | None = None) -> Task:
        """``tasks/get``: the state of a task hosted by the other side.

        ``meta``: more ``_meta`` for the request (a children scope names the
        parent task there: its sign of life, see ``TaskLimits.orphan_after``).

        Raises:
            RemoteError: -32602 for an unknown or expired task.
            ConnectionClosed: The connection closed first.

        In 2026-07-28 the snapshot of the detailed task (its ``ttlMs`` and
        ``pollIntervalMs`` as ``ttl`` and ``poll_interval``); follow it with
        :meth:`task` for its questions and result.

        Cancellation: sends ``notifications/cancelled``; the task is unaffected.
        """
        return await self.client_era.get_task(task_id, meta)

    async def task_result(self, task_id: str) -> dict[str, Any]:
        """``tasks/result`` as raw JSON (blocks until the task is terminal).

        Prefer :meth:`TaskHandle.result`, which types the payload.

        Raises:
            LocalUsageError: In 2026-07-28 (no ``tasks/result``: use
                ``task(task_id).result()``).
            RemoteError: The underlying request's error, or -32602 for an
                unknown, expired or cancelled task.
            ConnectionClosed: The connection closed first.

        Cancellation: stops waiting (``notifications/cancelled`` is sent);
            the task itself is unaffected.
        """
        return await self.client_era.task_result(task_id)

    async def cancel_task(self, task_id: str) -> Task:
        """``tasks/cancel``: cancel a task hosted by the other side.

        In 2026-07-28 ``tasks/cancel`` only acknowledges (also a terminal
        task; cancellation is eventually consistent): the snapshot returned
        is a ``tasks/get`` right after, maybe not ``cancelled`` yet.

        Raises:
            RemoteError: -32602 for an unknown task or one already terminal
                (2026-07-28: for an unknown task).
            ConnectionClosed: The connection closed first.

        Cancellation: the cancel may or may not have reached the receiver;
            check with :meth:`get_task`.
        """
        return await self.client_era.cancel_task(task_id)

    async def list_tasks(self, cursor: str | None = None) -> ListTasksResult:
        """One page of ``tasks/list``.

        Raises:
            LocalUsageError: In 2026-07-28 (no ``tasks/list``: a client keeps
                its task ids).
            RemoteError: -32602 for a bad cursor.

        Cancellation: sends ``notifications/cancelled``; nothing else changes.
        """
        return await self.client_era.list_tasks(cursor)

    async def iter_tasks(self) -> AsyncIterator[Task]:
        """Every task the other side lists for us, following cursors to the end.

        Cancellation: stops listing.
        """
        cursor: str | None = None
        while True:
            page = await self.list_tasks(cursor)
            for task in page.tasks:
                yield task
            if not page.next_cursor:
                return
            cursor = page.next_cursor
