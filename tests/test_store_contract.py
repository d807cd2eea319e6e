"""One contract, every store: the task registry's ``tasks/*`` behaviour over memory, SQLite,
Redis and PostgreSQL.

The same checks run against :class:`MemoryTaskStore`, :class:`SqliteTaskStore`, a
``RedisTaskStore`` on a private ``redis-server`` and a ``PostgresTaskStore`` on a fresh
database of a private PostgreSQL server (shared stores: the registry then reads every
record from the store). They go through the registry's own operations (create, get,
list, cancel, result), so a store passes only if a requestor would see the same thing
whichever store a server runs on. Then what only the shared store adds: a Redis outage
is a clear error, nothing acknowledged is lost, and service resumes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp import McpError, TaskStatus
from trio_mcp.peer._tasks import TaskActor, TaskRegistry

from .redis_server import RedisServer

STORES = ("memory", "sqlite", "redis", "postgres")
OWNER, OTHER = "identity:alice", "identity:bob"


@asynccontextmanager
async def registry(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, **limits: Any
) -> AsyncIterator[TaskRegistry]:
    store: str | None = None
    if kind == "sqlite":
        store = f"sqlite:///{tmp_path}/tasks.db"
    elif kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        store = f"{server.url}&lease=2"
    elif kind == "postgres":
        store = f"{request.getfixturevalue('postgres_url')}&lease=2"
    reg = TaskRegistry(trio_mcp.TaskLimits(**limits), store=store)
    async with reg.running():
        yield reg


class Requestor:
    """A requestor's connection as the task runtime sees it: answers input requests."""

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.answer = answer or {"action": "accept", "content": {"ok": True}}
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.notes: list[tuple[str, Any]] = []

    @property
    def is_open(self) -> bool:
        return True

    def notify_soon(self, method: str, params: Any = None) -> None:
        self.notes.append((method, params))

    async def request_raw(
        self, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        self.asked.append((method, params or {}))
        return self.answer


async def start(
    reg: TaskRegistry, work: Any, owner: str = OWNER, ttl: int | None = None, origin: Any = None
) -> TaskActor:
    actor = await reg.create(owner, "tools/call", work, requested_ttl=ttl, origin=origin)
    actor.announced.set()
    return actor


def answer(text: str) -> Any:
    """Work that completes at once with ``text``."""

    async def work(actor: TaskActor) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": text}], "isError": False}

    return work


@pytest.mark.parametrize("kind", STORES)
async def test_contract_create_get_result_list_and_identity(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with registry(kind, request, tmp_path) as reg:
        release = trio.Event()

        async def work(actor: TaskActor) -> dict[str, Any]:
            await release.wait()
            return {"content": [{"type": "text", "text": "done"}], "isError": False}

        actor = await start(reg, work)
        task_id = actor.task_id
        assert (await reg.get(OWNER, task_id)).status is TaskStatus.WORKING
        release.set()
        result = await reg.result(OWNER, task_id, Requestor())
        assert result["content"][0]["text"] == "done"
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        task = await reg.get(OWNER, task_id)
        assert task.status is TaskStatus.COMPLETED and task.ttl is not None
        listed, cursor = await reg.list(OWNER, None)
        assert [t.task_id for t in listed] == [task_id] and cursor is None
        # Another identity: not found, never listed (indistinguishable from unknown).
        for op in (reg.get(OTHER, task_id), reg.cancel(OTHER, task_id)):
            with pytest.raises(McpError) as info:
                await op
            assert info.value.code == -32602 and "not found" in info.value.message
        assert (await reg.list(OTHER, None)) == ([], None)
        with pytest.raises(McpError, match="not found"):
            await reg.get(OWNER, "0" * 32)


@pytest.mark.parametrize("kind", STORES)
async def test_contract_failures_keep_their_outcome(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with registry(kind, request, tmp_path) as reg:

        async def raises(actor: TaskActor) -> dict[str, Any]:
            raise McpError(-32602, "bad arguments", {"field": "x"})

        async def tool_error(actor: TaskActor) -> dict[str, Any]:
            return {"content": [{"type": "text", "text": "it broke"}], "isError": True}

        err = await start(reg, raises)
        with pytest.raises(McpError) as info:
            await reg.result(OWNER, err.task_id, Requestor())
        assert (info.value.code, info.value.message, info.value.data) == (
            -32602, "bad arguments", {"field": "x"},
        )
        failed = await reg.get(OWNER, err.task_id)
        assert failed.status is TaskStatus.FAILED
        assert failed.status_message == "Request failed: bad arguments"

        tool = await start(reg, tool_error)
        outcome = await reg.result(OWNER, tool.task_id, Requestor())
        assert outcome["isError"] is True and outcome["content"][0]["text"] == "it broke"
        assert (await reg.get(OWNER, tool.task_id)).status_message == (
            "Tool execution failed: it broke"
        )


@pytest.mark.parametrize("kind", STORES)
async def test_contract_cancel_stops_the_work_and_is_final(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with registry(kind, request, tmp_path) as reg:
        observed = trio.Event()

        async def forever(actor: TaskActor) -> dict[str, Any]:
            try:
                await trio.sleep_forever()
            finally:
                observed.set()
            raise AssertionError

        actor = await start(reg, forever)
        await trio.sleep(0.05)  # the work is running
        task = await reg.cancel(OWNER, actor.task_id)
        assert task.status is TaskStatus.CANCELLED
        with trio.fail_after(5):
            await observed.wait()  # the work saw its cancellation
        assert (await reg.get(OWNER, actor.task_id)).status is TaskStatus.CANCELLED
        with pytest.raises(McpError, match="already in terminal status 'cancelled'"):
            await reg.cancel(OWNER, actor.task_id)
        with pytest.raises(McpError, match="cancelled"):
            await reg.result(OWNER, actor.task_id, Requestor())


@pytest.mark.parametrize("kind", STORES)
async def test_contract_pages_with_cursors_bound_to_the_owner(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with registry(kind, request, tmp_path, page_size=2) as reg:
        ids = [(await start(reg, answer(str(n)))).task_id for n in range(5)]
        await start(reg, answer("other"), owner=OTHER)
        seen: list[str] = []
        cursor = None
        while True:
            page, cursor = await reg.list(OWNER, cursor)
            assert len(page) <= 2
            seen += [t.task_id for t in page]
            if cursor is None:
                break
            with pytest.raises(McpError, match="Invalid cursor"):
                await reg.list(OTHER, cursor)
        assert seen == ids  # creation order, each once, no foreign task


@pytest.mark.parametrize("kind", STORES)
async def test_contract_live_cap_per_identity(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with registry(kind, request, tmp_path, max_live_per_requestor=2) as reg:
        release = trio.Event()

        async def held(actor: TaskActor) -> dict[str, Any]:
            await release.wait()
            return {"content": []}

        first = await start(reg, held)
        await start(reg, held)
        with pytest.raises(McpError) as info:
            await start(reg, held)
        assert info.value.code == -32000 and "at most 2" in info.value.message
        await start(reg, held, owner=OTHER)  # the cap is per identity
        await reg.cancel(OWNER, first.task_id)
        await start(reg, held)  # a terminal task frees its place


@pytest.mark.parametrize("kind", STORES)
async def test_contract_expired_tasks_are_gone(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with registry(kind, request, tmp_path) as reg:
        done = await start(reg, answer("short"), ttl=300)
        await reg.result(OWNER, done.task_id, Requestor())
        kept = await start(reg, answer("kept"), ttl=60_000)
        await trio.sleep(0.5)  # real time: durable stores keep wall-clock expiry
        with pytest.raises(McpError) as info:
            await reg.get(OWNER, done.task_id)
        assert info.value.code == -32602
        assert [t.task_id for t in (await reg.list(OWNER, None))[0]] == [kept.task_id]


@pytest.mark.parametrize("kind", STORES)
async def test_contract_input_required_rides_the_open_result(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with registry(kind, request, tmp_path) as reg:

        async def asks(actor: TaskActor) -> dict[str, Any]:
            raw, _ = await actor.ask("elicitation/create", {"message": "ok?"})
            return {"content": [{"type": "text", "text": raw["action"]}]}

        actor = await start(reg, asks)
        with trio.fail_after(10):
            while (await reg.get(OWNER, actor.task_id)).status is TaskStatus.WORKING:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert (await reg.get(OWNER, actor.task_id)).status is TaskStatus.INPUT_REQUIRED
        requestor = Requestor()
        result = await reg.result(OWNER, actor.task_id, requestor)
        assert result["content"][0]["text"] == "accept"
        [(method, params)] = requestor.asked
        assert method == "elicitation/create" and params["message"] == "ok?"
        assert params["_meta"]["io.modelcontextprotocol/related-task"] == {
            "taskId": actor.task_id
        }
        assert (await reg.get(OWNER, actor.task_id)).status is TaskStatus.COMPLETED


async def test_contract_redis_outage_is_a_clear_error_and_nothing_is_lost(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trio_mcp.peer._tasks import _cluster

    monkeypatch.setattr(_cluster, "SETTLE_TIMEOUT", 1.0)
    reg = TaskRegistry(store=f"{redis_server.url}&lease=5")
    async with reg.running():
        assert reg.cluster is not None
        reg.cluster.store.op_timeout = 1.0  # type: ignore[attr-defined]
        done = await start(reg, answer("before"))
        await reg.result(OWNER, done.task_id, Requestor())
        release = trio.Event()

        async def finishes_during_the_outage(actor: TaskActor) -> dict[str, Any]:
            await release.wait()
            return {"content": [{"type": "text", "text": "during"}]}

        late = await start(reg, finishes_during_the_outage)

        redis_server.stop()
        for op in (reg.get(OWNER, done.task_id), reg.list(OWNER, None)):
            with trio.fail_after(10), pytest.raises(McpError) as info:
                await op
            assert info.value.code == -32603
            assert info.value.message.startswith("Task store unavailable (")
            assert info.value.message.endswith("; retry later")
        with trio.fail_after(10), pytest.raises(McpError, match="Task store unavailable"):
            await start(reg, answer("refused"))
        release.set()  # the task completes while Redis is down: its write waits
        await trio.sleep(0.2)

        redis_server.start()  # appendonly: what Redis had is back
        with trio.fail_after(15):
            while True:
                try:
                    task = await reg.get(OWNER, late.task_id)
                except McpError:
                    await trio.sleep(0.2)
                    continue
                break
        assert task.status is TaskStatus.COMPLETED  # the queued write landed
        kept = await reg.result(OWNER, done.task_id, Requestor())
        assert kept["content"][0]["text"] == "before"
        after = await reg.result(OWNER, late.task_id, Requestor())
        assert after["content"][0]["text"] == "during"
        again = await start(reg, answer("after"))
        assert (await reg.result(OWNER, again.task_id, Requestor()))["content"][0]["text"] == "after"


@pytest.mark.parametrize("kind", STORES)
async def test_contract_input_request_outlives_an_abandoned_tasks_result(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    class Silent(Requestor):
        async def request_raw(
            self, method: str, params: dict[str, Any] | None = None
        ) -> dict[str, Any]:
            self.asked.append((method, params or {}))
            await trio.sleep_forever()
            raise AssertionError

    async with registry(kind, request, tmp_path) as reg:

        async def asks(actor: TaskActor) -> dict[str, Any]:
            raw, _ = await actor.ask("elicitation/create", {"message": "ok?"})
            return {"content": [{"type": "text", "text": raw["action"]}]}

        actor = await start(reg, asks)
        silent = Silent()
        with trio.move_on_after(1):  # the requestor gives up on this tasks/result
            await reg.result(OWNER, actor.task_id, silent)
        assert [m for m, _ in silent.asked] == ["elicitation/create"]
        # The request went back in the queue: the next tasks/result gets it.
        second = Requestor()
        with trio.fail_after(10):
            result = await reg.result(OWNER, actor.task_id, second)
        assert result["content"][0]["text"] == "accept"
        assert [m for m, _ in second.asked] == ["elicitation/create"]
