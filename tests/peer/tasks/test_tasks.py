"""Tasks in both directions, over every transport (and memory-only for clock tests)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp import TaskStatus
from trio_mcp.peer._session import open_bus

from tests.helpers import client_app, connect, example_app, load_example, seen_by
from tests.raw import _MemoryRaw, open_raw


async def test_tasks_create_get_result(transport: str) -> None:
    async with connect(transport) as client:
        handle = await client.call_tool_task("sleep", {"seconds": 0.2}, ttl=60_000)
        task = handle.task
        assert task.status is TaskStatus.WORKING
        assert len(task.task_id) >= 32 and task.ttl == 60_000
        assert task.poll_interval is not None and task.created_at.endswith("Z")
        got = await client.get_task(task.task_id)
        assert got.task_id == task.task_id and got.status in (TaskStatus.WORKING,
                                                              TaskStatus.COMPLETED)
        result = await handle.result()  # blocks until terminal
        assert result.text == "slept 0.2 seconds"
        assert result.meta == {trio_mcp.RELATED_TASK_META: {"taskId": task.task_id}}
        final = await handle.status()
        assert final.status is TaskStatus.COMPLETED


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_tasks_work_runs_outside_the_request_that_created_it(
    store: str, tmp_path: Any
) -> None:
    """A task's work is no part of its creating request (answered with the CreateTaskResult):
    no current request id, so its messages are never routed to that request's ended
    stream, nor to a later request that reuses the id. A plain call's tool has its own."""
    from trio_mcp.peer._session import current_request_id

    seen: list[Any] = []
    uri = "memory" if store == "memory" else f"sqlite:///{tmp_path}/tasks.db"
    app = load_example("task_server").build_app(store=uri)

    @app.tool(task_support="optional")
    async def where() -> str:
        seen.append(current_request_id.get())
        return "ok"

    async with connect("memory", server=app) as client:
        await (await client.call_tool_task("where", {})).result()
        await client.call_tool("where", {})
    assert seen[0] is None and seen[1] is not None, seen


async def test_tasks_list_1000_across_pages(transport: str) -> None:
    async with connect(transport) as client:
        ids = set()
        for _ in range(1000):
            handle = await client.call_tool_task("sleep", {"seconds": 0})
            ids.add(handle.task_id)
        first = await client.list_tasks()
        assert len(first.tasks) == 100 and first.next_cursor is not None
        listed = [t.task_id async for t in client.iter_tasks()]
        assert len(listed) == 1000 and set(listed) == ids


async def test_tasks_cancel_stops_the_work_and_stays_cancelled(transport: str) -> None:
    async with connect(transport) as client:
        handle = await client.call_tool_task("sleep", {"seconds": 30})
        cancelled = await handle.cancel()
        assert cancelled.status is TaskStatus.CANCELLED
        assert (await handle.status()).status is TaskStatus.CANCELLED
        with pytest.raises(trio_mcp.RemoteError) as info:
            await handle.cancel()
        assert info.value.code == trio_mcp.INVALID_PARAMS
        with pytest.raises(trio_mcp.RemoteError):
            await handle.result()


async def test_tasks_cancel_racing_completion_ends_in_one_terminal_state(transport: str) -> None:
    async with connect(transport) as client:
        outcomes = []
        for _ in range(30):
            handle = await client.call_tool_task("sleep", {"seconds": 0})
            try:
                await handle.cancel()
                won = "cancel"
            except trio_mcp.RemoteError as exc:
                assert exc.code == trio_mcp.INVALID_PARAMS  # already completed
                won = "complete"
            final = await handle.wait()
            expected = TaskStatus.CANCELLED if won == "cancel" else TaskStatus.COMPLETED
            assert final.status is expected
            outcomes.append(won)
        assert outcomes  # both outcomes are legal; each ended in exactly one state


async def test_tasks_failed_tool_result(transport: str) -> None:
    async with connect(transport) as client:
        handle = await client.call_tool_task("fail", {"message": "rate limit exceeded"})
        final = await handle.wait()
        assert final.status is TaskStatus.FAILED
        assert final.status_message and "rate limit exceeded" in final.status_message
        result = await handle.result()
        assert result.is_error and result.text == "rate limit exceeded"


async def test_tasks_input_required_with_elicitation(transport: str) -> None:
    app = client_app(elicit_content={"approve": True})
    async with connect(transport, app) as client:
        statuses = []
        handle = await client.call_tool_task("approve", {"question": "ship it?"})
        async for snapshot in handle:
            statuses.append(snapshot.status)
        assert statuses[-1] is TaskStatus.COMPLETED
        result = await handle.result()
        assert result.text == "approved: ship it?"
        kind, _, params = seen_by(app)[0]
        assert kind == "elicitation" and params.message == "ship it?"
        assert params.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}


