"""The client half of the 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``).

The server decides whether a ``tools/call`` becomes a task; ``call_tool``
follows it to the result, ``call_tool_task`` returns the same
:class:`~trio_mcp.TaskHandle` as in 2025-11-25, ``peer.task(id)`` reattaches.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
import trio
import trio.testing

import trio_mcp
from trio_mcp import TaskStatus
from trio_mcp.peer._session import _outbound

from tests import modern_task_server
from tests.cli_support import run_cli_here
from tests.helpers import ROOT

MODERN = "2026-07-28"
EXTENSION = "io.modelcontextprotocol/tasks"
SERVER = f"{sys.executable} {ROOT / 'tests' / 'modern_task_server.py'}"


@contextmanager
def sent_requests() -> Iterator[list[dict[str, Any]]]:
    """Every request either side sends meanwhile (wire JSON)."""
    seen: list[dict[str, Any]] = []

    def observe(direction: str, wire: dict[str, Any], method: str | None) -> None:
        if direction == "sent" and "method" in wire and "id" in wire:
            seen.append(json.loads(json.dumps(wire)))

    _outbound.message_observers.append(observe)
    try:
        yield seen
    finally:
        _outbound.message_observers.remove(observe)


def _methods(seen: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [m for m in seen if m["method"] == method]


def server_app() -> trio_mcp.App:
    app = modern_task_server.build_app()

    @app.tool(task_support="optional")
    async def where(ctx: trio_mcp.RequestContext) -> str:
        return f"task {ctx.task_id}" if ctx.task_id else "no task"

    return app


def asking_client(answers: list[Any], delay: float = 0.0) -> trio_mcp.App:
    """A client App whose ``on_elicitation`` confirms (after ``delay`` s), noting each question."""
    app = trio_mcp.App("modern-client", "1.0")

    @app.on_elicitation
    async def elicit(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        answers.append(params.message)
        await trio.sleep(delay)
        return trio_mcp.ElicitResult(action="accept", content={"confirm": True})

    return app


@asynccontextmanager
async def modern_pair(
    app: trio_mcp.App | None = None,
    client: trio_mcp.App | None = None,
    context: str | None = None,
) -> AsyncIterator[trio_mcp.Peer]:
    async with trio_mcp.open_memory_pair(
        app or server_app(), client, era=MODERN, client_context=context
    ) as pair:
        assert pair.client.client_era.protocol_version == MODERN
        yield pair.client


@pytest.fixture(autouse=True)
def _reset_observed() -> None:
    modern_task_server.OBSERVED["cancelled"] = 0


async def test_call_tool_follows_the_task_the_server_made(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with sent_requests() as seen:
        async with modern_pair() as client:
            result = await client.call_tool("slow_compute", {"seconds": 3})
            where = await client.call_tool("where")
            plain = await client.call_tool("greet", {"name": "Ada"})
    assert result.text == "done after 3" and not result.is_error
    assert where.text.startswith("task ") and plain.text == "Hello, Ada!"
    call = _methods(seen, "tools/call")[0]
    caps = call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert caps["extensions"] == {EXTENSION: {}}
    assert "task" not in call["params"]  # the client does not choose
    gets = _methods(seen, "tasks/get")
    assert gets and all(set(g["params"]) == {"taskId", "_meta"} for g in gets)
    assert not _methods(seen, "tasks/result") and not _methods(seen, "tasks/list")


async def test_questions_answered_once_through_tasks_update(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The user takes 5 s: several polls show the key meanwhile; it is asked and sent once."""
    answers: list[Any] = []
    with sent_requests() as seen:
        async with modern_pair(client=asking_client(answers, delay=5)) as client:
            result = await client.call_tool("confirm_delete", {"filename": "a.txt"})
    assert result.text == "deleted a.txt"
    assert answers == ["Delete a.txt?"]
    updates = _methods(seen, "tasks/update")
    assert len(updates) == 1
    assert updates[0]["params"]["inputResponses"] == {
        "confirm": {"action": "accept", "content": {"confirm": True}}
    }
    task_id = updates[0]["params"]["taskId"]
    assert len([g for g in _methods(seen, "tasks/get") if g["params"]["taskId"] == task_id]) >= 3


