"""Where task records live: :class:`TaskRecord`, the :class:`TaskStore` contract, and
the default :class:`MemoryTaskStore`."""

from __future__ import annotations

import bisect
import math
import os
import time
from typing import Any, Final, Protocol, TypeAlias, final

import attrs
import trio

from .._messages import ErrorData, Task, TaskStatus, task_wire

#: A terminal task's outcome: the result JSON, or the JSON-RPC error.
TaskOutcome: TypeAlias = dict[str, Any] | ErrorData


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