async def test_tasks_input_required_with_sampling_plain(transport: str) -> None:
    """The client hosts no tasks: the sampling request rides the side channel."""
    app = client_app(sampling_text="short", host_tasks=False)
    async with connect(transport, app) as client:
        handle = await client.call_tool_task("summarize", {"text": "a b c"})
        await handle.wait()
        assert (await handle.result()).text == "short"
        kind, task_id, params = seen_by(app)[0]
        assert kind == "sampling" and task_id is None
        assert params.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}


async def test_tasks_client_hosted_sampling_polled_by_server(transport: str) -> None:
    """The server asks for sampling as a task hosted by the client, and polls it."""
    app = client_app(sampling_text="from a client task")
    async with connect(transport, app) as client:
        handle = await client.call_tool_task("summarize", {"text": "x"})
        await handle.wait()
        assert (await handle.result()).text == "from a client task"
        kind, client_task_id, _ = seen_by(app)[0]
        assert kind == "sampling" and client_task_id is not None
        # The client's registry hosted it and it completed.
        record = app.registry.records.get(client_task_id)
        assert record is not None and record.status is TaskStatus.COMPLETED


@pytest.mark.parametrize("kind", ["memory", "stdio"])
async def test_tasks_client_hosted_elicitation_polled_by_server(kind: str) -> None:
    """The server elicits as a task hosted by the client, and polls it."""
    import sys

    from tests import ask_server

    app = client_app(elicit_content={"name": "Ada"})
    async with AsyncExitStack() as stack:
        if kind == "memory":
            client, _ = await stack.enter_async_context(
                trio_mcp.open_memory_pair(ask_server.build_app(), app))
        else:
            client = await stack.enter_async_context(
                trio_mcp.open_stdio_client([sys.executable, ask_server.__file__], app))
        assert (await client.call_tool("ask_name")).text == "hello Ada"
        handle = await client.call_tool_task("ask_name")
        await handle.wait()
        assert (await handle.result()).text == "hello Ada"
    tasks = [t for kind_, t, _ in seen_by(app) if kind_ == "elicitation"]
    assert len(tasks) == 2 and all(t is not None for t in tasks)
    # The client's registry hosted both, with the TTL the server asked for.
    assert all(app.registry.records.get(t).ttl == 10_000 for t in tasks)  # type: ignore[union-attr]


async def test_tasks_progress_token_valid_for_task_lifetime(transport: str) -> None:
    updates: list[trio_mcp.ProgressParams] = []
    async with connect(transport) as client:
        handle = await client.call_tool_task("sleep", {"seconds": 0.3, "steps": 3},
                                             progress=updates.append)
        await handle.wait()
        await handle.result()
    assert [u.progress for u in updates] == [1, 2, 3]
    assert all(u.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}
               for u in updates)


async def test_tasks_concurrent_result_callers_all_get_the_answer(transport: str) -> None:
    async with connect(transport) as client:
        handle = await client.call_tool_task("sleep", {"seconds": 0.2})
        results: list[dict[str, Any]] = []

        async def collect() -> None:
            results.append(await client.task_result(handle.task_id))

        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(collect)
        assert len(results) == 10
        assert all(r["content"][0]["text"] == "slept 0.2 seconds" for r in results)


async def test_tasks_tool_level_negotiation_errors(transport: str) -> None:
    async with open_raw(transport) as raw:
        await raw.initialize()
        msg = await raw.request(1, "tools/call", {"name": "echo", "arguments": {"text": "x"},
                                                  "task": {"ttl": 1000}})
        assert msg["error"]["code"] == trio_mcp.METHOD_NOT_FOUND
        msg = await raw.request(2, "tools/call", {"name": "approve",
                                                  "arguments": {"question": "q"}})
        assert msg["error"]["code"] == trio_mcp.METHOD_NOT_FOUND
        assert await raw.ping_ok()


async def test_tasks_requestor_checks_locally_before_sending() -> None:
    async with trio_mcp.open_memory_pair(example_app(), client_app()) as (client, _):
        await client.list_all_tools()
        with pytest.raises(trio_mcp.LocalUsageError):
            await client.call_tool("approve", {"question": "q"})
        with pytest.raises(trio_mcp.LocalUsageError):
            await client.call_tool_task("echo", {"text": "x"})
    no_tasks = example_app()
    no_tasks.host_tasks = False
    async with trio_mcp.open_memory_pair(no_tasks) as (client, _):
        with pytest.raises(trio_mcp.LocalUsageError):
            await client.call_tool_task("sleep", {"seconds": 0})


