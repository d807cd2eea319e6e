"""The contract of a task store that several server processes share (Redis).

A *local* store (:class:`~._store.MemoryTaskStore`, :class:`~._sqlite.SqliteTaskStore`)
belongs to one process, which therefore holds the truth in memory. A *shared* store
is the truth for every process attached to it: each one reads every record from
the store, so any process answers ``tasks/get|result|list|cancel`` for a task of
the identity, wherever its actor runs. The registry hands the cross-process
parts (waiting for a remote task, delivering a remote task's input requests,
cancelling a local actor on a remote cancel) to :class:`~._cluster.Cluster`.

Conflicts between processes are settled in the store, atomically: a status
change of a task applies only while the stored status is not terminal, so a
cancel from one process and a result arriving in another resolve to whichever
reached the store first, on every process.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Final, Protocol, final, runtime_checkable

import attrs
import trio

from ..._errors import INTERNAL_ERROR, McpError
from ._store import TaskRecord

_log = logging.getLogger("trio_mcp.tasks")

#: Status message of a task whose process stopped renewing its lease.
LEASE_LOST_MESSAGE: Final = (
    "The server process running this task stopped (its lease lapsed); its work was lost."
)


def store_unavailable(reason: str) -> McpError:
    """The JSON-RPC error a request gets while its store cannot be reached."""
    return McpError(INTERNAL_ERROR, f"Task store unavailable ({reason}); retry later")


class CapReached(Exception):
    """:meth:`SharedTaskStore.create` refused: the owner has ``max_live`` live tasks."""


@final
@attrs.frozen
class InputItem:
    """A side-channel request (``input_required``) queued in a shared store.

    Attributes:
        key: Unique within the task (the actor numbers its requests).
        method: The request's method (``elicitation/create``, ...).
        params: Its params, related-task ``_meta`` included.
    """

    key: str
    method: str
    params: dict[str, Any]


@final
@attrs.frozen
class InputAnswer:
    """The requestor's answer to an :class:`InputItem`: a result or an error."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None  # {"code", "message", "data"?}


class StoreEvents(Protocol):
    """What a shared store's background run reports to the process using it."""

    def on_hint(self, kind: str, task_id: str) -> None:
        """A hint arrived (``"status"``, ``"cancel"``, ``"input"`` or ``"answer"``).

        Hints are only hints: they may be lost or repeated; the receiver
        re-reads the store.
        """
        ...


