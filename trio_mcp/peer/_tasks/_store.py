"""Where task records live: :class:`TaskRecord`, the one :class:`TaskStore` contract
(every store: memory, SQLite, Redis, PostgreSQL), and the default
:class:`MemoryTaskStore`."""

from __future__ import annotations

import bisect
import math
import os
import secrets
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias, final, runtime_checkable

import attrs
import trio

from ..._errors import McpError
from .._messages import ErrorData, Task, TaskStatus, task_wire

#: A terminal task's outcome: the result JSON, or the JSON-RPC error.
TaskOutcome: TypeAlias = dict[str, Any] | ErrorData


@final
@attrs.frozen
class RerunTicket:
    """What a store keeps of a re-runnable task to run it again in any process.

    Attributes:
        tool: The tool's name (only a process hosting it claims the task).
        attempts: The most runs (:attr:`trio_mcp.Rerun.attempts`).
        backoff: :attr:`trio_mcp.Rerun.backoff`.
        request: The request as JSON text (``_rerun.encode_request``).
    """

    tool: str
    attempts: int
    backoff: float
    request: str


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
    #: Which run of the task this is (1-based; a re-run after its process stopped: 2...).
    attempt: int = 1
    #: A re-runnable task's request, to run it again in any process (see ``_rerun``).
    rerun: RerunTicket | None = None

    def wire(self) -> dict[str, Any]:
        """The record as a wire ``Task`` object: ``to_wire(self.snapshot())``, built directly.

        For the hot paths (every CreateTaskResult, status notification,
        ``tasks/get`` and ``tasks/cancel`` answer); a fresh dict each call.
        """
        return task_wire(
            self.task_id, self.status, self.created_at, self.last_updated_at, self.ttl,
            self.status_message, self.poll_interval,
        )

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


@final
@attrs.frozen
class Opened:
    """What :meth:`TaskStore.open` found.

    Attributes:
        cursor_secret: The key that signs ``tasks/list`` cursors (kept by a durable
            store so cursors stay valid across restarts; shared by every process
            of a shared store).
        records: The records a store kept for this process alone (SQLite: the
            ones still within their TTL); empty for a shared store (every
            process reads them from the store).
        lost: How many tasks that were running when the process died were
            marked ``failed``.
    """

    cursor_secret: bytes
    records: tuple[TaskRecord, ...] = ()
    lost: int = 0


class CapReached(Exception):
    """:meth:`TaskStore.create` refused: the owner has ``max_live`` live tasks."""


@final
@attrs.frozen
class InputItem:
    """A side-channel request (``input_required``) queued in a store.

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
    """What a store's background run reports to the process using it."""

    def on_hint(self, kind: str, task_id: str) -> None:
        """A hint arrived (``"status"``, ``"cancel"``, ``"input"`` or ``"answer"``).

        Hints are only hints: they may be lost or repeated; the receiver
        re-reads the store. A store used by one process sends none.
        """
        ...


