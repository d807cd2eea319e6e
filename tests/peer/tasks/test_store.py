"""The stores of one process (memory, SQLite) under an App, then what only SQLite does.

The :class:`TaskStore` contract itself runs on all four stores in
``tests/peer/tasks/test_store_contract.py`` (like trio's ``check_two_way_stream``).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp import McpError, TaskStatus
from trio_mcp.peer._messages import ErrorData
from trio_mcp.peer._tasks import _sqlite
from trio_mcp.peer._tasks._open import open_task_store
from trio_mcp.peer._tasks._sqlite import LOST_MESSAGE, SqliteTaskStore
from trio_mcp.peer._tasks._store import MemoryTaskStore, TaskRecord, TaskStore

STORES = ("memory", "sqlite")


@asynccontextmanager
async def opened(kind: str, tmp_path: Path) -> AsyncIterator[Any]:
    if kind == "memory":
        yield MemoryTaskStore()
        return
    store = SqliteTaskStore(tmp_path / "tasks.db")
    await store.open()
    try:
        yield store
    finally:
        await store.aclose()


def _record(n: int, owner: str = "identity:a", **changes: Any) -> TaskRecord:
    fields: dict[str, Any] = {
        "task_id": f"task-{n}",
        "owner": owner,
        "seq": n,
        "method": "tools/call",
        "status": TaskStatus.WORKING,
        "created_at": "2026-11-23T00:00:00.000Z",
        "last_updated_at": "2026-11-23T00:00:00.000Z",
        "ttl": 60_000,
        "poll_interval": 500,
        "deadline": trio.current_time() + 60,
    }
    fields.update(changes)
    return TaskRecord(**fields)


# --- memory and SQLite under an App (the contract itself: test_store_contract.py) -----


@pytest.mark.parametrize("kind", STORES)
async def test_store_contract_serves_the_registry(kind: str, tmp_path: Path) -> None:
    store: TaskStore = MemoryTaskStore() if kind == "memory" else SqliteTaskStore(tmp_path / "t.db")
    app = trio_mcp.App("stored", store=store)

    @app.tool(task_support="optional")
    async def double(x: int) -> str:
        return str(2 * x)

    async with trio_mcp.open_memory_pair(app) as (client, _):
        handles = [await client.call_tool_task("double", {"x": n}) for n in range(5)]
        results = [(await h.result()).text for h in handles]
        assert results == ["0", "2", "4", "6", "8"]
        listed = [t.task_id async for t in client.iter_tasks()]
        assert listed == [h.task_id for h in handles]


# --- what a durable store adds ---------------------------------------------------------------


async def test_store_sqlite_reopens_with_every_record_and_outcome(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    await store.open()
    done = _record(1, status=TaskStatus.COMPLETED, outcome={"content": [{"type": "text", "text": "é"}]})
    failed = _record(2, status=TaskStatus.FAILED, outcome=ErrorData(-32602, "bad", {"x": [1]}))
    running = _record(3)
    forever = _record(4, ttl=None, deadline=math.inf, status=TaskStatus.COMPLETED, outcome={})
    for record in (done, failed, running, forever):
        await store.create(record, max_live=10)  # committed when it returns
    await store.aclose()

    again = SqliteTaskStore(path)
    restored = await again.open()
    try:
        by_id = {r.task_id: r for r in restored.records}
        assert by_id["task-1"].outcome == done.outcome
        assert by_id["task-2"].outcome == ErrorData(-32602, "bad", {"x": [1]})
        assert by_id["task-3"].status is TaskStatus.FAILED
        assert by_id["task-3"].status_message == LOST_MESSAGE
        assert by_id["task-4"].deadline == math.inf and by_id["task-4"].ttl is None
        assert restored.lost == 1
        assert await again.get("task-2") is not None  # loaded into memory too
    finally:
        await again.aclose()
    third = SqliteTaskStore(path)
    assert (await third.open()).cursor_secret == restored.cursor_secret
    await third.aclose()


async def test_store_sqlite_drops_expired_records_on_open(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    await store.open()
    await store.create(_record(1, ttl=1, deadline=trio.current_time() + 0.001), max_live=10)
    await store.create(_record(2), max_live=10)
    await store.aclose()
    await trio.sleep(0.05)  # real time: the expiry is a wall-clock instant on disk
    again = SqliteTaskStore(path)
    restored = await again.open()
    await again.aclose()
    assert [r.task_id for r in restored.records] == ["task-2"]


async def test_store_registry_cursors_stay_valid_across_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/tasks.db"
    limits = trio_mcp.TaskLimits(page_size=2)
    first = trio_mcp.TaskRegistry(limits, store=url)
    async with first.running():
        for _ in range(5):

            async def work(actor: Any) -> dict[str, Any]:
                return {"content": []}

            actor = await first.create("identity:a", "tools/call", work, requested_ttl=None, origin=None)
            actor.announced.set()
            await actor.done.wait()
        tasks, cursor = await first.list("identity:a", None)
        assert len(tasks) == 2 and cursor is not None
        await first.settle()
    second = trio_mcp.TaskRegistry(limits, store=url)
    async with second.running():
        rest, _ = await second.list("identity:a", cursor)
        assert [t.task_id for t in rest] != [] and rest[0].task_id not in {t.task_id for t in tasks}
        with pytest.raises(McpError):
            await second.list("identity:b", cursor)  # still bound to its owner


async def test_store_sqlite_failing_disk_is_a_clear_error_then_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite, "SYNC_TIMEOUT", 0.3)
    monkeypatch.setattr(_sqlite, "_RETRY_SECONDS", 0.05)
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    await store.open()
    record = _record(1)
    await store.create(record, max_live=10)
    saboteur = sqlite3.connect(path)
    saboteur.executescript(
        "CREATE TABLE broken (x); INSERT INTO broken VALUES (1);"
        "CREATE TRIGGER full BEFORE INSERT ON tasks WHEN (SELECT count(*) FROM broken) > 0 "
        "BEGIN SELECT RAISE(ABORT, 'database or disk is full (simulated)'); END;"
    )
    saboteur.commit()
    try:
        # A create is committed before it returns: on a failing disk it is refused.
        with pytest.raises(McpError) as info:
            await store.create(_record(2), max_live=10)
        assert info.value.code == -32603 and "disk is full" in info.value.message
        assert await store.get("task-2") is None
        record.status = TaskStatus.COMPLETED
        record.outcome = {"content": [], "isError": False}
        assert await store.update(record)  # queued at once
        with pytest.raises(McpError) as info:
            await store.sync()
        assert info.value.code == -32603 and "disk is full" in info.value.message
        saboteur.execute("DELETE FROM broken")
        saboteur.commit()
        await store.sync()  # the queued write went through: nothing was lost
    finally:
        saboteur.close()
        await store.aclose()
    again = SqliteTaskStore(path)
    restored = await again.open()
    await again.aclose()
    assert [(r.task_id, r.status) for r in restored.records] == [("task-1", TaskStatus.COMPLETED)]


def test_store_urls() -> None:
    assert isinstance(open_task_store("memory"), MemoryTaskStore)
    store = open_task_store("sqlite:///some/dir/tasks.db")
    assert isinstance(store, SqliteTaskStore) and store.path == Path("some/dir/tasks.db")
    assert open_task_store("sqlite:////tmp/x.db").path == Path("/tmp/x.db")
    for bad in ("mysql://x", "sqlite://", "tasks.db", "redis:/nohost", "postgresql:/x"):
        with pytest.raises(ValueError):
            open_task_store(bad)
