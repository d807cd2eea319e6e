"""A server on a durable store killed with SIGKILL and started again on the same store.

SQLite (the same file) and PostgreSQL (the same database; the PostgreSQL server is
stopped the hard way and started again too, between the two). Results of completed and
failed tasks are all there, to the same identity; tasks that were running are
``failed`` with a status message saying why: at once with SQLite (the restarted process
owns the file), once the dead process's lease lapses with PostgreSQL (a shared store:
the new process is another instance, and any process sweeps the dead one's tasks).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

import trio_mcp
from trio_mcp import TaskStatus
from trio_mcp.peer._tasks._shared import LEASE_LOST_MESSAGE
from trio_mcp.peer._tasks._sqlite import LOST_MESSAGE

from tests.helpers import serving

SERVER = Path(__file__).resolve().parents[2] / "store_server.py"


@asynccontextmanager
async def server(store_url: str) -> AsyncIterator[tuple[trio.Process, str]]:
    async with serving([sys.executable, str(SERVER), store_url]) as (proc, words):
        yield proc, words[0]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_store_restart_after_sigkill_keeps_results_and_fails_running_tasks(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path}/tasks.db"
    else:
        postgres = request.getfixturevalue("postgres_server")
        url = f"{postgres.url}&lease=1"
    async with server(url) as (proc, ws_url):
        async with trio_mcp.open_websocket_client(ws_url, token="secret") as client:
            done = await client.call_tool_task("quick", {"text": "kept"})
            err = await client.call_tool_task("broken")
            tool_err = await client.call_tool_task("reports_failure")
            running = await client.call_tool_task("forever")
            for handle in (done, err, tool_err):
                assert (await handle.wait()).status.is_terminal
            assert (await running.status()).status is TaskStatus.WORKING
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
    if kind == "postgres":  # PostgreSQL crashes as well (immediate shutdown) and restarts
        postgres.stop()
        postgres.start()
    async with server(url) as (_, ws_url):
        async with trio_mcp.open_websocket_client(ws_url, token="secret") as client:
            assert (await client.get_task(done.task_id)).status is TaskStatus.COMPLETED
            result = await client.task_handle(done.task_id, trio_mcp.CallToolResult).result()
            assert result.text == "done: kept"

            with pytest.raises(trio_mcp.TaskFailed) as failed:
                await client.task_handle(err.task_id, trio_mcp.CallToolResult).result()
            assert failed.value.message == "broken on purpose"

            reported = await client.task_handle(tool_err.task_id, trio_mcp.CallToolResult).result()
            assert reported.is_error and reported.text == "tool error"

            if kind == "sqlite":
                lost = await client.get_task(running.task_id)
                assert lost.status is TaskStatus.FAILED and lost.status_message == LOST_MESSAGE
            else:  # once the killed process's lease (1 s) lapsed
                with trio.fail_after(15):
                    while (lost := await client.get_task(running.task_id)).status is (  # noqa: ASYNC110
                        TaskStatus.WORKING
                    ):
                        await trio.sleep(0.1)
                assert lost.status is TaskStatus.FAILED
                assert lost.status_message == LEASE_LOST_MESSAGE
            with pytest.raises(trio_mcp.TaskFailed) as gone:
                await client.task_handle(running.task_id, trio_mcp.CallToolResult).result()
            assert ("restarted" if kind == "sqlite" else "lease lapsed") in gone.value.message

            listed = {t.task_id async for t in client.iter_tasks()}
            assert listed == {done.task_id, err.task_id, tool_err.task_id, running.task_id}

        # Another identity sees none of them.
        async with trio_mcp.open_websocket_client(ws_url, token="other") as stranger:
            with pytest.raises(trio_mcp.RemoteError):
                await stranger.get_task(done.task_id)
