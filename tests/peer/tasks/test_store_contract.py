"""One contract, every store: the :class:`TaskStore` protocol, then the task registry's
``tasks/*`` behaviour, over memory, SQLite, Redis and PostgreSQL.

The same checks run against :class:`MemoryTaskStore`, :class:`SqliteTaskStore`, a
``RedisTaskStore`` on a private ``redis-server`` and a ``PostgresTaskStore`` on a fresh
database of a private PostgreSQL server, and the ``RedisTaskStore`` again on a
private three-master Redis Cluster (``redis+cluster://``). First the store itself,
operation by operation (the one async contract every store implements: create with the live cap, compare-and-set
updates, cancel, pages, the input side channel); then through the registry's own
operations (create, get, list, cancel, result), so a store passes only if a requestor
would see the same thing whichever store a server runs on (shared stores: the registry
then reads every record from the store). Then what only the shared store adds: a Redis
outage is a clear error, nothing acknowledged is lost, and service resumes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import trio_mcp
from trio_mcp import McpError, TaskStatus
from trio_mcp._inline import run_inline
from trio_mcp.peer._tasks import TaskActor, TaskRegistry
from trio_mcp.peer._tasks._open import open_task_store
from trio_mcp.peer._tasks._store import (
    CapReached,
    InputAnswer,
    InputItem,
    Opened,
    TaskStore,
)

from tests.redis_cluster import cluster_store_url
from tests.redis_server import RedisServer
from tests.shared_store_support import opened
from tests.shared_store_support import record as working_record

STORES = ("memory", "sqlite", "redis", "redis-cluster", "postgres")
SHARED = ("redis", "redis-cluster", "postgres")
OWNER, OTHER = "identity:alice", "identity:bob"


@asynccontextmanager
async def registry(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, **limits: Any
) -> AsyncIterator[TaskRegistry]:
    store = store_url(kind, request, tmp_path)
    reg = TaskRegistry(trio_mcp.TaskLimits(**limits), store=store)
    async with reg.running():
        yield reg


def store_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a fresh store of ``kind`` (Redis and PostgreSQL: private servers)."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/tasks.db"
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        return f"{server.url}&lease=2"
    if kind == "redis-cluster":  # a three-master Redis Cluster; a key prefix of its own
        return cluster_store_url(request.getfixturevalue("redis_cluster"), lease=2)
    if kind == "postgres":
        return f"{request.getfixturevalue('postgres_url')}&lease=2"
    return "memory"


@asynccontextmanager
async def a_store(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[TaskStore]:
    """A store of ``kind``, opened and running, closed after the block."""
    store: TaskStore = open_task_store(store_url(kind, request, tmp_path))
    assert isinstance(store, TaskStore)
    async with opened(store) as (running, _):
        yield running


# --- the TaskStore contract, operation by operation -------------------------------------


@pytest.mark.parametrize("kind", STORES)
async def test_store_create_get_update_is_compare_and_set(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with a_store(kind, request, tmp_path) as store:
        assert store.shared is (kind in SHARED)
        first = working_record("t-cas-1", OWNER)
        seq = await store.create(first, max_live=10)
        second_seq = await store.create(working_record("t-cas-2", OWNER), max_live=10)
        assert 0 < seq < second_seq
        got = await store.get("t-cas-1")
        assert got is not None and (got.owner, got.status, got.seq) == (
            OWNER, TaskStatus.WORKING, seq,
        )  # fmt: skip
        done = attrs.evolve(
            first, seq=seq, status=TaskStatus.COMPLETED, status_message=None,
            outcome={"content": [{"type": "text", "text": "é"}], "isError": False},
        )  # fmt: skip
        assert await store.update(done) is True
        got = await store.get("t-cas-1")
        assert got is not None and got.status is TaskStatus.COMPLETED
        assert got.outcome == done.outcome
        # Terminal in the store: a later write is dropped (another process cancelled it...).
        late = attrs.evolve(first, seq=seq, status=TaskStatus.FAILED, status_message="late")
        assert await store.update(late) is False
        assert await store.update_many([late]) == [False]
        got = await store.get("t-cas-1")
        assert got is not None and got.status is TaskStatus.COMPLETED
        await store.delete("t-cas-1")
        await store.delete("t-cas-1")  # no error when already gone
        assert await store.get("t-cas-1") is None
        assert await store.update(done) is False  # gone
        await store.sync()  # every change so far durable


@pytest.mark.parametrize("kind", STORES)
async def test_store_live_cap_is_atomic_with_create(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with a_store(kind, request, tmp_path) as store:
        a, b = working_record("t-cap-1", OWNER), working_record("t-cap-2", OWNER)
        a.seq = await store.create(a, max_live=2)
        await store.create(b, max_live=2)
        with pytest.raises(CapReached):
            await store.create(working_record("t-cap-3", OWNER), max_live=2)
        assert await store.create(working_record("t-cap-x", OTHER), max_live=2) > 0
        assert await store.get("t-cap-3") is None  # refused: not stored
        a.status = TaskStatus.COMPLETED  # a terminal task leaves the live count
        assert await store.update(a) is True
        answers = await store.create_many(
            [working_record("t-cap-4", OWNER), working_record("t-cap-5", OWNER)], max_live=2
        )
        assert isinstance(answers[0], int) and isinstance(answers[1], CapReached)


@pytest.mark.parametrize("kind", STORES)
async def test_store_pages_one_owner_in_creation_order(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with a_store(kind, request, tmp_path) as store:
        seqs = {}
        for n in range(1, 8):
            owner = OWNER if n % 2 else OTHER
            seqs[n] = await store.create(working_record(f"t-page-{n}", owner), max_live=10)
        await store.delete("t-page-3")
        page, more = await store.page(OWNER, 0, 2)
        assert [r.task_id for r in page] == ["t-page-1", "t-page-5"] and more
        page, more = await store.page(OWNER, seqs[5], 2)
        assert [r.task_id for r in page] == ["t-page-7"] and not more
        assert await store.page("identity:nobody", 0, 10) == ([], False)


@pytest.mark.parametrize("kind", STORES)
async def test_store_cancel_and_terminal_among(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with a_store(kind, request, tmp_path) as store:
        running, victim = working_record("t-run", OWNER), working_record("t-victim", OWNER)
        await store.create(running, max_live=10)
        await store.create(victim, max_live=10)
        cancelled = await store.cancel("t-victim", "stop", "2026-11-28T00:00:00.000Z")
        assert cancelled is not None and cancelled.status is TaskStatus.CANCELLED
        assert cancelled.status_message == "stop"
        again = await store.cancel("t-victim", "twice", "2026-11-28T00:00:01.000Z")
        assert again is not None and again.status_message == "stop"  # terminal: unchanged
        assert await store.cancel("t-unknown", "x", "2026-11-28T00:00:00.000Z") is None
        stopped = await store.terminal_among(["t-run", "t-victim", "t-unknown"])
        assert stopped == {"t-victim", "t-unknown"}
        late = attrs.evolve(victim, status=TaskStatus.COMPLETED)
        assert await store.update(late) is False  # the cancel won


@pytest.mark.parametrize("kind", STORES)
async def test_store_input_side_channel(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with a_store(kind, request, tmp_path) as store:
        await store.create(working_record("t-in", OWNER), max_live=10)
        first = InputItem("1", "elicitation/create", {"message": "one?"})
        second = InputItem("2", "sampling/createMessage", {"messages": []})
        await store.push_input("t-in", first)
        await store.push_input("t-in", second)
        assert await store.peek_inputs("t-in") == [first, second]
        assert await store.claim_input("t-in", "2") == second
        assert await store.claim_input("t-in") == first
        assert await store.claim_input("t-in") is None
        await store.requeue_input("t-in", first)
        assert await store.peek_inputs("t-in") == [first]
        assert await store.take_answer("t-in", "1") is None
        answer_ = InputAnswer(result={"action": "accept", "content": {"ok": True}})
        await store.answer_input("t-in", "1", answer_)
        assert await store.take_answer("t-in", "1") == answer_
        assert await store.take_answer("t-in", "1") is None


@pytest.mark.parametrize("kind", ("memory", "sqlite"))
async def test_store_of_one_process_answers_without_waiting(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """What a store can do at once it does at once: the memory store's operations, and
    SQLite's reads and queued writes, return without suspending (a request is answered
    in the task that read it); SQLite's sync leaves only while a commit is due."""
    async with a_store(kind, request, tmp_path) as store:
        record = working_record("t-now", OWNER)
        await store.create(record, max_live=10)
        record.status = TaskStatus.COMPLETED
        for op in (
            store.get("t-now"), store.page(OWNER, 0, 10), store.update(record),
            store.terminal_among(["t-now"]), store.peek_inputs("t-now"),
        ):  # fmt: skip
            done, _ = run_inline(op)
            assert done
        done, rest = run_inline(store.sync())
        assert done is (kind == "memory")
        if not done:
            await rest  # type: ignore[misc]  # the commit, in this task
        opened_ = await store.open() if kind == "memory" else None
        assert opened_ is None or (isinstance(opened_, Opened) and len(opened_.cursor_secret) >= 16)


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
        made = trio.current_time()  # a TTL a loaded machine collects the result within
        done = await start(reg, answer("short"), ttl=600)
        await reg.result(OWNER, done.task_id, Requestor())
        kept = await start(reg, answer("kept"), ttl=60_000)
        # real time: durable stores keep wall-clock expiry
        await trio.sleep_until(made + 0.8)
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