async def test_tasks_undeclared_receiver_ignores_the_task_field() -> None:
    app = example_app()
    app.host_tasks = False
    async with open_raw("memory", app) as raw:
        init = await raw.initialize()
        assert "tasks" not in init["capabilities"]
        msg = await raw.request(1, "tools/call", {"name": "sleep", "arguments": {"seconds": 0},
                                                  "task": {"ttl": 1000}})
        assert msg["result"]["content"][0]["text"] == "slept 0 seconds"
        assert "task" not in msg["result"]
        msg = await raw.request(2, "tasks/list")
        assert msg["error"]["code"] == trio_mcp.METHOD_NOT_FOUND


async def test_tasks_unknown_ids_and_bad_cursor_are_invalid_params(transport: str) -> None:
    async with connect(transport) as client:
        for call in (client.get_task, client.task_result, client.cancel_task):
            with pytest.raises(trio_mcp.RemoteError) as info:
                await call("no-such-task")
            assert info.value.code == trio_mcp.INVALID_PARAMS
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.list_tasks("not-a-cursor")
        assert info.value.code == trio_mcp.INVALID_PARAMS


async def test_tasks_status_notifications_on_every_change() -> None:
    from trio_mcp.peer._session import _outbound

    seen: list[dict[str, Any]] = []

    def observe(direction: str, wire: dict[str, Any], method: str | None) -> None:
        if direction == "sent" and wire.get("method") == "notifications/tasks/status":
            seen.append(wire["params"])

    _outbound.message_observers.append(observe)
    try:
        async with trio_mcp.open_memory_pair(example_app(), client_app()) as (client, _):
            handle = await client.call_tool_task("approve", {"question": "q"})
            await handle.wait()
    finally:
        _outbound.message_observers.remove(observe)
    mine = [p["status"] for p in seen if p["taskId"] == handle.task_id]
    assert mine == ["input_required", "working", "completed"]
    assert all("_meta" not in p for p in seen)


async def test_tasks_model_immediate_response_meta() -> None:
    app = example_app()

    @app.tool(task_support="optional", immediate_response="Working on it.")
    async def slow() -> str:
        return "done"

    async with trio_mcp.open_memory_pair(app) as (client, _):
        handle = await client.call_tool_task("slow")
        assert handle.meta == {trio_mcp.MODEL_IMMEDIATE_RESPONSE_META: "Working on it."}
        await handle.wait()


async def test_tasks_ttl_expiry_deletes_the_task(autojump_clock: trio.abc.Clock) -> None:
    app = example_app(trio_mcp.TaskLimits(default_ttl=5_000, max_ttl=60_000))
    async with trio_mcp.open_memory_pair(app) as (client, _):
        short = await client.call_tool_task("sleep", {"seconds": 0})
        default = await client.call_tool_task("sleep", {"seconds": 0}, ttl=None)
        capped = await client.call_tool_task("sleep", {"seconds": 0}, ttl=10**9)
        assert short.task.ttl == 5_000 and default.task.ttl == 5_000
        assert capped.task.ttl == 60_000  # a requested ttl is honoured up to the maximum
        await short.wait()
        await trio.sleep(4)
        assert (await short.status()).status is TaskStatus.COMPLETED
        await trio.sleep(2)
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.get_task(short.task_id)
        assert info.value.code == trio_mcp.INVALID_PARAMS
        assert app.registry.records.get(short.task_id) is None  # the reaper deleted it
        assert app.registry.records.get(capped.task_id) is not None
        await trio.sleep(60)
        assert len(app.registry) == 0


async def test_tasks_expiry_stops_unfinished_work(autojump_clock: trio.abc.Clock) -> None:
    app = example_app(trio_mcp.TaskLimits(default_ttl=1_000))
    async with trio_mcp.open_memory_pair(app) as (client, _):
        handle = await client.call_tool_task("sleep", {"seconds": 3600})
        await trio.sleep(2)
        with pytest.raises(trio_mcp.RemoteError):
            await handle.status()
        assert app.registry.live_count() == 0


async def test_tasks_per_requestor_cap() -> None:
    app = example_app(trio_mcp.TaskLimits(max_live_per_requestor=3))
    async with trio_mcp.open_memory_pair(app) as (client, _):
        handles = [await client.call_tool_task("sleep", {"seconds": 60}) for _ in range(3)]
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.call_tool_task("sleep", {"seconds": 60})
        assert info.value.code == trio_mcp.RESOURCE_LIMIT
        assert "at most 3" in info.value.message
        await handles[0].cancel()  # a finished task frees a slot
        await client.call_tool_task("sleep", {"seconds": 0})


