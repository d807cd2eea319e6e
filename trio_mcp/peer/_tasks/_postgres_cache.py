"""The terminal records a shared store's process has seen: :class:`TerminalCache`.

In a shared :class:`~._store.TaskStore` a task that is terminal never changes
again: every status write is a compare-and-set that applies only while the task
is live (``completed``, ``failed`` and ``cancelled`` are final on every process),
and a record is deleted only once its TTL ran out (by the ledger of its process,
or by the purge of expired rows), at the instant its ``deadline`` already makes
a read answer "gone". So a terminal record this process wrote or read answers
later reads of it, until its deadline, exactly as the store would: the
``tasks/result`` and ``tasks/get`` that follow a task's completion cost no round
trip.
"""

from __future__ import annotations

from typing import Final, final

import attrs
import trio

from ._store import TaskRecord

#: The most records kept (the oldest go first).
CACHE_SIZE: Final = 4096


@final
class TerminalCache:
    """Terminal records by id, at most ``size``, each until its deadline.

    Args:
        size: The most records kept.
    """

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._records: dict[str, TaskRecord] = {}

    def keep(self, record: TaskRecord | None) -> None:
        """Remember ``record`` (a copy) if it is terminal (and stored as it is: PostgreSQL
        keeps a NUL of a status message as U+FFFD)."""
        if record is None or not record.status.is_terminal:
            return
        if record.status_message is not None and "\x00" in record.status_message:
            return
        records = self._records
        if len(records) >= self.size and record.task_id not in records:
            del records[next(iter(records))]
        records[record.task_id] = attrs.evolve(record)

    def get(self, task_id: str) -> TaskRecord | None:
        """A copy of the terminal record of ``task_id`` if known and not expired."""
        record = self._records.get(task_id)
        if record is None:
            return None
        if record.deadline <= trio.current_time():
            del self._records[task_id]
            return None
        return attrs.evolve(record)

    def drop(self, task_id: str) -> None:
        """Forget ``task_id`` (it was deleted)."""
        self._records.pop(task_id, None)

    def __len__(self) -> int:
        return len(self._records)