async def test_a_question_waits_for_a_requestor_polling_at_the_suggested_interval(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Spec (2025-11-25 tasks, input_required): "When the requestor encounters the
    input_required status, it SHOULD preemptively call tasks/result". A requestor that
    polled ``working`` just before the task asked sees ``input_required`` one
    ``pollInterval`` later and then opens ``tasks/result`` (the TypeScript SDK's
    ``requestStream``): the question waits for it there, and is not sent to the
    requestor's newest connection in the meantime. One that never opens it still gets
    the question on that connection."""
    reg = TaskRegistry(trio_mcp.TaskLimits())
    async with reg.running():
        gate = trio.Event()

        async def asks(actor: TaskActor) -> dict[str, Any]:
            await gate.wait()
            raw, _ = await actor.ask("elicitation/create", {"message": "ok?"})
            return {"content": [{"type": "text", "text": raw["action"]}]}

        newest, polling = Requestor(), Requestor()
        reg.attach(OWNER, newest)  # the requestor's open connection
        actor = await start(reg, asks, origin=newest)
        interval = (await reg.get(OWNER, actor.task_id)).poll_interval
        assert interval is not None
        gate.set()  # the task asks just after the requestor's first poll
        await trio.sleep(interval / 1000 + 0.005)  # one interval and a round trip
        assert (await reg.get(OWNER, actor.task_id)).status is TaskStatus.INPUT_REQUIRED
        result = await reg.result(OWNER, actor.task_id, polling)
        assert result["content"][0]["text"] == "accept"
        assert [m for m, _ in polling.asked] == ["elicitation/create"] and newest.asked == []

        # Nobody opens tasks/result: after two intervals it goes to the newest connection.
        gate = trio.Event()
        actor = await start(reg, asks, origin=newest)
        gate.set()
        with trio.fail_after(3 * interval / 1000):
            while not newest.asked:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert (await reg.result(OWNER, actor.task_id, polling))["content"][0]["text"] == (
            "accept"
        )
        assert [m for m, _ in newest.asked] == ["elicitation/create"]


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
