"""The receiver side of tasks: task actors, the registry that owns them, the store.

Life of a task (see ARCHITECTURE.md for the picture):

1. A task-augmented request arrives. The router asks the registry to
   :meth:`TaskRegistry.create` a task for the requestor's *context* (an
   authenticated identity, else the connection).
2. The registry checks the caps, makes a :class:`TaskRecord` with a 128-bit
   id from :mod:`secrets`, and starts a :class:`TaskActor` with
   ``await nursery.start(actor.run)`` in **the registry's own nursery**, so
   the task outlives the request and the connection that made it. The actor
   hands back the ``Task`` snapshot with ``task_status.started``; the router
   answers ``CreateTaskResult`` at once; only then does the work begin.
3. The actor runs the work inside its own cancel scope. Every status change
   goes through the one transition table (:mod:`._state`), is logged to the
   audit logger and announced with ``notifications/tasks/status``.
4. ``tasks/result`` waits on the actor's ``done`` event (woken by the actor,
   never by polling) and, while it waits, carries the task's own requests
   to the requestor (the ``input_required`` side channel).
5. ``tasks/cancel`` moves the task to ``cancelled`` first, then cancels the
   actor's scope: the work stops, and a result arriving in the same instant
   is dropped. One reaper task deletes every task whose TTL has run out.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import hmac
import logging
import math
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Protocol, final

import attrs
import trio

from .._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    RESOURCE_LIMIT,
    ConnectionClosed,
    McpError,
    RemoteError,
)
from ._jsonrpc import ErrorData
from ._state import INITIAL_STATUS, IllegalTransition, TaskEvent, next_status
from ._types import Task, TaskStatus, related_task_meta

if TYPE_CHECKING:
    from ._router import Peer

audit = logging.getLogger("trio_mcp.audit")
log = logging.getLogger("trio_mcp.tasks")

#: What ``tasks/result`` answers for a task that was cancelled: there is no
#: result of the underlying request, so the answer is a JSON-RPC error.
CANCELLED_RESULT: Final = ErrorData(INVALID_PARAMS, "Task was cancelled: it has no result")

TaskOutcome = dict[str, Any] | ErrorData
Work = Callable[["TaskActor"], Awaitable[dict[str, Any]]]


@final
@attrs.frozen
class TaskLimits:
    """Bounds on what the task registry accepts. All durations in milliseconds.

    Attributes:
        default_ttl: TTL of a task whose request did not ask for one
            (``None``: unlimited, if ``max_ttl`` allows it).
        max_ttl: Largest TTL granted; a larger request is lowered to it.
            ``None`` allows unlimited TTLs (not recommended).
        poll_interval: ``pollInterval`` suggested to requestors.
        max_live_per_requestor: Live (non-terminal) tasks one requestor
            context may have at once.
        max_tasks: Records (live or finished) the registry keeps at once.
        page_size: Tasks per ``tasks/list`` page.
        rate_per_second: ``tasks/*`` operations one context may make per
            second, on average (a token bucket); ``None`` disables the limit.
        rate_burst: The bucket's size: how many operations may come at once.
    """

    default_ttl: int | None = 300_000
    max_ttl: int | None = 3_600_000
    poll_interval: int = 1_000
    max_live_per_requestor: int = 1_024
    max_tasks: int = 65_536
    page_size: int = 100
    rate_per_second: float | None = None
    rate_burst: int = 200


@final
@attrs.define(eq=False)
class TaskRecord:
    """What a store keeps of one task: its state and, once terminal, its outcome."""

    task_id: str
    owner: str
    seq: int
    method: str
    status: TaskStatus
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int
    deadline: float
    status_message: str | None = None
    outcome: TaskOutcome | None = None

    def snapshot(self) -> Task:
        """The record as a wire ``Task``."""
        return Task(
            task_id=self.task_id,
            status=self.status,
            created_at=self.created_at,
            last_updated_at=self.last_updated_at,
            ttl=self.ttl,
            status_message=self.status_message,
            poll_interval=self.poll_interval,
        )


class TaskStore(Protocol):
    """Where task records live. Replace it to make tasks durable.

    The registry calls these methods only from Trio tasks of one run; a store
    needs no locking of its own. Live actors are not stored here.
    """

    def add(self, record: TaskRecord) -> None:
        """Add a new record."""

    def get(self, task_id: str) -> TaskRecord | None:
        """Return the record with this id, or ``None``."""

    def update(self, record: TaskRecord) -> None:
        """Persist a change to ``record`` (status, message, outcome)."""

    def delete(self, task_id: str) -> None:
        """Forget the record (no error if it is gone)."""

    def page(self, owner: str, after_seq: int, limit: int) -> tuple[list[TaskRecord], bool]:
        """Return up to ``limit`` records of ``owner`` with ``seq > after_seq``
        in creation order, and whether more remain."""

    def __len__(self) -> int:
        """Number of records held."""


@final
class MemoryTaskStore:
    """The default :class:`TaskStore`: dicts in memory, O(page) listing."""

    def __init__(self) -> None:
        self._records: dict[str, TaskRecord] = {}
        # Per owner: task ids in creation (seq) order; deleted ids are skipped
        # lazily and compacted when more than half are dead.
        self._order: dict[str, list[tuple[int, str]]] = {}
        self._dead: dict[str, int] = {}

    def add(self, record: TaskRecord) -> None:
        self._records[record.task_id] = record
        self._order.setdefault(record.owner, []).append((record.seq, record.task_id))

    def get(self, task_id: str) -> TaskRecord | None:
        return self._records.get(task_id)

    def update(self, record: TaskRecord) -> None:
        pass  # records are the live objects

    def delete(self, task_id: str) -> None:
        record = self._records.pop(task_id, None)
        if record is None:
            return
        order = self._order.get(record.owner)
        if order is None:
            return
        dead = self._dead.get(record.owner, 0) + 1
        if dead * 2 > len(order):
            order[:] = [(s, t) for s, t in order if t in self._records]
            dead = 0
        if not order:
            del self._order[record.owner]
            self._dead.pop(record.owner, None)
        else:
            self._dead[record.owner] = dead

    def page(self, owner: str, after_seq: int, limit: int) -> tuple[list[TaskRecord], bool]:
        import bisect

        order = self._order.get(owner, [])
        i = bisect.bisect_right(order, (after_seq, "\U0010ffff"))
        out: list[TaskRecord] = []
        while i < len(order):
            record = self._records.get(order[i][1])
            i += 1
            if record is None:
                continue
            if len(out) == limit:
                return out, True
            out.append(record)
        return out, False

    def __len__(self) -> int:
        return len(self._records)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
    peer: Peer | None = None


@final
@attrs.define(eq=False)
class TaskActor:
    """The Trio task that owns one task: its state, cancel scope and outcome."""

    registry: TaskRegistry
    record: TaskRecord
    origin: Peer | None
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
                registry._finish(self, ErrorData(exc.code, exc.message, exc.data))
            except Exception:
                log.exception("task %s failed with an exception", self.task_id)
                registry._finish(self, ErrorData(INTERNAL_ERROR, "Internal error"))
            else:
                registry._finish(self, result)
        self._inputs_send.close()
        self._inputs_recv.close()
        # A finished task needs only its record (kept by the store until it
        # expires); the actor and its channels go now.
        if registry._actors.get(self.task_id) is self:
            del registry._actors[self.task_id]

    # --- the input_required side channel -------------------------------------------

    async def ask(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], Peer]:
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
            self.registry._transition(self, TaskEvent.NEED_INPUT)
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
                self.registry._transition(self, TaskEvent.INPUT_GIVEN)

    async def serve_inputs(self, peer: Peer) -> None:
        """Deliver the task's side-channel requests over ``peer`` until cancelled.

        Run by ``tasks/result`` while it waits for the task to finish.
        """
        async with trio.open_nursery() as nursery, self._inputs_recv.clone() as inputs:
            async for item in inputs:
                if not item.claimed:
                    nursery.start_soon(_deliver, item, peer)


async def _deliver(item: _InputRequest, peer: Peer) -> None:
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


#: Rate buckets kept before the first sweep of full (idle) ones.
_BUCKET_SWEEP_MIN: Final = 1_024


@final
@attrs.define(eq=False)
class _Bucket:
    tokens: float
    stamp: float


@final
class TaskRegistry:
    """Owns every task this side hosts, for all its connections.

    Run it with :meth:`running` (``open_peer`` and the ``serve_*`` functions
    do this for you). It holds the nursery of the task actors, the store, and
    the single reaper that deletes tasks whose TTL has run out.

    Args:
        limits: The bounds on TTLs, counts, pages and rates.
        store: Where records live; :class:`MemoryTaskStore` by default.
    """

    def __init__(self, limits: TaskLimits | None = None, *, store: TaskStore | None = None):
        self.limits = limits or TaskLimits()
        self.store: TaskStore = store if store is not None else MemoryTaskStore()
        self._actors: dict[str, TaskActor] = {}
        self._live: dict[str, int] = {}
        self._peers: dict[str, list[Peer]] = {}
        self._seq = 0
        self._secret = secrets.token_bytes(16)
        self._expiry: list[tuple[float, str]] = []
        self._reaper_wakeup = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._users = 0
        self._buckets: dict[str, _Bucket] = {}
        self._bucket_sweep_at = _BUCKET_SWEEP_MIN
        #: Callables told of every new task and every status change, with the
        #: record (read it, do not change it). For live views and metrics; an
        #: observer that raises is logged and skipped.
        self.observers: list[Callable[[TaskRecord], None]] = []

    # --- running -----------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[TaskRegistry]:
        """Run the registry (its actors' nursery and the reaper) for the block.

        Re-entrant: a nested ``running()`` shares the outer run. When the
        outermost block exits, every live task is cancelled.
        """
        if self._nursery is not None:
            self._users += 1
            try:
                yield self
            finally:
                self._users -= 1
            return
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._reap)
            try:
                yield self
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    @property
    def is_running(self) -> bool:
        """True inside :meth:`running`."""
        return self._nursery is not None

    def attach(self, owner: str, peer: Peer) -> None:
        """Record that ``peer`` is a live connection of requestor ``owner``."""
        self._peers.setdefault(owner, []).append(peer)

    def detach(self, owner: str, peer: Peer) -> None:
        """Forget a closed connection of ``owner``."""
        peers = self._peers.get(owner)
        if peers and peer in peers:
            peers.remove(peer)
            if not peers:
                del self._peers[owner]

    def live_peer(self, owner: str, prefer: Peer | None = None) -> Peer | None:
        """Return an open connection of ``owner``: ``prefer`` if open, else the newest."""
        peers = self._peers.get(owner, ())
        if prefer is not None and prefer in peers and prefer.is_open:
            return prefer
        for peer in reversed(peers):
            if peer.is_open:
                return peer
        return None

    # --- rate limit ------------------------------------------------------------------------

    def check_rate(self, owner: str) -> None:
        """Count one ``tasks/*`` operation of ``owner`` against the rate limit.

        Raises:
            McpError: -32000 when the owner is over its rate.
        """
        rate = self.limits.rate_per_second
        if rate is None:
            return
        now = trio.current_time()
        bucket = self._buckets.get(owner)
        burst = float(self.limits.rate_burst)
        if bucket is None:
            if len(self._buckets) >= self._bucket_sweep_at:
                self._sweep_buckets(now, rate, burst)
            bucket = self._buckets[owner] = _Bucket(burst, now)
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.stamp) * rate)
        bucket.stamp = now
        if bucket.tokens < 1:
            audit.warning("rate limited context=%s", owner)
            raise McpError(
                RESOURCE_LIMIT,
                f"Rate limit exceeded: at most {rate:g} task operations per second",
            )
        bucket.tokens -= 1

    def _sweep_buckets(self, now: float, rate: float, burst: float) -> None:
        """Forget buckets that have filled up again: the same as having none.

        Without this, every connection that ever made a task operation (each
        is its own context when there is no identity) would keep a bucket
        for the registry's lifetime. Sweeps happen when the table doubles,
        so they cost O(1) per new context.
        """
        self._buckets = {
            owner: bucket
            for owner, bucket in self._buckets.items()
            if bucket.tokens + (now - bucket.stamp) * rate < burst
        }
        self._bucket_sweep_at = max(_BUCKET_SWEEP_MIN, 2 * len(self._buckets))

    # --- creating ------------------------------------------------------------------------

    def _grant_ttl(self, requested: int | None) -> int | None:
        limits = self.limits
        ttl = limits.default_ttl if requested is None else max(0, requested)
        if limits.max_ttl is not None:
            ttl = limits.max_ttl if ttl is None else min(ttl, limits.max_ttl)
        return ttl

    def _new_id(self) -> str:
        while True:
            task_id = secrets.token_hex(16)  # 128 random bits
            if self.store.get(task_id) is None:
                return task_id

    async def create(
        self,
        owner: str,
        method: str,
        work: Work,
        *,
        requested_ttl: int | None,
        origin: Peer | None,
        progress_token: str | int | None = None,
    ) -> TaskActor:
        """Accept a task-augmented request and start its actor.

        Args:
            owner: The requestor's context (identity or connection key).
            method: The underlying request's method, for logs.
            work: The coroutine function that computes the result JSON.
            requested_ttl: The ``task.ttl`` the requestor asked for, if any.
            origin: The connection the request came on.
            progress_token: The request's progress token, valid for the
                task's lifetime.

        Returns:
            The started actor; ``actor.record.snapshot()`` is the ``Task``.
            Call ``actor.announced.set()`` once the CreateTaskResult is sent.

        Raises:
            McpError: -32000 when the requestor's live-task cap or the
                registry's size bound is reached.
            RuntimeError: The registry is not running.
        """
        if self._nursery is None:
            raise RuntimeError("the task registry is not running (use registry.running())")
        limits = self.limits
        if self._live.get(owner, 0) >= limits.max_live_per_requestor:
            audit.warning("task refused context=%s reason=live-cap", owner)
            raise McpError(
                RESOURCE_LIMIT,
                f"Too many live tasks: at most {limits.max_live_per_requestor} per requestor",
            )
        if len(self.store) >= limits.max_tasks:
            self._reap_now()
            if len(self.store) >= limits.max_tasks:
                audit.warning("task refused context=%s reason=registry-full", owner)
                raise McpError(
                    RESOURCE_LIMIT, f"Too many tasks: the server keeps at most {limits.max_tasks}"
                )
        ttl = self._grant_ttl(requested_ttl)
        now = _now()
        self._seq += 1
        deadline = math.inf if ttl is None else trio.current_time() + ttl / 1000
        record = TaskRecord(
            task_id=self._new_id(),
            owner=owner,
            seq=self._seq,
            method=method,
            status=INITIAL_STATUS,
            created_at=now,
            last_updated_at=now,
            ttl=ttl,
            poll_interval=limits.poll_interval,
            deadline=deadline,
        )
        actor = TaskActor(self, record, origin, progress_token)
        self.store.add(record)
        self._notify_observers(record)
        self._actors[record.task_id] = actor
        self._live[owner] = self._live.get(owner, 0) + 1
        if ttl is not None:
            heapq.heappush(self._expiry, (deadline, record.task_id))
            if self._expiry[0][1] == record.task_id:
                self._reaper_wakeup.set()
        audit.info(
            "task created id=%s context=%s method=%s ttl=%s", record.task_id, owner, method, ttl
        )
        await self._nursery.start(actor.run, work)
        return actor

    # --- transitions ------------------------------------------------------------------

    def _transition(self, actor: TaskActor, event: TaskEvent, message: str | None = None) -> bool:
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
        record.last_updated_at = _now()
        if message is not None or status is TaskStatus.WORKING:
            record.status_message = message
        if status.is_terminal:
            self._live[record.owner] -= 1
            if not self._live[record.owner]:
                del self._live[record.owner]
        self.store.update(record)
        self._notify_observers(record)
        audit.info("task %s id=%s context=%s", status.value, record.task_id, record.owner)
        self._announce(actor)
        if status.is_terminal:
            actor.done.set()
        return True

    def _notify_observers(self, record: TaskRecord) -> None:
        for observer in self.observers:
            try:
                observer(record)
            except Exception:
                log.exception("task observer failed")

    def _announce(self, actor: TaskActor) -> None:
        if not actor.announced.is_set():
            return
        params = actor.record.snapshot()
        for peer in self._peers.get(actor.record.owner, ()):
            peer.notify_soon("notifications/tasks/status", params)

    def _finish(self, actor: TaskActor, outcome: TaskOutcome) -> None:
        if actor.record.status.is_terminal:
            return
        if isinstance(outcome, ErrorData):
            event, message = TaskEvent.FAIL, f"Request failed: {outcome.message}"
        elif outcome.get("isError") is True:
            event, message = TaskEvent.FAIL, _failure_message(outcome)
        else:
            event, message = TaskEvent.COMPLETE, None
        actor.record.outcome = outcome
        if not self._transition(actor, event, message):
            actor.record.outcome = None

    # --- requestor operations -------------------------------------------------------------

    def lookup(self, owner: str, task_id: str) -> TaskRecord:
        """Return ``owner``'s task ``task_id``.

        Raises:
            McpError: -32602 for an unknown, expired or foreign id (the three
                are indistinguishable on purpose).
        """
        record = self.store.get(task_id)
        if record is None or record.owner != owner:
            audit.info("task lookup failed id=%.64r context=%s", task_id, owner)
            raise McpError(INVALID_PARAMS, "Failed to retrieve task: Task not found")
        if record.deadline <= trio.current_time():
            self._delete(task_id)
            raise McpError(INVALID_PARAMS, "Failed to retrieve task: Task has expired")
        return record

    def get(self, owner: str, task_id: str) -> Task:
        """``tasks/get``: the task's current state."""
        record = self.lookup(owner, task_id)
        audit.debug("task polled id=%s context=%s", task_id, owner)
        return record.snapshot()

    async def result(self, owner: str, task_id: str, peer: Peer) -> dict[str, Any]:
        """``tasks/result``: block until terminal, then return the outcome.

        While it waits, the task's side-channel requests go out over ``peer``.

        Returns:
            The underlying request's result with the related-task ``_meta``.

        Raises:
            McpError: The underlying request's JSON-RPC error, or -32602 for
                an unknown task.

        Cancellation: cancelling stops waiting; the task is unaffected.
        """
        record = self.lookup(owner, task_id)
        actor = self._actors.get(task_id)
        if not record.status.is_terminal and actor is not None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(actor.serve_inputs, peer)
                await actor.done.wait()
                nursery.cancel_scope.cancel()
            record = self.lookup(owner, task_id)
        audit.info("task retrieved id=%s context=%s status=%s", task_id, owner, record.status.value)
        outcome = record.outcome
        if record.status is TaskStatus.CANCELLED or outcome is None:
            outcome = CANCELLED_RESULT
        if isinstance(outcome, ErrorData):
            raise McpError(outcome.code, outcome.message, outcome.data)
        result = dict(outcome)
        result["_meta"] = related_task_meta(task_id, result.get("_meta"))
        return result

    def list(self, owner: str, cursor: str | None) -> tuple[list[Task], str | None]:
        """``tasks/list``: one page of ``owner``'s tasks, oldest first.

        Raises:
            McpError: -32602 for a cursor this registry did not issue to
                ``owner``.
        """
        after = 0 if cursor is None else self._read_cursor(owner, cursor)
        now = trio.current_time()
        records, more = self.store.page(owner, after, self.limits.page_size)
        tasks = [r.snapshot() for r in records if r.deadline > now]
        next_cursor = self._make_cursor(owner, records[-1].seq) if more and records else None
        audit.debug("tasks listed context=%s count=%d", owner, len(tasks))
        return tasks, next_cursor

    def cancel(self, owner: str, task_id: str) -> Task:
        """``tasks/cancel``: mark the task cancelled, then stop its work.

        Raises:
            McpError: -32602 for an unknown task or one already terminal.
        """
        record = self.lookup(owner, task_id)
        if record.status.is_terminal:
            raise McpError(
                INVALID_PARAMS,
                f"Cannot cancel task: already in terminal status '{record.status.value}'",
            )
        actor = self._actors[task_id]
        self._transition(actor, TaskEvent.CANCEL, "The task was cancelled by request.")
        actor.scope.cancel()
        audit.info("task cancel requested id=%s context=%s", task_id, owner)
        return record.snapshot()

    # --- cursors ----------------------------------------------------------------------------

    def _sign(self, owner: str, seq: int) -> str:
        mac = hmac.new(self._secret, f"{owner}\x00{seq}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()[:12]).decode()

    def _make_cursor(self, owner: str, seq: int) -> str:
        return f"{seq}.{self._sign(owner, seq)}"

    def _read_cursor(self, owner: str, cursor: str) -> int:
        seq_text, _, mac = cursor.partition(".")
        if (
            seq_text.isdigit()
            and len(seq_text) < 20
            and hmac.compare_digest(mac, self._sign(owner, int(seq_text)))
        ):
            return int(seq_text)
        raise McpError(INVALID_PARAMS, "Invalid cursor")

    # --- expiry ------------------------------------------------------------------------------

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
            actor.done.set()
        self.store.delete(task_id)
        audit.info(
            "task expired id=%s context=%s status=%s", task_id, record.owner, record.status.value
        )

    def _reap_now(self) -> None:
        now = trio.current_time()
        heap = self._expiry
        while heap and heap[0][0] <= now:
            _, task_id = heapq.heappop(heap)
            self._delete(task_id)

    async def _reap(self) -> None:
        """The one reaper: sleep until the next deadline, delete what expired."""
        while True:
            self._reap_now()
            self._reaper_wakeup = trio.Event()
            deadline = self._expiry[0][0] if self._expiry else math.inf
            with trio.move_on_at(deadline):
                await self._reaper_wakeup.wait()

    # --- introspection -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.store)

    def live_count(self, owner: str | None = None) -> int:
        """Live (non-terminal) tasks, of ``owner`` or of everyone."""
        if owner is None:
            return sum(self._live.values())
        return self._live.get(owner, 0)

    def actors(self) -> Iterator[TaskActor]:
        """Every actor whose work is still running."""
        return iter(list(self._actors.values()))


def _failure_message(result: dict[str, Any]) -> str:
    texts = [
        str(block.get("text"))
        for block in result.get("content", ())
        if isinstance(block, dict) and block.get("type") == "text"
    ]
    detail = " ".join(texts).strip()[:500]
    return f"Tool execution failed: {detail}" if detail else "Tool execution failed"
