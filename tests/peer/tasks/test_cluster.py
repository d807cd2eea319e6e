"""Three server processes sharing one real store: tasks live in the store, not in a process.

Each test runs on a private Redis, a private three-master Redis Cluster and a private
PostgreSQL (``shared_store``).

The issue's cluster test: one identity, clients connected to different processes;
create on A, get/result on B, cancel from C stops the work on A (the tool observes
its cancellation), ``input_required`` answered through B, SIGKILL of A fails its
running tasks once its lease lapses, and 20 clients x 100 tasks spread over the
three lose, duplicate and leak nothing.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp import TaskStatus
from trio_mcp.peer._tasks._shared import LEASE_LOST_MESSAGE

from tests.helpers import serving
from tests.redis_cluster import cluster_store_url

SERVER = Path(__file__).resolve().parents[2] / "cluster_server.py"
LEASE = 2  # seconds: short, so the SIGKILL test is quick


@asynccontextmanager
async def server(store_url: str) -> AsyncIterator[tuple[trio.Process, str, int]]:
    """A cluster server process; yields (process, its WebSocket URL, its pid)."""
    env = {**os.environ, "PYTHONPATH": str(SERVER.parent.parent)}
    async with serving([sys.executable, str(SERVER), store_url], env) as (proc, words):
        yield proc, words[0], int(words[2])


@asynccontextmanager
async def cluster(url: str, n: int = 3) -> AsyncIterator[list[tuple[trio.Process, str, int]]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(server(url)) for _ in range(n)]


def _store(redis: str, tmp_path: Path) -> str:
    sep = "&" if "?" in redis else "?"
    return f"{redis}{sep}lease={LEASE}&prefix=t{tmp_path.name[-12:]}"


@pytest.fixture(params=["redis", "redis-cluster", "postgres"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a store of this test's own: a Redis prefix (on a private Redis or a
    private three-master Redis Cluster) or a fresh PostgreSQL database."""
    if request.param == "redis":
        return _store(request.getfixturevalue("redis_url"), tmp_path)
    if request.param == "redis-cluster":
        return cluster_store_url(request.getfixturevalue("redis_cluster"), lease=LEASE)
    return f"{request.getfixturevalue('postgres_url')}&lease={LEASE}"


