"""The task actor: the Trio task that owns one task's state, cancel scope and outcome."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias, final

import attrs
import trio

from ..._errors import INTERNAL_ERROR, ConnectionClosed, McpError, RemoteError
from .._messages import ErrorData, Task, TaskStatus, related_task_meta
from ._connection import TaskConnection
from ._state import TaskEvent
from ._store import TaskOutcome, TaskRecord

log = logging.getLogger("trio_mcp.tasks")

#: The work of a task: computes the underlying request's result JSON.
Work: TypeAlias = Callable[["TaskActor"], Awaitable[dict[str, Any]]]


class ActorHost(Protocol):
    """What an actor needs from the registry that started it."""

    def transition(self, actor: TaskActor, event: TaskEvent, message: str | None = None) -> bool:
        """Apply ``event`` to the actor's task; False if it was ignored."""
        ...

    def finish(self, actor: TaskActor, outcome: TaskOutcome) -> None:
        """Record the outcome and move the task to its terminal status."""
        ...

    def release(self, actor: TaskActor) -> None:
        """The actor has ended: forget it (its record stays in the store)."""
        ...

    def live_peer(
        self, owner: str, prefer: TaskConnection | None = None
    ) -> TaskConnection | None:
        """An open connection of ``owner``: ``prefer`` if open, else the newest."""
        ...


@final
@attrs.define(eq=False)
class _InputRequest:
    """A request the task needs the requestor to answer (side channel)."""

    method: str
    params: dict[str, Any]
    claimed: bool = False
    answered: trio.Event = attrs.field(factory=trio.Event)
    result: dict[str, Any] | None = None
    error: RemoteError | ConnectionClosed | None = None
    peer: TaskConnection | None = None


@final
@attrs.define(eq=False)
class TaskActor:
    """The Trio task that owns one task: its state, cancel scope and outcome."""

    registry: ActorHost
    record: TaskRecord
    origin: TaskConnection | None
    progress_token: str | int | None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    announced: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    _pending_inputs: int = 0
    _inputs_send: trio.MemorySendChannel[_InputRequest] = attrs.field(init=False)
    _inputs_recv: trio.MemoryReceiveChannel[_InputRequest] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._inputs_send, self._inputs_recv = trio.open_memory_channel[_InputRequest](math.inf)

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self.record.task_id

    async def run(self, work: Work, *, task_status: trio.TaskStatus[Task]) -> None:
        """Run the task: hand back its first snapshot, then do the work.

        Started with ``await nursery.start(actor.run, work)``. The work starts
        once the ``CreateTaskResult`` has been sent (:attr:`announced`).

        Cancellation: cancelling :attr:`scope` (``tasks/cancel``, TTL expiry)
        stops the work; the status was set before the scope is cancelled.
        Cancelling the registry's nursery ends the actor without a status
        change.
        """
        registry = self.registry
        with self.scope:
            task_status.started(self.record.snapshot())
            with trio.move_on_after(5):
                await self.announced.wait()
            try:
                result = await work(self)
            except McpError as exc:
                registry.finish(self, ErrorData(exc.code, exc.message, exc.data))
            except Exception:
                log.exception("task %s failed with an exception", self.task_id)
                registry.finish(self, ErrorData(INTERNAL_ERROR, "Internal error"))
            else:
                registry.finish(self, result)
        self._inputs_send.close()
        self._inputs_recv.close()
        # A finished task needs only its record (kept by the store until it
        # expires); the actor and its channels go now.
        registry.release(self)

    # --- the input_required side channel -------------------------------------------

    async def ask(
        self, method: str, params: dict[str, Any]
    ) -> tuple[dict[str, Any], TaskConnection]:
        """Send ``method`` to the requestor on the task's behalf and await the answer.

        The request carries the related-task ``_meta``; the task is
        ``input_required`` until every outstanding request is answered. It is
        delivered on the connection that has ``tasks/result`` open for this
        task; if none does within one ``pollInterval``, it goes straight to the
        requestor's most recent connection (a requestor that only polls
        ``tasks/get`` is never stuck).

        Returns:
            The raw result and the peer that delivered it.

        Raises:
            RemoteError: The requestor answered with an error.
            ConnectionClosed: No connection of the requestor was open and the
                task was cancelled or expired while waiting.
        """
        params = dict(params)
        params["_meta"] = related_task_meta(self.task_id, params.get("_meta"))
        item = _InputRequest(method, params)
        self._pending_inputs += 1
        if self.record.status is TaskStatus.WORKING:
            self.registry.transition(self, TaskEvent.NEED_INPUT)
        try:
            self._inputs_send.send_nowait(item)
            with trio.move_on_after(self.record.poll_interval / 1000):
                await item.answered.wait()
            while not item.answered.is_set():
                if not item.claimed:
                    peer = self.registry.live_peer(self.record.owner, prefer=self.origin)
                    if peer is not None:
                        await _deliver(item, peer)
                        continue
                with trio.move_on_after(self.record.poll_interval / 1000):
                    await item.answered.wait()
            if item.error is not None:
                raise item.error
            assert item.result is not None and item.peer is not None
            return item.result, item.peer
        finally:
            self._pending_inputs -= 1
            if self._pending_inputs == 0 and self.record.status is TaskStatus.INPUT_REQUIRED:
                self.registry.transition(self, TaskEvent.INPUT_GIVEN)

    async def serve_inputs(self, peer: TaskConnection) -> None:
        """Deliver the task's side-channel requests over ``peer`` until cancelled.

        Run by ``tasks/result`` while it waits for the task to finish.
        """
        async with trio.open_nursery() as nursery, self._inputs_recv.clone() as inputs:
            async for item in inputs:
                if not item.claimed:
                    nursery.start_soon(_deliver, item, peer)


async def _deliver(item: _InputRequest, peer: TaskConnection) -> None:
    if item.claimed:
        return
    item.claimed = True
    try:
        item.result = await peer.request_raw(item.method, item.params)
        item.peer = peer
    except RemoteError as exc:
        item.error = exc
    except ConnectionClosed:
        item.claimed = False  # another connection may take it
        return
    item.answered.set()