async def test_tasks_registry_size_bound() -> None:
    app = example_app(trio_mcp.TaskLimits(max_tasks=5))
    async with trio_mcp.open_memory_pair(app) as (client, _):
        for _ in range(5):
            await client.call_tool_task("sleep", {"seconds": 0})
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.call_tool_task("sleep", {"seconds": 0})
        assert info.value.code == trio_mcp.RESOURCE_LIMIT


async def test_tasks_rate_limit(autojump_clock: trio.abc.Clock) -> None:
    app = example_app(trio_mcp.TaskLimits(rate_per_second=10, rate_burst=5))
    async with trio_mcp.open_memory_pair(app) as (client, _):
        handle = await client.call_tool_task("sleep", {"seconds": 0})
        for _ in range(4):
            await client.get_task(handle.task_id)
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.get_task(handle.task_id)
        assert info.value.code == trio_mcp.RESOURCE_LIMIT
        await trio.sleep(1)
        await client.get_task(handle.task_id)


async def test_tasks_isolation_between_two_connections() -> None:
    app = example_app()
    async with app.registry.running():
        async with trio_mcp.open_memory_pair(app) as (alice, _), \
                trio_mcp.open_memory_pair(app) as (bob, _):
            handle = await alice.call_tool_task("sleep", {"seconds": 0})
            await handle.wait()
            for call in (bob.get_task, bob.task_result, bob.cancel_task):
                with pytest.raises(trio_mcp.RemoteError) as info:
                    await call(handle.task_id)
                assert info.value.code == trio_mcp.INVALID_PARAMS
                assert info.value.message == "Failed to retrieve task: Task not found"
            assert (await bob.list_tasks()).tasks == []
            assert [t.task_id for t in (await alice.list_tasks()).tasks] == [handle.task_id]


async def test_tasks_outlive_the_request_and_audit_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="trio_mcp.audit")
    async with trio_mcp.open_memory_pair(example_app()) as (client, _):
        with trio.move_on_after(0.05):
            handle = await client.call_tool_task("sleep", {"seconds": 0.2})
            await handle.wait()
        # the waiting was cancelled, not the task
        assert (await handle.wait()).status is TaskStatus.COMPLETED
        await handle.result()
        await client.call_tool_task("sleep", {"seconds": 0})
        await client.cancel_task((await client.call_tool_task("sleep", {"seconds": 9})).task_id)
    text = caplog.text
    for word in ("task created", "task completed", "task retrieved", "task cancelled",
                 "cancel requested"):
        assert word in text
    assert handle.task_id in text and "context=connection:" in text


async def test_tasks_registry_observers_see_creation_and_every_change() -> None:
    app = example_app()
    seen: list[tuple[str, TaskStatus]] = []
    app.registry.observers.append(lambda record: seen.append((record.task_id, record.status)))
    async with trio_mcp.open_memory_pair(app, client_app()) as (client, _):
        handle = await client.call_tool_task("approve", {"question": "q"})
        await handle.wait()
    assert [s for t, s in seen if t == handle.task_id] == [
        TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED, TaskStatus.WORKING, TaskStatus.COMPLETED]


async def test_tasks_cancel_is_told_by_its_answer_others_by_notification() -> None:
    """The connection that sends tasks/cancel learns the new status from the answer;
    the requestor's other connections (same identity) get notifications/tasks/status."""

    app = example_app()
    async with app.registry.running(), trio.open_nursery() as nursery:
        raws = []
        for _ in range(2):
            bus, ends = open_bus(context="alice", info={"transport": "memory"})
            await nursery.start(trio_mcp.Peer(app, bus, trio_mcp.Role.SERVER).run)
            raw = _MemoryRaw(ends)
            await raw.initialize()
            raws.append(raw)
        canceller, other = raws
        created = await canceller.request(1, "tools/call", {
            "name": "park", "arguments": {}, "task": {"ttl": 60_000}})
        task_id = created["result"]["task"]["taskId"]
        answer = await canceller.request(2, "tasks/cancel", {"taskId": task_id})
        assert answer["result"]["status"] == "cancelled"
        assert await canceller.ping_ok() and await other.ping_ok()
        notes = {name: [m["params"]["status"] for m in raw.received
                        if m.get("method") == "notifications/tasks/status"]
                 for name, raw in (("canceller", canceller), ("other", other))}
        assert notes == {"canceller": [], "other": ["cancelled"]}
        nursery.cancel_scope.cancel()
