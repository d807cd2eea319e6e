"""``tasks/cancel`` of a task running in this process does not read a shared store.

MCP 2025-11-25 (basic/utilities/tasks, "Task Cancellation"): the receiver MUST move a
non-terminal task to ``cancelled`` and answer with the task as it now is. When the
task's actor runs in this process, its record is here, and the cancelled status goes to
the store as a conditional write: applied, that record is the answer, with no read of
the store before or after. Served over OS pipes by the real stdio transport and
session, on a private Redis and a private PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_mcp

from tests.peer.tasks.test_store_contract import store_url
from tests.transports.test_stdio_reader_task import Wire, served

pytestmark = pytest.mark.timeout(30)


def _app(url: str) -> tuple[trio_mcp.App, trio.Event]:
    """An App with one task tool that runs until cancelled; the event is set as it stops."""
    app = trio_mcp.App("cancel-reads", store=url)
    stopped = trio.Event()

    @app.tool(task_support="optional")
    async def forever() -> str:
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()
        return "unreachable"  # pragma: no cover

    return app, stopped


async def _start(wire: Wire) -> str:
    """Start ``forever`` as a task; its id, once its actor runs."""
    await wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "forever", "arguments": {}, "task": {"ttl": 60_000}}})  # fmt: skip
    task_id: str = (await wire.receive())["result"]["task"]["taskId"]
    await trio.testing.wait_all_tasks_blocked()
    return task_id


async def _cancel(wire: Wire, task_id: str) -> dict[str, Any]:
    """Send ``tasks/cancel``; its answer (status notifications skipped)."""
    await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel",
                     "params": {"taskId": task_id}})  # fmt: skip
    while True:
        answer = await wire.receive()
        if answer.get("id") == 2:
            return answer


@pytest.mark.parametrize("kind", ["redis", "postgres"])
async def test_cancel_of_a_task_running_here_does_not_read_the_store(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    app, stopped = _app(store_url(kind, request, tmp_path))
    async with served(app) as wire:
        task_id = await _start(wire)
        store: Any = app.registry.store
        reads: list[str] = []
        real_get = store.get

        async def counting_get(tid: str) -> Any:
            reads.append(tid)
            return await real_get(tid)

        store.get = counting_get
        answer = await _cancel(wire, task_id)
        assert answer["result"]["status"] == "cancelled", answer
        assert answer["result"]["taskId"] == task_id
        assert reads == []  # its record is here; the stored cancel is not read back
        with trio.fail_after(5):
            await stopped.wait()  # and the work stopped

        # What any process reads from the store afterwards is that same cancelled task.
        stored = await real_get(task_id)
        assert stored is not None and stored.status is trio_mcp.TaskStatus.CANCELLED


@pytest.mark.parametrize("kind", ["redis", "postgres"])
async def test_cancel_of_a_task_another_process_cancelled_first_is_refused(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """MUST: a cancel of a task already terminal is refused with -32602. Here another
    process cancelled it in the store (``store.cancel``, as its ``tasks/cancel`` does)
    while its actor still runs here: this process's conditional write does not apply,
    and the answer says the task was already terminal."""
    app, _ = _app(store_url(kind, request, tmp_path))
    async with served(app) as wire:
        task_id = await _start(wire)
        store: Any = app.registry.store
        assert (await store.cancel(task_id, "cancelled elsewhere", "2026-12-08T00:00:00Z")
                ).status is trio_mcp.TaskStatus.CANCELLED  # fmt: skip
        answer = await _cancel(wire, task_id)
        assert answer["error"]["code"] == -32602, answer
        stored = await store.get(task_id)
        assert stored.status_message == "cancelled elsewhere"  # the first cancel stands
