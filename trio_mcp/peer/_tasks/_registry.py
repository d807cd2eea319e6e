"""The receiver side of tasks: the registry that owns every task actor.

Life of a task (see ARCHITECTURE.md for the picture):

1. A task-augmented request arrives. The task receiver feature asks the
   registry to :meth:`TaskRegistry.create` a task for the requestor's
   *context* (an authenticated identity, else the connection).
2. The registry checks the caps, makes a :class:`TaskRecord` with a 128-bit
   id from :mod:`secrets`, and starts a :class:`TaskActor` with
   ``nursery.start_soon(actor.run)`` in **the registry's own nursery**, so
   the task outlives the request and the connection that made it. The
   feature answers ``CreateTaskResult`` (the record's snapshot) at once; the
   actor's Trio task is started once that answer is sent (``announced``).
3. The actor runs the work inside its own cancel scope. Every status change
   goes through the one transition table (:mod:`._state`), is logged to the
   audit logger and announced with ``notifications/tasks/status``.
4. ``tasks/result`` waits on the actor's ``done`` event (woken by the actor,
   never by polling) and, while it waits, carries the task's own requests
   to the requestor (the ``input_required`` side channel).
5. ``tasks/cancel`` moves the task to ``cancelled`` first, then cancels the
   actor's scope: the work stops, and a result arriving in the same instant
   is dropped. One reaper task deletes every task whose TTL has run out.

The registry talks to connections only through
:class:`~._connection.TaskConnection`.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import math
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, Final, final

import trio

from ..._errors import McpError
from .._messages import Task
from ._actor import TaskActor, Work
from ._cluster import Cluster
from ._connection import TaskConnection
from ._ledger import TaskLedger, final_result
from ._limits import CursorCodec, TaskLimits
from ._open import open_task_store
from ._rerun import ADOPTING, QUEUED_MESSAGE, RerunHost, RerunTicket, rerun_store
from ._solo import Solo
from ._store import MemoryTaskStore, Opened, TaskRecord, TaskStore

audit = logging.getLogger("trio_mcp.audit")
log = logging.getLogger("trio_mcp.tasks")

_ACTOR_NAME: Final = "trio_mcp.TaskActor.run"


@final
class TaskRegistry(TaskLedger):
    """Owns every task this side hosts, for all its connections.

    Run it with :meth:`running` (``open_peer`` and the ``serve_*`` functions
    do this for you). It holds the nursery of the task actors, the store, and
    the single reaper that deletes tasks whose TTL has run out.

    Args:
        limits: The bounds on TTLs, counts, pages and rates.
        store: Where records live: a :class:`TaskStore` (memory, SQLite, Redis,
            PostgreSQL: one contract), or a URL for :func:`open_task_store`
            (``"sqlite:///tasks.db"``, ``"redis://localhost:6379/0"``);
            :class:`MemoryTaskStore` by default.
    """

    def __init__(
        self,
        limits: TaskLimits | None = None,
        *,
        store: TaskStore | str | None = None,
    ):
        resolved = open_task_store(store) if isinstance(store, str) else store
        if resolved is None:  # (not ``or``: an empty store is falsy)
            resolved = MemoryTaskStore()
        super().__init__(limits or TaskLimits(), resolved)
        #: The registry's store half: the same operations whoever holds the truth.
        self.side: Solo | Cluster = (
            Cluster(self, self.store) if self.store.shared else Solo(self, self.store)
        )
        #: With a store shared by processes: the cross-process half (else None).
        self.cluster: Cluster | None = self.side if isinstance(self.side, Cluster) else None
        self.mirror = self.side
        #: What the actors ask their requestors through (the cluster, if any).
        self.input_relay = self.cluster
        # The store as a RerunStore, or None: found once (a runtime-checkable
        # Protocol's isinstance walks its members: ~20 us, too dear per create).
        self._reruns = rerun_store(self.store)
        self._cursors = CursorCodec()
        self._nursery: trio.Nursery | None = None
        self._users = 0
        self._rerun_host: RerunHost | None = None
        #: False: a front process, whose tasks run on worker processes (queued in a
        #: shared store that can hand work over; see ``_rerun``).
        self.run_tasks = True
        # Records of re-runnable tasks found live at open (SQLite): run again once running.
        self._to_rerun: list[TaskRecord] = []
        self.draining = False
        if self.cluster is not None:
            self.cluster.rerun = self.rerun
            self.cluster.claim_tools = self._claim_tools

    # --- running -----------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[TaskRegistry]:
        """Run the registry (its actors' nursery, the reaper, the store's own work)
        for the block.

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
        side = self.side
        self._restore(await self.store.open())
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._reap)
                await nursery.start(side.run)
                self._rerun_restored()
                try:
                    yield self
                finally:
                    self._nursery = None
                    # Store what is queued, if the store lets us.
                    with trio.CancelScope(shield=True), contextlib.suppress(McpError):
                        await side.settle()
                    nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await self.store.aclose()

    def _restore(self, opened: Opened) -> None:
        """Take over what the store found: cursor key; a durable store's records,
        sequence and deadlines."""
        self._cursors = CursorCodec(opened.cursor_secret)
        if not (opened.records or opened.lost):
            return
        for record in opened.records:
            self.records.add(record)
            if record.rerun is not None and not record.status.is_terminal:
                self._to_rerun.append(record)
            self._seq = max(self._seq, record.seq)
            if record.deadline != math.inf:
                heapq.heappush(self._expiry, (record.deadline, record.task_id))
        self._reaper_wakeup.set()
        audit.info(
            "task store restored records=%d lost=%d", len(opened.records), opened.lost
        )

    async def settle(self) -> None:
        """Wait until every change is durable in the store (at once in memory).

        Called before anything is acknowledged to a requestor.

        Raises:
            McpError: The store is failing (e.g. disk full); nothing was lost.

        Cancellation: stops waiting; the writes go on.
        """
        await self.side.settle()

    @property
    def is_running(self) -> bool:
        """True inside :meth:`running`."""
        return self._nursery is not None

    # --- creating ------------------------------------------------------------------------

    async def create(
        self,
        owner: str,
        method: str,
        work: Work,
        *,
        requested_ttl: int | None,
        origin: TaskConnection | None,
        progress_token: str | int | None = None,
        rerun: RerunTicket | None = None,
    ) -> TaskActor:
        """Accept a task-augmented request and make its actor.

        Completes without waiting when the store needs no wait (memory; see
        ``trio_mcp._inline``).

        Args:
            owner: The requestor's context (identity or connection key).
            method: The underlying request's method, for logs.
            work: The coroutine function that computes the result JSON.
            requested_ttl: The ``task.ttl`` the requestor asked for, if any.
            origin: The connection the request came on.
            progress_token: The request's progress token, valid for the
                task's lifetime.
            rerun: A re-runnable task's ticket (kept by the store). While a
                claimed task's request is served again (``_rerun.ADOPTING``),
                its record is adopted instead of a new one made.

        Returns:
            The actor; ``actor.record.snapshot()`` is the ``Task``. Call
            :meth:`launch` (``actor.launch()``) once the CreateTaskResult is
            sent: the actor's Trio task starts then.

        Raises:
            McpError: -32000 when the requestor's live-task cap or the
                registry's size bound is reached; -32603 when the store is
                unavailable.
            RuntimeError: The registry is not running.
        """
        if self._nursery is None:
            raise RuntimeError("the task registry is not running (use registry.running())")
        adopted = ADOPTING.get()
        if adopted is not None:  # a claimed task served again: its record, not a new one
            return self._adopt(adopted, work, progress_token)
        record = self.new_record(owner, method, requested_ttl)
        record.rerun = rerun
        store = self._reruns
        if not self.run_tasks and rerun is not None and store is not None:
            # A front: stored, then queued for the workers; no actor runs here.
            record.status_message = QUEUED_MESSAGE
            await self.side.create(record, self.limits.max_live_per_requestor)
            await store.requeue([record.task_id], count=False)
            audit.info("task queued id=%s context=%s", record.task_id, owner)
            return TaskActor(self, record, None, progress_token)
        await self.side.create(record, self.limits.max_live_per_requestor)
        return self._install(record, work, origin, progress_token)

    def _adopt(
        self, record: TaskRecord, work: Work, progress_token: str | int | None
    ) -> TaskActor:
        """Run a task claimed from the store (or restored) again: its record, a new actor.

        The requestor is not on this process: the actor has no origin connection
        (its questions go through the store, or to the requestor's connection here).
        """
        task_id = record.task_id
        actor = TaskActor(self, record, None, progress_token, work=work)
        if self.records.get(task_id) is None:
            self.keep(actor)
        else:  # restored at open (SQLite): already indexed, its expiry scheduled
            self.records.replace(record)
            self._actors[task_id] = actor
            self._live[record.owner] = self._live.get(record.owner, 0) + 1
        audit.info("task re-run id=%s attempt=%d", task_id, record.attempt)
        return actor

    def rerun(self, record: TaskRecord) -> bool:
        """Serve a claimed task's stored request again in this process.

        Returns:
            False when this process cannot (no re-runner, or the task already runs here).
        """
        host = self.rerun_host
        if host is None or record.rerun is None or self.running_actor(record.task_id):
            return False
        host.rerun(record)
        return True

    @property
    def rerun_host(self) -> RerunHost | None:
        """Who serves a re-runnable task's stored request again (the App's re-runner)."""
        return self._rerun_host

    @rerun_host.setter
    def rerun_host(self, host: RerunHost | None) -> None:
        self._rerun_host = host
        if self._nursery is not None:
            self._rerun_restored()  # what the store found at open, if it waited for a host

    def _claim_tools(self) -> frozenset[str]:
        host = self.rerun_host
        if host is None or not self.run_tasks or self.draining:
            return frozenset()
        return host.tools

    def start_soon(self, fn: Any, *args: Any) -> None:
        """Start ``fn(*args)`` in the actors' nursery (for the re-runner's work)."""
        if self._nursery is None:
            raise RuntimeError("the task registry is not running (use registry.running())")
        self._nursery.start_soon(fn, *args)

    async def drain(self, grace: float) -> None:
        """Stop taking task work here; let the running tasks finish within ``grace`` seconds;
        then hand the re-runnable ones still running to the other processes at once (a
        store shared by processes) and return. What is left fails when the store closes.

        New re-runnable tasks created here meanwhile are queued for the other processes
        (as a front's are); no queued work is claimed any more.
        """
        self.draining = True
        if self.cluster is not None:
            self.cluster.draining = True
            self.run_tasks = False
        with trio.move_on_after(grace):
            for actor in self.actors():  # (those started meanwhile are queued elsewhere)
                await actor.done.wait()
        if self.cluster is not None:
            left = [actor.task_id for actor in self.rerunnable_actors()]
            with contextlib.suppress(McpError):
                await self.cluster.hand_off(left)
            if left:
                log.info("drain: %d re-runnable task(s) handed to other processes", len(left))

    def _rerun_restored(self) -> None:
        """Run again the re-runnable tasks a store of one process found live at open."""
        if self._rerun_host is None:
            return  # (kept until a host is set)
        restored, self._to_rerun = self._to_rerun, []
        for record in restored:
            if not record.status.is_terminal:
                self.rerun(record)

    def _install(
        self,
        record: TaskRecord,
        work: Work,
        origin: TaskConnection | None,
        progress_token: str | int | None,
    ) -> TaskActor:
        """Keep ``record`` (a new task's) and make its actor: it starts once announced."""
        actor = TaskActor(self, record, origin, progress_token, work=work)
        self.keep(actor)
        return actor

    def launch(self, actor: TaskActor) -> None:
        """Start an announced actor's Trio task in the actors' nursery.

        ``start_soon`` once the ``CreateTaskResult`` is sent, with a constant
        name: why, measured, is in bench/PERF_NOTES.md (change 1).
        """
        if self._nursery is not None and self._actors.get(actor.task_id) is actor:
            self._nursery.start_soon(actor.run, name=_ACTOR_NAME)

    # --- requestor operations -------------------------------------------------------------

    async def record(self, owner: str, task_id: str) -> TaskRecord:
        """``owner``'s task ``task_id`` as a requestor may be told it: once durable.

        Completes without waiting when the store needs no wait.

        Raises:
            McpError: -32602 for an unknown, expired or foreign task; -32603
                when the store is unavailable.
        """
        record = await self.side.lookup(owner, task_id)
        audit.debug("task polled id=%s context=%s", task_id, owner)
        return record

    async def get(self, owner: str, task_id: str) -> Task:
        """``tasks/get``: the task's current state, once durable (see :meth:`record`).

        Raises:
            McpError: -32602 for an unknown, expired or foreign task; -32603
                when the store is unavailable.
        """
        return (await self.record(owner, task_id)).snapshot()

    async def result(self, owner: str, task_id: str, peer: TaskConnection) -> dict[str, Any]:
        """``tasks/result``: block until terminal, then return the outcome.

        While it waits, the task's side-channel requests go out over ``peer``.
        Completes without waiting for a task already terminal when the store
        needs no wait.

        Returns:
            The underlying request's result with the related-task ``_meta``.

        Raises:
            McpError: The underlying request's JSON-RPC error, or -32602 for
                an unknown task.

        Cancellation: cancelling stops waiting; the task is unaffected.
        """
        record = await self.side.wait_terminal(owner, task_id, peer)
        return final_result(record)

    async def list(self, owner: str, cursor: str | None) -> tuple[list[Task], str | None]:
        """``tasks/list``: one page of ``owner``'s tasks, oldest first.

        Raises:
            McpError: -32602 for a cursor this registry did not issue to
                ``owner``; -32603 when the store is unavailable.
        """
        after = 0 if cursor is None else self._cursors.read(owner, cursor)
        limit = self.limits.page_size
        await self.side.settle()  # this process's own changes in the store first
        records, more = await self.store.page(owner, after, limit)
        await self.side.settle()  # and what is told, durable
        now = trio.current_time()
        tasks = [r.snapshot() for r in records if r.deadline > now]
        next_cursor = self._cursors.make(owner, records[-1].seq) if more and records else None
        audit.debug("tasks listed context=%s count=%d", owner, len(tasks))
        return tasks, next_cursor

    async def cancel(
        self, owner: str, task_id: str, requestor: TaskConnection | None = None
    ) -> Task:
        """``tasks/cancel``: mark the task cancelled, then stop its work (see
        :meth:`cancel_record`); the cancelled ``Task``."""
        return (await self.cancel_record(owner, task_id, requestor)).snapshot()

    def cancel_record(
        self, owner: str, task_id: str, requestor: TaskConnection | None = None
    ) -> Awaitable[TaskRecord]:
        """``tasks/cancel``: mark the task cancelled, then stop its work (wherever it
        runs); the record once durable. Completes without waiting when the store
        needs no wait.

        ``requestor`` (the connection asking) learns the status from the
        answer: it gets no status notification of it.

        Raises:
            McpError: -32602 for an unknown task or one already terminal;
                -32603 when the store is unavailable.
        """
        return self.side.cancel(owner, task_id, requestor)  # (no frame of ours around it)