def answering_client(ok: bool) -> trio_mcp.App:
    app = trio_mcp.App("answering-client")

    @app.on_elicitation
    async def answer(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        return trio_mcp.ElicitResult(action="accept", content={"ok": ok})

    return app


async def test_cluster_create_on_a_result_on_b_cancel_from_c_reaches_the_work_on_a(
    shared_store: str, tmp_path: Path
) -> None:
    async with cluster(shared_store) as [(_, a, pid_a), (_, b, pid_b), (_, c, _)]:
        async with (
            trio_mcp.open_websocket_client(a, token="alice") as on_a,
            trio_mcp.open_websocket_client(b, token="alice") as on_b,
            trio_mcp.open_websocket_client(c, token="alice") as on_c,
        ):
            # Created on A, read and collected on B: the result says A ran it.
            done = await on_a.call_tool_task("quick", {"text": "hello"})
            got = await on_b.task_handle(done.task_id, trio_mcp.CallToolResult).result()
            assert got.text == f"hello by {pid_a}"
            assert (await on_b.get_task(done.task_id)).status is TaskStatus.COMPLETED
            assert (await on_c.get_task(done.task_id)).status is TaskStatus.COMPLETED

            # A running task on A, cancelled from C: the tool on A sees its cancellation.
            marker = tmp_path / "cancelled"
            running = await on_a.call_tool_task("forever", {"marker": str(marker)})
            assert (await on_b.get_task(running.task_id)).status is TaskStatus.WORKING
            waiting_on_b = on_b.task_handle(running.task_id, trio_mcp.CallToolResult)
            async with trio.open_nursery() as nursery:
                outcome: list[BaseException] = []

                async def collect() -> None:
                    try:
                        await waiting_on_b.result()
                    except trio_mcp.TaskCancelled as exc:
                        outcome.append(exc)

                nursery.start_soon(collect)
                cancelled = await on_c.cancel_task(running.task_id)
                assert cancelled.status is TaskStatus.CANCELLED
            assert outcome, "tasks/result on B did not end with the cancel from C"
            with trio.fail_after(10):
                while not (marker.exists() and marker.read_text()):  # noqa: ASYNC110 (written elsewhere)
                    await trio.sleep(0.05)
            assert marker.read_text() == str(pid_a)
            for peer in (on_a, on_b, on_c):
                assert (await peer.get_task(running.task_id)).status is TaskStatus.CANCELLED
            with pytest.raises(trio_mcp.RemoteError, match="already in terminal status"):
                await on_b.cancel_task(running.task_id)

            # tasks/list on any process shows the identity's tasks, in creation order.
            for peer in (on_a, on_b, on_c):
                listed = [t.task_id async for t in peer.iter_tasks()]
                assert listed == [done.task_id, running.task_id]
            assert pid_b != pid_a

        # Another identity sees none of them, on any process.
        for url in (a, b, c):
            async with trio_mcp.open_websocket_client(url, token="bob") as bob:
                with pytest.raises(trio_mcp.RemoteError):
                    await bob.get_task(done.task_id)
                assert [t async for t in bob.iter_tasks()] == []


async def test_cluster_input_required_is_answered_through_another_process(
    shared_store: str, tmp_path: Path
) -> None:
    async with cluster(shared_store, 2) as [(_, a, pid_a), (_, b, _)]:
        async with trio_mcp.open_websocket_client(a, answering_client(False), token="alice") as on_a:
            handle = await on_a.call_tool_task("approve", {"question": "ship it?"})
        # A's connection is gone; the requestor comes back on B and collects the result.
        async with trio_mcp.open_websocket_client(b, answering_client(True), token="alice") as on_b:
            with trio.fail_after(30):
                result = await on_b.task_handle(handle.task_id, trio_mcp.CallToolResult).result()
            assert result.text == f"approved by {pid_a}"  # B's answer reached the actor on A
            assert (await on_b.get_task(handle.task_id)).status is TaskStatus.COMPLETED


async def test_cluster_sigkill_fails_the_dead_process_tasks_once_its_lease_lapses(
    shared_store: str, tmp_path: Path
) -> None:
    store = shared_store
    async with server(store) as (proc_a, a, _), server(store) as (_, b, _):
        async with trio_mcp.open_websocket_client(a, token="alice") as on_a:
            running = await on_a.call_tool_task("forever", {"marker": str(tmp_path / "m")})
            finished = await on_a.call_tool_task("quick", {"text": "kept"})
            await on_a.task_handle(finished.task_id, trio_mcp.CallToolResult).result()
        proc_a.send_signal(signal.SIGKILL)
        await proc_a.wait()
        async with trio_mcp.open_websocket_client(b, token="alice") as on_b:
            start = trio.current_time()
            with trio.fail_after(LEASE * 5 + 10):  # lease + the sweep's period, with room
                while (task := await on_b.get_task(running.task_id)).status is TaskStatus.WORKING:  # noqa: ASYNC110
                    await trio.sleep(0.1)
            lapsed = trio.current_time() - start
            assert task.status is TaskStatus.FAILED
            assert task.status_message == LEASE_LOST_MESSAGE
            with pytest.raises(trio_mcp.TaskFailed, match="lease"):
                await on_b.task_handle(running.task_id, trio_mcp.CallToolResult).result()
            kept = await on_b.task_handle(finished.task_id, trio_mcp.CallToolResult).result()
            assert kept.text.startswith("kept by ")
            print(f"running task failed {lapsed:.1f} s after SIGKILL (lease {LEASE} s)")


async def test_cluster_20_clients_x_100_tasks_none_lost_duplicated_or_foreign(
    shared_store: str, tmp_path: Path
) -> None:
    clients, per_client, identities = 20, 100, 4
    async with cluster(shared_store) as servers:
        urls = [url for _, url, _ in servers]
        created: dict[int, list[tuple[str, str]]] = {n: [] for n in range(identities)}
        results: dict[str, str] = {}

        async def one_client(n: int) -> None:
            token = f"t{n % identities}"
            create_on, collect_on = urls[n % 3], urls[(n + 1) % 3]
            async with (
                trio_mcp.open_websocket_client(create_on, token=token) as creator,
                trio_mcp.open_websocket_client(collect_on, token=token) as collector,
            ):
                for i in range(per_client):
                    text = f"c{n}-{i}"
                    handle = await creator.call_tool_task("quick", {"text": text})
                    created[n % identities].append((handle.task_id, text))
                    got = await collector.task_handle(
                        handle.task_id, trio_mcp.CallToolResult
                    ).result()
                    results[handle.task_id] = got.text

        with trio.fail_after(240):
            async with trio.open_nursery() as nursery:
                for n in range(clients):
                    nursery.start_soon(one_client, n)

        all_ids = [task_id for tasks in created.values() for task_id, _ in tasks]
        assert len(all_ids) == clients * per_client
        assert len(set(all_ids)) == len(all_ids), "a task id was handed out twice"
        for tasks in created.values():
            for task_id, text in tasks:
                assert results[task_id].split(" by ")[0] == text, "a result was lost or mixed up"
        # Each identity lists exactly its own tasks, on every process.
        for ident in range(identities):
            own = {task_id for task_id, _ in created[ident]}
            for url in urls:
                async with trio_mcp.open_websocket_client(url, token=f"t{ident}") as peer:
                    listed: list[Any] = [t.task_id async for t in peer.iter_tasks()]
                    assert len(listed) == len(set(listed))
                    assert set(listed) == own
