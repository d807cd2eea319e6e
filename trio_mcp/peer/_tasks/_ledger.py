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
from typing import Any, Final

import trio

from ..._errors import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_LIMIT, McpError
from .._messages import ErrorData, TaskStatus, related_task_meta
from ._actor import TaskActor
from ._connection import TaskConnection
from ._limits import RateLimiter, TaskLimits
from ._shared import RecordMirror
from ._state import INITIAL_STATUS, IllegalTransition, TaskEvent, next_status
from ._store import RecordIndex, TaskOutcome, TaskRecord, TaskStore, new_task_id, now_iso

audit = logging.getLogger("trio_mcp.audit")
log = logging.getLogger("trio_mcp.tasks")


#: What ``tasks/result`` answers for a task that was cancelled: there is no
#: result of the underlying request, so the answer is a JSON-RPC error.
CANCELLED_RESULT: Final = ErrorData(INVALID_PARAMS, "Task was cancelled: it has no result")
#: The status message of a task cancelled by ``tasks/cancel``.
CANCEL_MESSAGE: Final = "The task was cancelled by request."


class TaskLedger:
    """What is known of every task: records (in the store), actors, counts, deadlines.

    Args:
        limits: The bounds on TTLs, counts, pages and rates.
        store: Where records live.
    """

    def __init__(self, limits: TaskLimits, store: TaskStore) -> None:
        self.limits = limits
        #: Where records live (the one :class:`~._store.TaskStore` contract).
        self.store = store
        #: The records this process knows: every one for a store used by this
        #: process alone (the store's own objects), the running ones for a shared store.
        self.records = RecordIndex()
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
        #: Where every change of a local record goes, in order (the registry's
        #: store half: ``Solo`` applies it at once, ``Cluster`` queues it for the store).
        self.mirror: RecordMirror | None = None
        self._seq = 0

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

    def transition(
        self,
        actor: TaskActor,
        event: TaskEvent | None,
        message: str | None = None,
        *,
        told: TaskConnection | None = None,
    ) -> bool:
        record = actor.record
        if self._actors.get(record.task_id) is not actor:
            # The task expired and was deleted (the table's ``None`` status):
            # nothing happens to it any more, not even its pending input
            # request being withdrawn as its work is cancelled.
            log.debug("task %s: %s ignored after expiry", record.task_id,
                      "a message" if event is None else event.value)
            return False
        if event is None and record.status.is_terminal:
            return False  # a message only (2026-07-28 progress), too late
        if event is None:  # a new status message, the status unchanged
            status: TaskStatus | None = record.status
        else:
            try:
                status = next_status(record.status, event)
            except IllegalTransition:
                if record.status.is_terminal:
                    # The work finished in the same instant as a cancel: the task
                    # stays in its terminal status (spec: stays cancelled).
                    log.debug("task %s: %s ignored in %s", record.task_id, event.value,
                              record.status)
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
        if self.mirror is not None:
            self.mirror.written(record)
        self._notify_observers(record)
        if event is not None:  # (A StrEnum formats as its value; .value is a slow property.)
            audit.info("task %s id=%s context=%s", status, record.task_id, record.owner)
        _announce(actor, self._peers.get(record.owner), told)
        if status.is_terminal:
            actor.mark_done()
        return True

    def _notify_observers(self, record: TaskRecord) -> None:
        for observer in self.observers:
            try:
                observer(record)
            except Exception:
                log.exception("task observer failed")

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
            if self.store.shared:
                # The shared store keeps the record; this process only its actors.
                self.records.delete(actor.task_id)
            if self.mirror is not None:
                self.mirror.released(actor.task_id)

    # --- lookup and expiry ----------------------------------------------------------------

    def new_record(self, owner: str, method: str, requested_ttl: int | None) -> TaskRecord:
        """A new task's record, its TTL granted; -32000 when the registry is full."""
        limits = self.limits
        if len(self.records) >= limits.max_tasks:
            self._reap_now()
            if len(self.records) >= limits.max_tasks:
                audit.warning("task refused context=%s reason=registry-full", owner)
                raise McpError(
                    RESOURCE_LIMIT, f"Too many tasks: the server keeps at most {limits.max_tasks}"
                )
        ttl = _grant_ttl(limits, requested_ttl)
        now = now_iso()
        self._seq += 1
        return TaskRecord(
            task_id=new_task_id(),  # 128 random bits
            owner=owner,
            seq=self._seq,
            method=method,
            status=INITIAL_STATUS,
            created_at=now,
            last_updated_at=now,
            ttl=ttl,
            poll_interval=limits.poll_interval,
            deadline=math.inf if ttl is None else trio.current_time() + ttl / 1000,
        )

    def keep(self, actor: TaskActor) -> None:
        """Keep a new task's record and actor (made from :meth:`new_record`)."""
        record = actor.record
        self.records.add(record)
        self._notify_observers(record)
        task_id, owner = record.task_id, record.owner
        self._actors[task_id] = actor
        self._live[owner] = self._live.get(owner, 0) + 1
        if record.ttl is not None:
            heapq.heappush(self._expiry, (record.deadline, task_id))
            if self._expiry[0][1] == task_id:
                self._reaper_wakeup.set()
        audit.info(
            "task created id=%s context=%s method=%s ttl=%s", task_id, owner, record.method,
            record.ttl,
        )

    def cancel_actor(self, task_id: str, requestor: TaskConnection | None = None) -> bool:
        """Cancel a local actor's task (status first, then its scope); False if none here."""
        actor = self._actors.get(task_id)
        if actor is None:
            return False
        self.transition(actor, TaskEvent.CANCEL, CANCEL_MESSAGE, told=requestor)
        actor.scope.cancel()
        return True

    def lookup(self, owner: str, task_id: str) -> TaskRecord:
        """Return ``owner``'s task ``task_id``.

        Raises:
            McpError: -32602 for an unknown, expired or foreign id (the three
                are indistinguishable on purpose).
        """
        record = owned(self.records.get(task_id), owner, task_id)
        if record.deadline <= trio.current_time():
            self._delete(task_id)
            raise expired()
        return record

    def _delete(self, task_id: str) -> None:
        record = self.records.get(task_id)
        if record is None:
            return
        actor = self._actors.pop(task_id, None)
        if not record.status.is_terminal:
            self._live[record.owner] -= 1
            if not self._live[record.owner]:
                del self._live[record.owner]
        self.records.delete(task_id)
        if self.mirror is not None:
            self.mirror.deleted(task_id)
        if actor is not None:
            actor.scope.cancel()
            # Last: a tasks/result parked on it goes on right here, and finds it gone.
            actor.mark_done()
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
        return len(self.records)

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

    def rerunnable_actors(self) -> list[TaskActor]:
        """The running actors of live re-runnable tasks: what a drain hands to the other
        processes and a fence stops."""
        return [
            actor for actor in self._actors.values()
            if actor.record.rerun is not None and not actor.record.status.is_terminal
        ]  # fmt: skip