@runtime_checkable
class TaskStore(Protocol):
    """Where task records live: the one contract of every task store.

    :class:`MemoryTaskStore` (the default), :class:`~._sqlite.SqliteTaskStore`
    (durable, one process), ``RedisTaskStore`` and ``PostgresTaskStore`` (shared
    by many processes) implement it; ``tests/peer/tasks/test_store_contract.py`` runs the
    whole contract on all four. Every operation is ``async``; what a store can
    do at once it does at once: an operation of the memory store, and of SQLite
    until it must wait for a commit, returns without suspending. Before its first
    wait an operation awaits :func:`trio_mcp._inline.leave_reader` (the session
    starts ``tasks/*`` in the task that read the request, see
    :mod:`trio_mcp._inline`). Any operation may raise the
    :func:`~._shared.store_unavailable` :class:`~trio_mcp.McpError` when the
    store cannot be reached.

    Attributes:
        shared: True when other processes read and write the same tasks (the
            store, not this process, then holds the truth).
        instance: This process's id in the store (the holder of its lease).
        lease_seconds: How long after its last heartbeat a process is dead
            and its running tasks become ``failed`` (shared stores).
        hint_seconds: The longest a waiter sleeps between re-reads of the
            store (a lost hint costs at most this delay).
    """

    shared: bool
    instance: str
    lease_seconds: float
    hint_seconds: float

    async def open(self) -> Opened:
        """Connect (or load the file), take a lease; what the store holds for this process."""
        ...

    async def aclose(self) -> None:
        """Make every change durable if it can, release the lease, disconnect."""
        ...

    async def run(
        self, events: StoreEvents, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The store's background work (hints, lease, sweeps), if any; started once open."""
        ...

    async def sync(self) -> None:
        """Return once every change made so far is durable (a no-op where each
        operation is durable when it returns)."""
        ...

    # --- records ---------------------------------------------------------------------

    async def create(self, record: TaskRecord, *, max_live: int) -> int:
        """Store a new record run by this process, durably; return its sequence number.

        Atomic with the owner's live count: raises :class:`CapReached` if
        ``record.owner`` already has ``max_live`` non-terminal tasks.
        """
        ...

    async def create_many(
        self, records: Sequence[TaskRecord], *, max_live: int
    ) -> list[int | Exception]:
        """:meth:`create` for each record, in order, in one round trip if the store can.

        Returns:
            Each record's sequence number, or the :class:`CapReached` (or other
            error) its create would have raised.
        """
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or ``None`` if unknown or expired."""
        ...

    async def page(self, owner: str, after_seq: int, limit: int) -> tuple[list[TaskRecord], bool]:
        """Up to ``limit`` records of ``owner`` with ``seq > after_seq``, oldest first, and
        whether more remain."""
        ...

    async def update(self, record: TaskRecord) -> bool:
        """Write ``record``'s status, message, timestamps and outcome.

        Applies only while the stored status is not terminal (compare and
        set); a terminal status also leaves the owner's live count. Sends a
        ``"status"`` hint (shared stores).

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


@final
class RecordIndex:
    """Records by id and, per owner, in creation order: what a process knows in memory.

    The ledger's own index (every task for a store used by one process, the
    running ones for a shared store) and the body of :class:`MemoryTaskStore`.
    Not a store: synchronous, no live counts, no side channel. O(page) listing.
    """

    def __init__(self) -> None:
        self._records: dict[str, TaskRecord] = {}
        # Per owner: task ids in creation (seq) order; deleted ids are skipped
        # lazily and compacted when more than half are dead.
        self._order: dict[str, list[tuple[int, str]]] = {}
        self._dead: dict[str, int] = {}

    def add(self, record: TaskRecord) -> None:
        """Add a new record (its ``seq`` above every other of its owner)."""
        self._records[record.task_id] = record
        self._order.setdefault(record.owner, []).append((record.seq, record.task_id))

    def get(self, task_id: str) -> TaskRecord | None:
        """The record with this id, or ``None``."""
        return self._records.get(task_id)

    def replace(self, record: TaskRecord) -> None:
        """Keep ``record`` instead of the one with its id (same owner and seq)."""
        self._records[record.task_id] = record

    def delete(self, task_id: str) -> TaskRecord | None:
        """Forget the record (no error if it is gone); the record it was."""
        record = self._records.pop(task_id, None)
        if record is None:
            return None
        order = self._order.get(record.owner)
        if order is None:
            return record
        dead = self._dead.get(record.owner, 0) + 1
        if dead * 2 > len(order):
            order[:] = [(s, t) for s, t in order if t in self._records]
            dead = 0
        if not order:
            del self._order[record.owner]
            self._dead.pop(record.owner, None)
        else:
            self._dead[record.owner] = dead
        return record

    def page(self, owner: str, after_seq: int, limit: int) -> tuple[list[TaskRecord], bool]:
        """Up to ``limit`` records of ``owner`` with ``seq > after_seq`` in creation
        order, and whether more remain."""
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


@final
class MemoryTaskStore:
    """The default :class:`TaskStore`: dicts in memory, for one process; every
    operation returns without suspending.

    It keeps the record objects it is given (the registry's own: a status change
    is already in them when :meth:`update` is called).
    """

    shared = False
    lease_seconds = math.inf
    hint_seconds = math.inf

    def __init__(self) -> None:
        self.instance = "memory"
        self.index = RecordIndex()
        self._secret = secrets.token_bytes(16)
        self._seq = 0
        self._live: dict[str, set[str]] = {}  # owner -> its non-terminal task ids
        self._inputs: dict[str, list[InputItem]] = {}
        self._answers: dict[tuple[str, str], InputAnswer] = {}

    def __repr__(self) -> str:
        return "MemoryTaskStore()"

    async def open(self) -> Opened:
        return Opened(self._secret)  # cursors stay valid while the store lives

    async def aclose(self) -> None:
        pass

    async def run(
        self, events: StoreEvents, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()  # nothing runs in the background

    async def sync(self) -> None:
        pass  # nothing to make durable

    # --- records ---------------------------------------------------------------------

    def restore(self, records: Sequence[TaskRecord]) -> None:
        """Take records read back from elsewhere (a durable store's file), in seq order."""
        for record in records:
            self.index.add(record)
            self._seq = max(self._seq, record.seq)
            if not record.status.is_terminal:
                self._live.setdefault(record.owner, set()).add(record.task_id)

    async def create(self, record: TaskRecord, *, max_live: int) -> int:
        live = self._live.get(record.owner)
        if live is None:
            live = self._live[record.owner] = set()
        elif len(live) >= max_live:
            raise CapReached(record.owner)
        self._seq += 1
        record.seq = self._seq
        if not record.status.is_terminal:
            live.add(record.task_id)
        self.index.add(record)
        return self._seq

    async def create_many(
        self, records: Sequence[TaskRecord], *, max_live: int
    ) -> list[int | Exception]:
        return await create_one_by_one(self, records, max_live=max_live)

    async def get(self, task_id: str) -> TaskRecord | None:
        return self.index.get(task_id)

    async def page(self, owner: str, after_seq: int, limit: int) -> tuple[list[TaskRecord], bool]:
        return self.index.page(owner, after_seq, limit)

    def _apply(self, record: TaskRecord) -> bool:
        stored = self.index.get(record.task_id)
        if stored is None:
            return False
        live = self._live.get(stored.owner)
        if live is None or record.task_id not in live:
            return False  # terminal already (compare and set)
        if stored is not record:
            self.index.replace(record)
        if record.status.is_terminal:  # it leaves the live count (as _leave, inline)
            live.discard(record.task_id)
            if not live:
                del self._live[stored.owner]
        return True

    def _leave(self, owner: str, task_id: str) -> None:
        live = self._live.get(owner)
        if live is not None:
            live.discard(task_id)
            if not live:
                del self._live[owner]

    async def update(self, record: TaskRecord) -> bool:
        return self._apply(record)

    async def update_many(self, records: Sequence[TaskRecord]) -> list[bool]:
        return [self._apply(record) for record in records]

    async def cancel(self, task_id: str, message: str, updated_at: str) -> TaskRecord | None:
        record = self.index.get(task_id)
        if record is None or record.status.is_terminal:
            return record
        record.status = TaskStatus.CANCELLED
        record.status_message = message
        record.last_updated_at = updated_at
        self._leave(record.owner, task_id)
        return record

    async def delete(self, task_id: str) -> None:
        record = self.index.delete(task_id)
        if record is not None:
            self._leave(record.owner, task_id)
        self._inputs.pop(task_id, None)
        if self._answers:
            for key in [k for k in self._answers if k[0] == task_id]:
                del self._answers[key]

    async def terminal_among(self, task_ids: Collection[str]) -> set[str]:
        index = self.index
        return {
            t for t in task_ids
            if (r := index.get(t)) is None or t not in self._live.get(r.owner, ())
        }  # fmt: skip

    # --- the input_required side channel -------------------------------------------------

    async def push_input(self, task_id: str, item: InputItem) -> None:
        self._inputs.setdefault(task_id, []).append(item)

    async def claim_input(self, task_id: str, key: str | None = None) -> InputItem | None:
        queue = self._inputs.get(task_id)
        if not queue:
            return None
        for i, item in enumerate(queue):
            if key is None or item.key == key:
                del queue[i]
                return item
        return None

    async def peek_inputs(self, task_id: str) -> list[InputItem]:
        return list(self._inputs.get(task_id, ()))

    async def requeue_input(self, task_id: str, item: InputItem) -> None:
        self._inputs.setdefault(task_id, []).insert(0, item)

    async def answer_input(self, task_id: str, key: str, answer: InputAnswer) -> None:
        self._answers[task_id, key] = answer

    async def take_answer(self, task_id: str, key: str) -> InputAnswer | None:
        return self._answers.pop((task_id, key), None)

    if TYPE_CHECKING:

        def _conforms(store: MemoryTaskStore) -> TaskStore:
            return store  # mypy checks the class against the protocol


_last_iso: tuple[int, str] = (-1, "")
_last_second: tuple[int, str] = (-1, "")


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds (``...Z``).

    Formatted once per millisecond: creating or cancelling thousands of tasks
    reads the clock thousands of times within the same millisecond.
    """
    global _last_iso, _last_second
    ms = time.time_ns() // 1_000_000
    last = _last_iso
    if ms == last[0]:
        return last[1]
    seconds, millis = divmod(ms, 1000)
    if seconds != _last_second[0]:
        _last_second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    text = f"{_last_second[1]}.{millis:03d}Z"
    _last_iso = (ms, text)
    return text


def wall_expiry(deadline: float) -> float | None:
    """A record's deadline (Trio clock) as a wall-clock instant (Unix seconds), for a
    store that outlives the process; ``None`` for no deadline."""
    if deadline == math.inf:
        return None
    return time.time() + max(0.0, deadline - trio.current_time())


def trio_deadline(expires: float | None, now_wall: float, now_trio: float) -> float:
    """The inverse of :func:`wall_expiry`, against one reading of both clocks."""
    return math.inf if expires is None else now_trio + (expires - now_wall)


#: Task ids drawn from the OS CSPRNG at a time (16 bytes each).
_IDS_PER_DRAW: Final = 256
_id_pool: list[str] = []


def new_task_id() -> str:
    """A new task id: 128 random bits from the OS CSPRNG (``os.urandom``), as 32 hex digits.

    Drawn 256 at a time (one ``getrandom`` call and one ``hex`` per 4 KiB:
    ~1.5 us less per task than ``secrets.token_hex(16)``, the same source).
    A forked child starts with an empty pool, so it never repeats its
    parent's ids; each id is popped once, from any thread.
    """
    while True:
        try:
            return _id_pool.pop()
        except IndexError:
            raw = os.urandom(16 * _IDS_PER_DRAW).hex()
            _id_pool.extend([raw[i : i + 32] for i in range(0, len(raw), 32)])


os.register_at_fork(after_in_child=_id_pool.clear)


async def create_one_by_one(
    store: TaskStore, records: Sequence[TaskRecord], *, max_live: int
) -> list[int | Exception]:
    """``create_many`` of a store with no batch of its own: each record created in turn.

    A record the store refuses gets its exception in its place (:class:`CapReached`,
    or the :class:`~trio_mcp.McpError` of a store that failed), as ``create_many`` says.
    """
    out: list[int | Exception] = []
    for record in records:
        try:
            out.append(await store.create(record, max_live=max_live))
        except (CapReached, McpError) as exc:
            out.append(exc)
    return out
