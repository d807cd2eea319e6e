"""The registry's store half when one process alone uses the store (memory, SQLite).

:class:`Solo` and :class:`~._cluster.Cluster` give the registry the same few
operations (``run``, ``settle``, ``create``, ``lookup``, ``wait_terminal``, ``cancel``,
and the ledger's ``written``/``deleted``), so each ``tasks/*`` operation has one code path
in :class:`~._registry.TaskRegistry`. They differ in who holds the truth: here the
process does (the ledger's records are the store's own objects; the store makes
them durable), there the shared store does.

Every operation of a store used by one process returns without waiting (SQLite's
:meth:`~._sqlite.SqliteTaskStore.sync` excepted, while a commit is due), so
``tasks/get``, ``tasks/cancel``, ``tasks/result`` of a finished task and a create
in memory are answered in the task that read the request (:mod:`trio_mcp._inline`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import final

import trio

from ..._inline import at_once
from ._connection import TaskConnection
from ._ledger import TaskLedger, already_terminal, audit, live_cap_reached
from ._store import CapReached, TaskRecord, TaskStore


@final
class Solo:
    """Connects one registry to a store that no other process uses.

    Args:
        ledger: The registry.
        store: The store (opened and closed by the registry); ``store.shared`` is False.
    """

    #: Other processes do not use the store: the ledger holds the truth.
    shared = False

    def __init__(self, ledger: TaskLedger, store: TaskStore) -> None:
        self.store = store
        self._ledger = ledger
        #: Return once every change is durable (SQLite: committed; memory: at once):
        #: the store's own ``sync`` (no coroutine of ours around it, on the hot path).
        #: Raises McpError while the store is failing (e.g. disk full; nothing is lost);
        #: cancelled, it stops waiting and the writes go on.
        self.settle: Callable[[], Awaitable[None]] = store.sync

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the store's background work, if any (this side sends it no hints)."""
        await self.store.run(self, task_status=task_status)

    def on_hint(self, kind: str, task_id: str) -> None:
        """A store used by one process sends no hints."""

    async def create(self, record: TaskRecord, max_live: int) -> None:
        """Store a new record durably (at once in memory); set its sequence number.

        Raises:
            McpError: -32000 at the owner's live-task cap; -32603 when the store fails.
        """
        try:
            record.seq = await self.store.create(record, max_live=max_live)
        except CapReached:
            raise live_cap_reached(record.owner, max_live) from None

    # --- the ledger's RecordMirror: its changes, applied at once ---------------------

    def written(self, record: TaskRecord) -> None:
        """``record`` changed: the store takes it at once (durable after :meth:`settle`)."""
        at_once(self.store.update(record))

    def deleted(self, task_id: str) -> None:
        """The record's TTL ran out: the store forgets it at once."""
        at_once(self.store.delete(task_id))

    def released(self, task_id: str) -> None:
        """An actor ended: nothing to tell (its waiters woke as it ended)."""

    # --- reading -----------------------------------------------------------------------

    async def lookup(self, owner: str, task_id: str, *, final_here: bool = False) -> TaskRecord:
        """``owner``'s task, once its state is durable.

        Raises:
            McpError: -32602 for an unknown, expired or foreign id; -32603 when
                the store fails.
        """
        record = self._ledger.lookup(owner, task_id)
        await self.settle()  # a status is told only once it is durable
        return record

    async def cancel(
        self, owner: str, task_id: str, requestor: TaskConnection | None
    ) -> TaskRecord:
        """``tasks/cancel``: the local actor's task cancelled (status first, then its
        scope), the record once durable.

        Raises:
            McpError: -32602 for an unknown task or one already terminal; -32603
                when the store fails.
        """
        ledger = self._ledger
        record = ledger.lookup(owner, task_id)
        if record.status.is_terminal:
            raise already_terminal(record)
        ledger.cancel_actor(task_id, requestor)
        await self.settle()
        audit.info("task cancel requested id=%s context=%s", task_id, owner)
        return record

    async def wait_terminal(self, owner: str, task_id: str, peer: TaskConnection) -> TaskRecord:
        """``tasks/result``'s wait: until the task is terminal, serving its input
        requests over ``peer`` meanwhile; at once for a task already terminal.

        Raises:
            McpError: -32602 for an unknown, expired or foreign id.

        Cancellation: stops waiting; the task is unaffected.
        """
        ledger = self._ledger
        record = ledger.lookup(owner, task_id)
        actor = ledger.running_actor(task_id)
        if not record.status.is_terminal and actor is not None:
            await actor.wait_done(peer)  # parked, when started inline
            record = ledger.lookup(owner, task_id)
        await self.settle()
        return record

