"""``tasks/result`` of a task still running waits parked, with no Trio task of its own.

MCP 2025-11-25 (basic/utilities/tasks, "Result Retrieval"): a ``tasks/result`` for a
task not yet terminal MUST block until it is, then return what the underlying request
would have. Served over OS pipes by the real stdio transport and session, in each
store: the waiting request is parked on the task's actor and answered from the task
that ends it; cancelled, it stops waiting at once and its id is free; its connection
closing drops it, and the task goes on to its end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_mcp

from tests.peer.tasks.test_store_contract import store_url
from tests.transports.test_stdio_reader_task import Spawned, Wire, served

pytestmark = pytest.mark.timeout(30)


def _app(store: str = "memory") -> tuple[trio_mcp.App, dict[str, trio.Event]]:
    app = trio_mcp.App("parked-results", store=store)
    gates: dict[str, trio.Event] = {}

    @app.tool(task_support="optional")
    async def gated(name: str) -> str:
        gate = gates.setdefault(name, trio.Event())
        await gate.wait()
        return f"{name} done"

    return app, gates


async def _start(wire: Wire, request_id: int, name: str) -> str:
    await wire.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": "gated", "arguments": {"name": name}, "task": {"ttl": 60_000}}})  # fmt: skip
    answer = await wire.receive()
    assert answer["id"] == request_id, answer
    task_id: str = answer["result"]["task"]["taskId"]
    return task_id


def _result(request_id: int, task_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tasks/result",
            "params": {"taskId": task_id}}  # fmt: skip


async def _answer(wire: Wire, request_id: int) -> dict[str, Any]:
    """The next answer to ``request_id`` (status notifications skipped)."""
    while True:
        message = await wire.receive()
        if message.get("id") == request_id:
            return message
        assert "id" not in message, message  # nothing else is answered meanwhile


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis", "postgres"])
async def test_a_tasks_result_waiting_for_a_running_task_takes_no_trio_task(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """In each store: with a shared one the wait ends once this process has stored the
    task's terminal status (its actor runs here), as ``tasks/get`` would show it."""
    app, gates = _app(store_url(kind, request, tmp_path))
    async with served(app) as wire:
        ids = [await _start(wire, i, f"t{i}") for i in range(20)]
        await trio.testing.wait_all_tasks_blocked()
        spawned = Spawned()
        trio.lowlevel.add_instrument(spawned)
        try:
            await wire.send(*(_result(100 + i, task_id) for i, task_id in enumerate(ids)))
            await trio.testing.wait_all_tasks_blocked()
            assert spawned.count == 0  # 20 waiting: neither a task each nor a new reader
            for i in reversed(range(20)):  # each answered as its task ends
                gates[f"t{i}"].set()
                answer = await _answer(wire, 100 + i)
                assert answer["result"]["content"] == [{"type": "text", "text": f"t{i} done"}]
                meta = answer["result"]["_meta"]["io.modelcontextprotocol/related-task"]
                assert meta == {"taskId": ids[i]}
        finally:
            trio.lowlevel.remove_instrument(spawned)
        assert spawned.count == 0
        await wire.send(_result(200, ids[0]))  # and again, now that it is terminal
        assert (await _answer(wire, 200))["result"]["content"][0]["text"] == "t0 done"


async def test_a_waiting_tasks_result_cancelled_stops_waiting_and_frees_its_id() -> None:
    """MCP 2025-11-25 (basic/utilities/cancellation): the receiver SHOULD stop processing
    a cancelled request and not respond to it; the task it waited for is unaffected."""
    app, gates = _app()
    async with served(app) as wire:
        task_id = await _start(wire, 1, "slow")
        await wire.send(_result(5, task_id))
        await trio.testing.wait_all_tasks_blocked()
        await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": 5, "reason": "test"}})  # fmt: skip
        await trio.testing.wait_all_tasks_blocked()
        # the id is free, though the task has not ended: a new request 5 is served,
        # not refused as in use
        await wire.send({"jsonrpc": "2.0", "id": 5, "method": "tasks/get",
                         "params": {"taskId": task_id}})  # fmt: skip
        got = await _answer(wire, 5)
        assert "result" in got, got
        assert got["result"]["status"] == "working", got
        gates["slow"].set()
        await wire.send(_result(6, task_id))
        answer = await _answer(wire, 6)  # no answer to the cancelled request 5 before it
        assert answer["result"]["content"][0]["text"] == "slow done"


async def test_a_tasks_result_parked_when_its_connection_closes_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The connection that waited closes: the waiting request is dropped with it, and the
    task goes on to its end, which answers nobody and fails nothing."""
    app, gates = _app()
    ended: list[str] = []
    app.registry.observers.append(lambda record: ended.append(record.status.value))
    async with served(app):  # another connection keeps the App's task runtime up
        async with served(app) as wire:
            task_id = await _start(wire, 1, "outlives")
            await wire.send(_result(2, task_id))
            await trio.testing.wait_all_tasks_blocked()
        await trio.testing.wait_all_tasks_blocked()
        gates["outlives"].set()  # its parked tasks/result belonged to the closed connection
        await trio.testing.wait_all_tasks_blocked()
        assert ended[-1:] == ["completed"]
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


async def test_a_result_parked_on_an_actor_stopped_without_a_status_reads_the_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A shared store: the task's actor here stops without a status change (handed to
    the other processes, as a drain or a lapsed lease does). The parked ``tasks/result``
    goes back to reading the store at once, not at the task's next hint, which a
    partition may lose; the task, run again here, is answered there."""
    app = trio_mcp.App("parked-rerun", store=store_url("redis", request, tmp_path))
    gate = trio.Event()

    @app.tool(task_support="optional", rerun=trio_mcp.Rerun(attempts=3))
    async def gated(ctx: trio_mcp.RequestContext) -> str:
        await gate.wait()
        return f"done on attempt {ctx.attempt}"

    async with served(app) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "gated", "arguments": {}, "task": {"ttl": 60_000}}})  # fmt: skip
        task_id = (await _answer(wire, 1))["result"]["task"]["taskId"]
        await wire.send(_result(2, task_id))
        await trio.testing.wait_all_tasks_blocked()
        cluster = app.registry.cluster
        assert cluster is not None
        cluster.draining = True  # nobody claims it meanwhile
        hint = cluster.on_hint
        lost: list[tuple[str, str]] = []  # (the requeue's hint among them)
        spawned = Spawned()
        trio.lowlevel.add_instrument(spawned)
        try:  # the store's hints lost meanwhile (the requeue's among them)
            cluster.on_hint = lambda kind, tid: lost.append((kind, tid))  # type: ignore[method-assign]
            await cluster.hand_off([task_id])
            await trio.testing.wait_all_tasks_blocked()
        finally:
            trio.lowlevel.remove_instrument(spawned)
            cluster.on_hint = hint  # type: ignore[method-assign]
        assert spawned.count >= 1  # the tasks/result left its parking for the store's loop
        assert app.registry.running_actor(task_id) is None
        gate.set()
        cluster.draining = False
        cluster.on_hint("queue", task_id)  # claimed again here: attempt 2
        with trio.fail_after(10):
            answer = await _answer(wire, 2)
        assert answer["result"]["content"][0]["text"] == "done on attempt 2", answer