@runtime_checkable
class SharedTaskStore(Protocol):
    """A task store shared by many processes. Every method may raise the
    :func:`store_unavailable` :class:`McpError` when the store cannot be reached.

    Attributes:
        instance: This process's id in the store (the holder of its lease).
        lease_seconds: How long after its last heartbeat a process is dead
            and its running tasks become ``failed``.
        hint_seconds: The longest a waiter sleeps between re-reads of the
            store (a lost hint costs at most this delay).
    """

    instance: str
    lease_seconds: float
    hint_seconds: float

    async def open(self) -> bytes:
        """Connect and take a lease; warn about a store that may evict keys.

        Returns:
            The cursor secret shared by every process (made by the first).
        """
        ...

    async def aclose(self) -> None:
        """Release the lease (tasks this process still runs become ``failed``)."""
        ...

    async def run(
        self, events: StoreEvents, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Until cancelled: receive hints, renew the lease, fail dead processes' tasks."""
        ...

    # --- records ---------------------------------------------------------------------

    async def create(self, record: TaskRecord, *, max_live: int) -> int:
        """Store a new record run by this process; return its global sequence number.

        Atomic with the owner's live count: raises :class:`CapReached` if
        ``record.owner`` already has ``max_live`` non-terminal tasks.
        """
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or ``None`` if unknown or expired."""
        ...

    async def page(self, owner: str, after_seq: int, limit: int) -> tuple[list[TaskRecord], bool]:
        """Up to ``limit`` live records of ``owner`` with ``seq > after_seq``, oldest first."""
        ...

    async def update(self, record: TaskRecord) -> bool:
        """Write ``record``'s status, message, timestamps and outcome.

        Applies only while the stored status is not terminal (compare and
        set); a terminal status also leaves the owner's live count. Sends a
        ``"status"`` hint.

        Returns:
            False if the stored task was already terminal or gone (the write
            was dropped: e.g. cancelled by another process).
        """
        ...

    async def update_many(self, records: Sequence[TaskRecord]) -> list[bool]:
        """:meth:`update` for each record, in order, in one round trip if the store can."""
        ...

    async def cancel(self, task_id: str, message: str, updated_at: str) -> TaskRecord | None:
        """Move a non-terminal task to ``cancelled`` and send a ``"cancel"`` hint.

        Returns:
            The record after the call (already terminal: unchanged), or ``None``
            if unknown.
        """
        ...

    async def delete(self, task_id: str) -> None:
        """Forget a record (its TTL ran out); a non-terminal one leaves the live count."""
        ...

    async def terminal_among(self, task_ids: Collection[str]) -> set[str]:
        """Which of these ids are terminal or gone in the store (the lease re-check)."""
        ...

    # --- the input_required side channel -------------------------------------------------

    async def push_input(self, task_id: str, item: InputItem) -> None:
        """Queue a side-channel request of the task; send an ``"input"`` hint."""
        ...

    async def claim_input(self, task_id: str, key: str | None = None) -> InputItem | None:
        """Take the oldest queued request (or the one with ``key``) off the queue, atomically."""
        ...

    async def peek_inputs(self, task_id: str) -> list[InputItem]:
        """The queued requests of the task, oldest first, left in the queue."""
        ...

    async def requeue_input(self, task_id: str, item: InputItem) -> None:
        """Put a claimed request back (its delivering connection closed)."""
        ...

    async def answer_input(self, task_id: str, key: str, answer: InputAnswer) -> None:
        """Store the answer to request ``key``; send an ``"answer"`` hint."""
        ...

    async def take_answer(self, task_id: str, key: str) -> InputAnswer | None:
        """Remove and return the answer to request ``key``, if there is one."""
        ...


class RecordMirror(Protocol):
    """Where the ledger copies every local change of a record, in order (the cluster)."""

    def written(self, record: TaskRecord) -> None:
        """``record`` changed (status, message, outcome): write it to the shared store."""
        ...

    def deleted(self, task_id: str) -> None:
        """The record's TTL ran out here: delete it from the shared store."""
        ...


class InputRelay(Protocol):
    """How a task actor asks its requestor for input when tasks are shared by processes."""

    async def ask(
        self, actor: Any, method: str, params: dict[str, Any]
    ) -> tuple[dict[str, Any], Any]:
        """Queue the request in the shared store, await the answer from any process.

        Returns:
            The raw result and the local connection that delivered it (``None``
            when another process delivered it).
        """
        ...

    async def ask_pulled(
        self, actor: Any, key: str, method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """A pulled question (2026-07-28): queued in the store for any process's
        ``tasks/get``; answered by ``tasks/update`` here or in any process."""
        ...


async def repeat(
    owner: object, what: str, period: float, job: Callable[[], Awaitable[object]]
) -> None:
    """Run ``job`` now and then every ``period`` seconds; log failures once per outage.

    A shared store's periodic jobs (lease renewal, the sweep of dead processes, the
    purge of expired records) run under this, in the store's :meth:`run`.
    """
    failing = False
    while True:
        try:
            await job()
        except Exception as exc:
            if not failing:
                _log.warning("%r: could not %s: %s", owner, what, brief_error(exc))
            failing = True
        else:
            if failing:
                _log.warning("%r: could %s again", owner, what)
            failing = False
        await trio.sleep(period)


def brief_error(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, unwrapping groups of one (for one-line logs)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
