"""What the shared stores' own tests (Redis, PostgreSQL) use alike.

:func:`record` makes a working task record, :class:`Hints` is a ``StoreEvents``
that records hints, and :func:`opened` opens a store (with its background run)
for the length of a block.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_mcp.peer._messages import TaskStatus
from trio_mcp.peer._tasks._store import TaskRecord, now_iso


def record(task_id: str, owner: str = "alice", *, ttl: int | None = 60_000) -> TaskRecord:
    """A working ``tools/call`` task record of ``owner`` (no deadline when ``ttl`` is None)."""
    now = now_iso()
    deadline = math.inf if ttl is None else trio.current_time() + ttl / 1000
    return TaskRecord(
        task_id=task_id, owner=owner, seq=0, method="tools/call", status=TaskStatus.WORKING,
        created_at=now, last_updated_at=now, ttl=ttl, poll_interval=250, deadline=deadline,
    )  # fmt: skip


class Hints:
    """A StoreEvents that records hints and lets a test wait for one."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str]] = []
        self._changed = trio.Event()

    def on_hint(self, kind: str, task_id: str) -> None:
        self.got.append((kind, task_id))
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, hint: tuple[str, str], timeout: float = 5.0) -> None:
        with trio.fail_after(timeout):
            while hint not in self.got:
                await self._changed.wait()


@asynccontextmanager
async def opened(store: Any, *, run: bool = True) -> AsyncIterator[tuple[Any, Hints]]:
    """``store`` opened (with its background run unless ``run=False``), and its hints."""
    hints = Hints()
    await store.open()
    try:
        async with trio.open_nursery() as nursery:
            if run:
                await nursery.start(store.run, hints)
            yield store, hints
            nursery.cancel_scope.cancel()
    finally:
        await store.aclose()
