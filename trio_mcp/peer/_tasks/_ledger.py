"""The task ledger: records, live counts, transitions, expiry and the requestors' connections.

:class:`TaskLedger` is the bookkeeping half of :class:`~._registry.TaskRegistry`
(which adds running actors, creation and the ``tasks/*`` operations). Every
status change goes through :meth:`TaskLedger.transition` and so through the
one transition table.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable, Iterator
from typing import Any

import trio

from ..._errors import INVALID_PARAMS, McpError
from .._messages import ErrorData, TaskStatus
from ._actor import TaskActor
from ._connection import TaskConnection
from ._limits import RateLimiter, TaskLimits
from ._shared import RecordMirror
from ._state import IllegalTransition, TaskEvent, next_status
from ._store import MemoryTaskStore, TaskOutcome, TaskRecord, TaskStore, now_iso

audit = logging.getLogger("trio_mcp.audit")
log = logging.getLogger("trio_mcp.tasks")


class TaskLedger:
    """What is known of every task: records (in the store), actors, counts, deadlines.

    Args:
        limits: The bounds on TTLs, counts, pages and rates.
        store: Where records live; :class:`MemoryTaskStore` by default.
    """

    def __init__(self, limits: TaskLimits, store: TaskStore | None) -> None:
        self.limits = limits
        self.store: TaskStore = store if store is not None else MemoryTaskStore()
        self._actors: dict[str, TaskActor] = {}
        self._live: dict[str, int] = {}
        self._peers: dict[str, list[TaskConnection]] = {}
        self._expiry: list[tuple[float, str]] = []
        self._reaper_wakeup = trio.Event()
        self._rate = RateLimiter(limits.rate_per_second, limits.rate_burst)
        #: Callables told of every new task and every status change, with the
        #: record (read it, do not change it). For live views and metrics; an
        #: observer that raises is logged and skipped.
        self.observers: list[Callable[[TaskRecord], None]] = []
        #: With a shared store: where every change of a local record is copied.
        self.mirror: RecordMirror | None = None

    # --- the requestors' connections -----------------------------------------------------

    def attach(self, owner: str, peer: TaskConnection) -> None:
        """Record that ``peer`` is a live connection of requestor ``owner``."""
        self._peers.setdefault(owner, []).append(peer)

    def detach(self, owner: str, peer: TaskConnection) -> None:
        """Forget a closed connection of ``owner``."""
        peers = self._peers.get(owner)
        if peers and peer in peers:
            peers.remove(peer)
            if not peers:
                del self._peers[owner]

    def live_peer(self, owner: str, prefer: TaskConnection | None = None) -> TaskConnection | None:
        """Return an open connection of ``owner``: ``prefer`` if open, else the newest."""
        peers = self._peers.get(owner, ())
        if prefer is not None and prefer in peers and prefer.is_open:
            return prefer
        for peer in reversed(peers):
            if peer.is_open:
                return peer
        return None

    # --- transitions ------------------------------------------------------------------

    def transition(self, actor: TaskActor, event: TaskEvent, message: str | None = None) -> bool:
        record = actor.record
        if self._actors.get(record.task_id) is not actor:
            # The task expired and was deleted (the table's ``None`` status):
            # nothing happens to it any more, not even its pending input
            # request being withdrawn as its work is cancelled.
            log.debug("task %s: %s ignored after expiry", record.task_id, event.value)
            return False
        try:
            status = next_status(record.status, event)
        except IllegalTransition:
            if record.status.is_terminal:
                # The work finished in the same instant as a cancel: the task
                # stays in its terminal status (spec: stays cancelled).
                log.debug(
                    "task %s: %s ignored in %s", record.task_id, event.value, record.status.value
                )
                return False
            raise
        assert status is not None
        record.status = status
        record.last_updated_at = now_iso()
        if message is not None or status is TaskStatus.WORKING:
            record.status_message = message
        if status.is_terminal:
            self._live[record.owner] -= 1
            if not self._live[record.owner]:
                del self._live[record.owner]
        self.store.update(record)
        if self.mirror is not None:
            self.mirror.written(record)
        self._notify_observers(record)
        audit.info("task %s id=%s context=%s", status.value, record.task_id, record.owner)
        self._announce(actor)
        if status.is_terminal:
            actor.mark_done()
        return True

    def _notify_observers(self, record: TaskRecord) -> None:
        for observer in self.observers:
            try:
                observer(record)
            except Exception:
                log.exception("task observer failed")

    def _announce(self, actor: TaskActor) -> None:
        if not actor.is_announced:
            return
        params = actor.record.snapshot()
        for peer in self._peers.get(actor.record.owner, ()):
            peer.notify_soon("notifications/tasks/status", params)

    def finish(self, actor: TaskActor, outcome: TaskOutcome) -> None:
        if actor.record.status.is_terminal:
            return
        if isinstance(outcome, ErrorData):
            event, message = TaskEvent.FAIL, f"Request failed: {outcome.message}"
        elif outcome.get("isError") is True:
            event, message = TaskEvent.FAIL, _failure_message(outcome)
        else:
            event, message = TaskEvent.COMPLETE, None
        actor.record.outcome = outcome
        if not self.transition(actor, event, message):
            actor.record.outcome = None

    def release(self, actor: TaskActor) -> None:
        """Forget an actor whose work has ended (its record stays in the store)."""
        if self._actors.get(actor.task_id) is actor:
            del self._actors[actor.task_id]
            if self.mirror is not None:
                # The shared store keeps the record; this process only its actors.
                self.store.delete(actor.task_id)

    # --- lookup and expiry ----------------------------------------------------------------

    def lookup(self, owner: str, task_id: str) -> TaskRecord:
        """Return ``owner``'s task ``task_id``.

        Raises:
            McpError: -32602 for an unknown, expired or foreign id (the three
                are indistinguishable on purpose).
        """
        record = owned(self.store.get(task_id), owner, task_id)
        if record.deadline <= trio.current_time():
            self._delete(task_id)
            raise expired()
        return record

    def _delete(self, task_id: str) -> None:
        record = self.store.get(task_id)
        if record is None:
            return
        actor = self._actors.pop(task_id, None)
        if not record.status.is_terminal:
            self._live[record.owner] -= 1
            if not self._live[record.owner]:
                del self._live[record.owner]
        if actor is not None:
            actor.scope.cancel()
            actor.mark_done()
        self.store.delete(task_id)
        if self.mirror is not None:
            self.mirror.deleted(task_id)
        audit.info(
            "task expired id=%s context=%s status=%s", task_id, record.owner, record.status.value
        )

    def check_rate(self, owner: str) -> None:
        """Count one ``tasks/*`` operation of ``owner`` against the rate limit.

        Raises:
            McpError: -32000 when the owner is over its rate.
        """
        self._rate.check(owner)

    async def _reap(self) -> None:
        """The one reaper: sleep until the next deadline, delete what expired."""
        while True:
            self._reap_now()
            self._reaper_wakeup = trio.Event()
            deadline = self._expiry[0][0] if self._expiry else math.inf
            with trio.move_on_at(deadline):
                await self._reaper_wakeup.wait()

    def _reap_now(self) -> None:
        now = trio.current_time()
        heap = self._expiry
        while heap and heap[0][0] <= now:
            _, task_id = heapq.heappop(heap)
            self._delete(task_id)

    # --- introspection -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.store)

    def live_count(self, owner: str | None = None) -> int:
        """Live (non-terminal) tasks, of ``owner`` or of everyone."""
        if owner is None:
            return sum(self._live.values())
        return self._live.get(owner, 0)

    def running_actor(self, task_id: str) -> TaskActor | None:
        """The actor of ``task_id`` if its work runs in this process."""
        return self._actors.get(task_id)

    def running_ids(self) -> list[str]:
        """The ids of the tasks whose actors run in this process."""
        return list(self._actors)

    def expire(self, task_id: str) -> None:
        """Delete ``task_id`` now (its TTL ran out, here or in the shared store)."""
        self._delete(task_id)

    def actors(self) -> Iterator[TaskActor]:
        """Every actor whose work is still running."""
        return iter(list(self._actors.values()))


def owned(record: TaskRecord | None, owner: str, task_id: str) -> TaskRecord:
    """``record`` if it is ``owner``'s task.

    Raises:
        McpError: -32602 for an unknown or foreign id (indistinguishable on purpose).
    """
    if record is None or record.owner != owner:
        audit.info("task lookup failed id=%.64r context=%s", task_id, owner)
        raise McpError(INVALID_PARAMS, "Failed to retrieve task: Task not found")
    return record


def expired() -> McpError:
    """The -32602 for a task whose TTL has run out."""
    return McpError(INVALID_PARAMS, "Failed to retrieve task: Task has expired")


def _failure_message(result: dict[str, Any]) -> str:
    texts = [
        str(block.get("text"))
        for block in result.get("content", ())
        if isinstance(block, dict) and block.get("type") == "text"
    ]
    detail = " ".join(texts).strip()[:500]
    return f"Tool execution failed: {detail}" if detail else "Tool execution failed"