async def test_tool_error_is_a_result_and_protocol_error_raises(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with modern_pair() as client:
        failed = await client.call_tool("failing_job")
        assert failed.is_error and "RuntimeError: boom" in failed.text
        with pytest.raises(trio_mcp.RemoteError) as caught:
            await client.call_tool("broken_job")
        assert isinstance(caught.value, trio_mcp.TaskFailed)
        assert caught.value.code == -32603 and caught.value.message == "the backend is gone"
        handle = await client.call_tool_task("failing_job")
        assert (await handle.result()).is_error
        assert handle.task.status is TaskStatus.COMPLETED


async def test_cancelling_call_tool_cancels_the_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with sent_requests() as seen:
        async with modern_pair() as client:
            with trio.move_on_after(2):
                await client.call_tool("slow_compute", {"seconds": 60})
            await trio.sleep(1)
            cancels = _methods(seen, "tasks/cancel")
            assert len(cancels) == 1
            task = await client.get_task(cancels[0]["params"]["taskId"])
    assert task.status is TaskStatus.CANCELLED
    assert modern_task_server.OBSERVED["cancelled"] == 1


async def test_call_tool_task_handle(autojump_clock: trio.testing.MockClock) -> None:
    async with modern_pair() as client:
        handle = await client.call_tool_task("slow_compute", {"seconds": 3}, ttl=1)
        assert handle.task.status is TaskStatus.WORKING and handle.task_id
        assert handle.task.ttl is not None and handle.task.ttl != 1  # ttl is not sent
        statuses = [snapshot.status async for snapshot in handle]
        assert statuses == [TaskStatus.WORKING, TaskStatus.COMPLETED]
        assert (await handle.result()).text == "done after 3"
        assert (await handle.wait()).status is TaskStatus.COMPLETED
        assert (await handle.status()).status is TaskStatus.COMPLETED

        # The server answered at once: a handle already completed.
        plain = await client.call_tool_task("greet", {"name": "Ada"})
        assert plain.task_id == "" and plain.task.status is TaskStatus.COMPLETED
        assert [s.status async for s in plain] == [TaskStatus.COMPLETED]
        assert (await plain.result()).text == "Hello, Ada!"


async def test_call_tool_task_handle_answers_questions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    answers: list[Any] = []
    async with modern_pair(client=asking_client(answers, delay=3)) as client:
        handle = await client.call_tool_task("confirm_delete", {"filename": "b"})
        statuses = [s.status async for s in handle]
        assert TaskStatus.INPUT_REQUIRED in statuses and statuses[-1] is TaskStatus.COMPLETED
        assert (await handle.result()).text == "deleted b"
    assert answers == ["Delete b?"]


async def test_handle_cancel(autojump_clock: trio.testing.MockClock) -> None:
    async with modern_pair() as client:
        handle = await client.call_tool_task("slow_compute", {"seconds": 60})
        await trio.sleep(1)
        task = await handle.cancel()
        assert (await handle.wait()).status is TaskStatus.CANCELLED
        assert task.task_id == handle.task_id
        with pytest.raises(trio_mcp.TaskCancelled):
            await handle.result()
        # tasks/cancel acknowledges a terminal task too.
        assert (await client.cancel_task(handle.task_id)).status is TaskStatus.CANCELLED
    assert modern_task_server.OBSERVED["cancelled"] == 1


async def test_reattach_from_another_connection(autojump_clock: trio.testing.MockClock) -> None:
    app = server_app()
    async with app.registry.running():  # the tasks outlive the first connection
        async with modern_pair(app, context="alice") as first:
            handle = await first.call_tool_task("slow_compute", {"seconds": 5})
            task_id = handle.task_id
        async with modern_pair(app, context="alice") as second:
            again = second.task(task_id, trio_mcp.CallToolResult)
            assert (await again.result()).text == "done after 5"
            assert (await second.get_task(task_id)).status is TaskStatus.COMPLETED
        async with modern_pair(app, context="mallory") as other:
            with pytest.raises(trio_mcp.RemoteError) as caught:
                await other.task(task_id).status()
            assert caught.value.code == -32602


async def test_removed_methods_fail_locally() -> None:
    async with modern_pair() as client:
        with pytest.raises(trio_mcp.LocalUsageError, match="not in 2026-07-28"):
            await client.task_result("x")
        with pytest.raises(trio_mcp.LocalUsageError, match="not in 2026-07-28"):
            await client.list_tasks()
        with pytest.raises(trio_mcp.RemoteError) as caught:
            await client.get_task("nope")
        assert caught.value.code == -32602


async def test_task_reattaches_in_2025_too() -> None:
    app = server_app()
    async with trio_mcp.open_memory_pair(app, client_context="bob") as pair:
        handle = await pair.client.call_tool_task("slow_compute", {"seconds": 0.05})
        again = pair.client.task(handle.task_id, trio_mcp.CallToolResult)
        assert again.wire is None
        assert (await again.result()).text == "done after 0.05"


def test_cli_call_task_over_stdio() -> None:
    # main() in this process (the servers are real processes): what is tested is what
    # the CLI does in 2026-07-28, not the interpreter around it (test_cli runs that).
    proc = run_cli_here("call", "--stdio", SERVER, "--era", MODERN, "slow_compute",
                        "--args", '{"seconds": 0.2}', "--task")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done after 0.2"
    assert "created" in proc.stderr and "completed" in proc.stderr

    proc = run_cli_here("call", "--stdio", SERVER, "--era", "auto", "confirm_delete", "--args",
                        '{"filename": "c"}', "--task", "--elicit-reply", '{"confirm": true}')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "deleted c" and "input_required" in proc.stderr

    proc = run_cli_here("call", "--stdio", SERVER, "--era", MODERN, "broken_job", "--task")
    assert proc.returncode == 1 and "task failed: the backend is gone" in proc.stderr

    proc = run_cli_here("call", "--stdio", SERVER, "--era", MODERN, "greet",
                        "--args", '{"name": "D"}', "--task")
    assert proc.returncode == 0 and proc.stdout.strip() == "Hello, D!"
    assert "made no task" in proc.stderr

    proc = run_cli_here("tasks", "--stdio", SERVER, "--era", MODERN, "list")
    assert proc.returncode == 2 and "trio-mcp: not in 2026-07-28: " in proc.stderr
    proc = run_cli_here("tasks", "--stdio", SERVER, "--era", MODERN, "result", "abc")  # followed
    assert proc.returncode == 2 and "Task not found" in proc.stderr

    proc = run_cli_here("tasks", "--stdio", SERVER, "--era", MODERN, "get", "abc")
    assert proc.returncode == 2 and "Task not found" in proc.stderr


# --- progress (issue 35, finding 6) --------------------------------------------------------------


def _stepping_app(step: list[trio.Event]) -> trio_mcp.App:
    app = trio_mcp.App("stepping", limits=trio_mcp.TaskLimits(poll_interval=50))

    @app.tool(task_support="required")
    async def steps(ctx: trio_mcp.RequestContext) -> str:
        """Report progress twice, each time waiting for the test to have seen it."""
        await ctx.report_progress(1, 3, "step 1 of 3")
        await step[0].wait()
        await ctx.report_progress(2, 3)  # no message: "2/3"
        await step[1].wait()
        return "done"

    return app


@pytest.mark.timeout(30)  # without the progress, the tool waits for ever
async def test_progress_of_a_2026_task_reaches_the_client_over_http() -> None:
    """The extension has no progress notifications on tasks: ``ctx.report_progress`` becomes
    the task's ``statusMessage`` on ``tasks/get`` (read raw here, as any client reads it) and
    the ``progress=`` callback of a trio-mcp client is called with each new one."""
    from tests.http_support import serving

    step = [trio.Event(), trio.Event()]
    reports: list[trio_mcp.ProgressParams] = []
    async with serving(_stepping_app(step)) as (url, _):
        async with trio_mcp.open_http_client(url, era=MODERN) as client:
            handle = await client.call_tool_task("steps", progress=reports.append)
            assert handle.task_id
            messages = []
            async for task in handle:
                if task.status_message and task.status_message not in messages:
                    messages.append(task.status_message)
                    raw = await client.request_raw("tasks/get", {"taskId": handle.task_id})
                    assert raw["statusMessage"] == task.status_message
                    step[len(messages) - 1].set()
            assert (await handle.result()).text == "done"
    assert messages == ["step 1 of 3", "2/3"]
    assert handle.task.status is TaskStatus.COMPLETED
    assert [(r.progress_token, r.progress, r.total, r.message) for r in reports] == [
        (handle.task_id, 1, None, "step 1 of 3"), (handle.task_id, 2, None, "2/3")]