def owned(record: TaskRecord | None, owner: str, task_id: str) -> TaskRecord:
    """``record`` if it is ``owner``'s task.

    Raises:
        McpError: -32602 for an unknown or foreign id (indistinguishable on purpose).
    """
    if record is None or record.owner != owner:
        audit.info("task lookup failed id=%.64r context=%s", task_id, owner)
        raise McpError(INVALID_PARAMS, "Failed to retrieve task: Task not found")
    return record


def live_cap_reached(owner: str, cap: int) -> McpError:
    """The -32000 for a requestor with ``cap`` live tasks already (audited)."""
    audit.warning("task refused context=%s reason=live-cap", owner)
    return McpError(RESOURCE_LIMIT, f"Too many live tasks: at most {cap} per requestor")


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


def _grant_ttl(limits: TaskLimits, requested: int | None) -> int | None:
    ttl = limits.default_ttl if requested is None else max(0, requested)
    if limits.max_ttl is not None:
        ttl = limits.max_ttl if ttl is None else min(ttl, limits.max_ttl)
    return ttl


def final_result(record: TaskRecord) -> dict[str, Any]:
    """A terminal task's ``tasks/result`` answer, or its JSON-RPC error."""
    audit.info(
        "task retrieved id=%s context=%s status=%s",
        record.task_id, record.owner, record.status,  # a StrEnum formats as its value
    )
    outcome = record.outcome
    if record.status is TaskStatus.CANCELLED:
        outcome = CANCELLED_RESULT
    elif outcome is None:
        # Failed without an outcome: its process died while it ran.
        outcome = ErrorData(INTERNAL_ERROR, record.status_message or "Task failed")
    if isinstance(outcome, ErrorData):
        raise McpError(outcome.code, outcome.message, outcome.data)
    result = dict(outcome)
    result["_meta"] = related_task_meta(record.task_id, result.get("_meta"))
    return result


def already_terminal(record: TaskRecord) -> McpError:
    return McpError(
        INVALID_PARAMS, f"Cannot cancel task: already in terminal status '{record.status.value}'"
    )


def _announce(
    actor: TaskActor, peers: list[TaskConnection] | None, told: TaskConnection | None
) -> None:
    """Status notification to the requestor's connections but ``told`` (which learns
    the status from its own answer, e.g. ``tasks/cancel``: the MAY would repeat it)."""
    if actor.is_announced and peers:
        params: dict[str, Any] | None = None  # one dict for every peer: none changes it
        for peer in peers:
            if peer is not told:
                if params is None:
                    params = actor.record.wire()
                peer.notify_soon("notifications/tasks/status", params)
