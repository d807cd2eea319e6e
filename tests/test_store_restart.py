"""A SQLite-backed server killed with SIGKILL and started again on the same file.

Results of completed and failed tasks are all there, to the same identity;
tasks that were running are ``failed`` with a status message saying why.
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
from trio_mcp.peer._tasks._sqlite import LOST_MESSAGE

from .helpers import serving

SERVER = Path(__file__).resolve().parent / "store_server.py"


@asynccontextmanager
async def server(store_url: str) -> AsyncIterator[tuple[trio.Process, str]]:
    async with serving([sys.executable, str(SERVER), store_url]) as (proc, words):
        yield proc, words[0]


async def test_store_restart_after_sigkill_keeps_results_and_fails_running_tasks(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/tasks.db"
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

            lost = await client.get_task(running.task_id)
            assert lost.status is TaskStatus.FAILED and lost.status_message == LOST_MESSAGE
            with pytest.raises(trio_mcp.TaskFailed) as gone:
                await client.task_handle(running.task_id, trio_mcp.CallToolResult).result()
            assert "restarted" in gone.value.message

            listed = {t.task_id async for t in client.iter_tasks()}
            assert listed == {done.task_id, err.task_id, tool_err.task_id, running.task_id}

        # Another identity sees none of them.
        async with trio_mcp.open_websocket_client(ws_url, token="other") as stranger:
            with pytest.raises(trio_mcp.RemoteError):
                await stranger.get_task(done.task_id)
