"""Every MUST (and the SHOULDs we implement) of the MCP 2025-11-25 tasks page,
quoted next to the assertion that pins it.

Source: docs/specification/2025-11-25/basic/utilities/tasks.mdx in
modelcontextprotocol/modelcontextprotocol. Quotes are short excerpts of the normative
sentences. Streamable-HTTP-only notes do not apply to stdio/WebSocket.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp import TaskStatus
from trio_mcp.peer._session import _outbound

from tests.helpers import client_app, example_app, seen_by
from tests.raw import open_raw

RELATED = trio_mcp.RELATED_TASK_META


class Wire:
    """Collect the wire messages sent by in-process peers during a block."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, Any], str | None]] = []

    def __call__(self, direction: str, wire: dict[str, Any], method: str | None) -> None:
        if direction == "sent":
            self.sent.append((wire, method))

    def __enter__(self) -> Wire:
        _outbound.message_observers.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _outbound.message_observers.remove(self)

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [w for w, _ in self.sent if w.get("method") == method and "id" in w]

    def results(self, method: str) -> list[dict[str, Any]]:
        return [w["result"] for w, m in self.sent if m == method and "result" in w]


async def test_must_declare_tasks_capability() -> None:
    """"Servers and clients that support task-augmented requests **MUST** declare a
    `tasks` capability during initialization." """
    async with open_raw("memory") as raw:
        init = await raw.initialize()
        assert init["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
        msg = await raw.request(1, "tools/call", {"name": "sleep", "arguments": {"seconds": 0},
                                                  "task": {}})
        assert "task" in msg["result"]
    app = client_app()
    assert app.client_capabilities().tasks == {
        "list": {}, "cancel": {},
        "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
    }


async def test_must_not_augment_without_the_receivers_capability() -> None:
    """"If a server's capabilities do not include `tasks.requests.tools.call`, then
    clients **MUST NOT** attempt to use task augmentation on that server's tools" and
    "If `execution.taskSupport` is not present or `"forbidden"`, clients **MUST NOT**
    attempt to invoke the tool as a task." """
    app = example_app()
    app.host_tasks = False
    with Wire() as wire:
        async with trio_mcp.open_memory_pair(app) as (client, _):
            with pytest.raises(trio_mcp.LocalUsageError):
                await client.call_tool_task("sleep", {"seconds": 0})
        async with trio_mcp.open_memory_pair(example_app()) as (client, _):
            await client.list_all_tools()
            with pytest.raises(trio_mcp.LocalUsageError):
                await client.call_tool_task("echo", {"text": "x"})
    assert all("task" not in r.get("params", {}) for r in wire.requests("tools/call"))


async def test_must_required_tool_as_task_and_error_codes() -> None:
    """"If `execution.taskSupport` is `"required"`, clients **MUST** invoke the tool as
    a task. Servers **MUST** return a `-32601` (Method not found) error if a client
    does not attempt to do so." (and -32601 for a task on a forbidden tool) """
    async with trio_mcp.open_memory_pair(example_app(), client_app()) as (client, _):
        await client.list_all_tools()
        with pytest.raises(trio_mcp.LocalUsageError):
            await client.call_tool("approve", {"question": "q"})
    async with open_raw("memory") as raw:
        await raw.initialize()
        msg = await raw.request(1, "tools/call", {"name": "approve",
                                                  "arguments": {"question": "q"}})
        assert msg["error"]["code"] == -32601
        msg = await raw.request(2, "tools/call", {"name": "echo", "arguments": {"text": "q"},
                                                  "task": {"ttl": 5}})
        assert msg["error"]["code"] == -32601


async def test_must_process_normally_when_not_declared() -> None:
    """"Receivers that do not declare the task capability for a request type **MUST**
    process requests of that type normally, ignoring any task-augmentation metadata
    if present." """
    app = client_app(host_tasks=False)
    async with trio_mcp.open_memory_pair(example_app(), app) as (_, server):
        raw = await server.request_raw("sampling/createMessage", {
            "messages": [], "maxTokens": 5, "task": {"ttl": 1000}})
        assert raw["model"] == "test-model" and "task" not in raw


async def test_must_task_ids_strings_generated_by_receiver_unique_and_secure() -> None:
    """"Task IDs **MUST** be a string value." "Task IDs **MUST** be generated by the
    receiver when creating a task." "Task IDs **MUST** be unique among all tasks
    controlled by the receiver." "receivers **MUST** generate cryptographically secure
    task IDs with enough entropy to prevent guessing" """
    with Wire() as wire:
        async with trio_mcp.open_memory_pair(example_app()) as (client, _):
            ids = [(await client.call_tool_task("sleep", {"seconds": 0})).task_id
                   for _ in range(200)]
    assert all(isinstance(i, str) and re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == 200  # 128 random bits each, from `secrets`
    # The requestor sent only {ttl}; it never chose an id.
    assert all(set(r["params"]["task"]) <= {"ttl"} for r in wire.requests("tools/call"))


async def test_must_begin_working_and_only_valid_transitions() -> None:
    """"Tasks **MUST** begin in the `working` status when created." "Receivers **MUST**
    only transition tasks through the following valid paths" "Tasks with a `completed`,
    `failed`, or `cancelled` status are in a terminal state and **MUST NOT** transition
    to any other status" """
    legal = {("working", "input_required"), ("input_required", "working")} | {
        (a, b) for a in ("working", "input_required")
        for b in ("completed", "failed", "cancelled")}
    with Wire() as wire:
        async with trio_mcp.open_memory_pair(example_app(), client_app()) as (client, _):
            handles = [await client.call_tool_task("approve", {"question": "q"}),
                       await client.call_tool_task("fail", {"message": "m"}),
                       await client.call_tool_task("sleep", {"seconds": 5})]
            assert all(h.task.status is TaskStatus.WORKING for h in handles)
            await handles[2].cancel()
            for h in handles[:2]:
                await h.wait()
    history: dict[str, list[str]] = {}
    for w, method in wire.sent:
        if w.get("method") == "notifications/tasks/status":
            task = w["params"]
        elif method == "tasks/cancel" and "result" in w:
            task = w["result"]  # the canceller learns its change from the answer
        else:
            continue
        history.setdefault(task["taskId"], ["working"]).append(task["status"])
    assert len(history) == 3
    assert history[handles[2].task_id] == ["working", "cancelled"]
    for statuses in history.values():
        for a, b in zip(statuses, statuses[1:], strict=False):
            assert (a, b) in legal, statuses


async def test_must_related_task_meta_on_input_requests() -> None:
    """"The receiver **MUST** include the `io.modelcontextprotocol/related-task`
    metadata in the request to associate it with the task." and "an elicitation that a
    task-augmented tool call depends on **MUST** share the same related task ID with that
    tool call's task." The task **SHOULD** move to `input_required` meanwhile."""
    app = client_app()
    async with trio_mcp.open_memory_pair(example_app(), app) as (client, _):
        handle = await client.call_tool_task("approve", {"question": "q"})
        seen = [t.status async for t in handle]
    assert TaskStatus.INPUT_REQUIRED in seen or seen[-1] is TaskStatus.COMPLETED
    _, _, params = seen_by(app)[0]
    assert params.meta[RELATED] == {"taskId": handle.task_id}


async def test_must_timestamps_and_ttl_in_every_task_response() -> None:
    """"Receivers **MUST** include a `createdAt` ISO 8601-formatted timestamp in all
    task responses" / "a `lastUpdatedAt` ..." / "Receivers **MUST** include the actual
    `ttl` duration (or `null` for unlimited) in `tasks/get` responses." """
    unlimited = example_app(trio_mcp.TaskLimits(default_ttl=None, max_ttl=None))
    with Wire() as wire:
        async with trio_mcp.open_memory_pair(unlimited) as (client, _):
            handle = await client.call_tool_task("sleep", {"seconds": 0})
            await handle.wait()
            await client.list_tasks()
            second = await client.call_tool_task("sleep", {"seconds": 5})
            await second.cancel()
    tasks = [r["task"] for r in wire.results("tools/call")]
    tasks += wire.results("tasks/get") + wire.results("tasks/cancel")
    tasks += [t for r in wire.results("tasks/list") for t in r["tasks"]]
    assert len(tasks) >= 5
    for task in tasks:
        for key in ("createdAt", "lastUpdatedAt"):
            datetime.fromisoformat(task[key])  # ISO 8601
        assert "ttl" in task and task["ttl"] is None  # unlimited is an explicit null


async def test_must_create_task_result_then_block_then_same_result() -> None:
    """"Receivers that accept a task-augmented request **MUST** return a
    `CreateTaskResult` as the response." "it **MUST** block the response until the
    task reaches a terminal status." "receivers **MUST** return from `tasks/result`
    exactly what the underlying request would have returned, whether that is a
    successful result or a JSON-RPC error." """
    async with trio_mcp.open_memory_pair(example_app()) as (client, _):
        plain = await client.request_raw("tools/call", {"name": "sleep",
                                                        "arguments": {"seconds": 0.1}})
        created = await client.request_raw("tools/call", {"name": "sleep", "task": {},
                                                          "arguments": {"seconds": 0.1}})
        assert set(created) == {"task"} and created["task"]["status"] == "working"
        start = trio.current_time()
        payload = await client.task_result(created["task"]["taskId"])
        assert trio.current_time() - start > 0.05  # it waited for the work
        assert {k: v for k, v in payload.items() if k != "_meta"} == plain
        # A JSON-RPC error of the underlying request comes back as the same error.
        with pytest.raises(trio_mcp.RemoteError) as plain_error:
            await client.call_tool("sleep", {"seconds": -1})
        handle = await client.call_tool_task("sleep", {"seconds": -1})
        final = await handle.wait()
        assert final.status is TaskStatus.FAILED and final.status_message
        with pytest.raises(trio_mcp.RemoteError) as task_error:
            await handle.result()
        assert (task_error.value.code, task_error.value.message) == (
            plain_error.value.code, plain_error.value.message)


async def test_must_related_task_meta_rules_on_task_operations() -> None:
    """"The `tasks/result` operation **MUST** include this metadata in its response"
    and "receivers **SHOULD NOT** include [it] in the result messages" of tasks/get,
    tasks/list, tasks/cancel; status notifications **SHOULD NOT** include it."""
    with Wire() as wire:
        async with trio_mcp.open_memory_pair(example_app()) as (client, _):
            handle = await client.call_tool_task("sleep", {"seconds": 0})
            await handle.wait()
            await handle.result()
            await client.list_tasks()
            await (await client.call_tool_task("sleep", {"seconds": 9})).cancel()
    assert all(r["_meta"][RELATED] == {"taskId": handle.task_id}
               for r in wire.results("tasks/result"))
    for method in ("tasks/get", "tasks/list", "tasks/cancel"):
        assert wire.results(method)
        assert all(RELATED not in (r.get("_meta") or {}) for r in wire.results(method))
    # Our requestor never puts it on tasks/get, tasks/result, tasks/cancel requests.
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        assert all(RELATED not in (r.get("params", {}).get("_meta") or {})
                   for r in wire.requests(method))


async def test_must_task_id_param_is_the_source_of_truth() -> None:
    """"the `taskId` parameter in the request **MUST** be used as the source of truth
    ... receivers **MUST** ignore such metadata if present" """
    async with open_raw("memory") as raw:
        await raw.initialize()
        created = await raw.request(1, "tools/call", {"name": "sleep", "task": {},
                                                      "arguments": {"seconds": 0}})
        task_id = created["result"]["task"]["taskId"]
        msg = await raw.request(2, "tasks/get", {"taskId": task_id,
                                                 "_meta": {RELATED: {"taskId": "other"}}})
        assert msg["result"]["taskId"] == task_id


async def test_must_not_rely_on_status_notifications(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """"Requestors **MUST NOT** rely on receiving the `notifications/tasks/status`
    notification" -- our handle still finishes, polling at pollInterval."""
    server_app = example_app(trio_mcp.TaskLimits(poll_interval=5_000))
    original = trio_mcp.Peer.notify_soon

    def no_status(self: trio_mcp.Peer, method: str, params: Any = None) -> None:
        if method != "notifications/tasks/status":
            original(self, method, params)

    monkeypatch.setattr(trio_mcp.Peer, "notify_soon", no_status)
    async with trio_mcp.open_memory_pair(server_app) as (client, _):
        with Wire() as wire:
            handle = await client.call_tool_task("sleep", {"seconds": 12})
            start = trio.current_time()
            final = await handle.wait()
        assert final.status is TaskStatus.COMPLETED
        polls = wire.requests("tasks/get")
        # Polled, and never faster than the suggested 5 s interval.
        assert 2 <= len(polls) <= 4
        assert trio.current_time() - start >= 12


async def test_must_next_cursor_when_more_and_opaque_cursors() -> None:
    """"Receivers **MUST** include a `nextCursor` in the response if more tasks are
    available." "Requestors **MUST** treat cursors as opaque tokens" """
    with Wire() as wire:
        async with trio_mcp.open_memory_pair(example_app()) as (client, _):
            for _ in range(250):
                await client.call_tool_task("sleep", {"seconds": 0})
            assert len([t async for t in client.iter_tasks()]) == 250
    pages = wire.results("tasks/list")
    assert [len(p["tasks"]) for p in pages] == [100, 100, 50]
    assert "nextCursor" in pages[0] and "nextCursor" in pages[1] and "nextCursor" not in pages[2]
    sent_cursors = [r["params"]["cursor"] for r in wire.requests("tasks/list") if "params" in r]
    assert sent_cursors == [pages[0]["nextCursor"], pages[1]["nextCursor"]]


async def test_must_get_implies_list() -> None:
    """"If a task is retrievable via `tasks/get` for a requestor, it **MUST** be
    retrievable via `tasks/list` for that requestor." """
    async with trio_mcp.open_memory_pair(example_app(), client_app()) as (client, _):
        ids = set()
        for tool, args in (("sleep", {"seconds": 0}), ("fail", {"message": "x"}),
                           ("sleep", {"seconds": 60})):
            ids.add((await client.call_tool_task(tool, args)).task_id)
        retrievable = set()
        for task_id in ids:
            await client.get_task(task_id)
            retrievable.add(task_id)
        assert {t.task_id async for t in client.iter_tasks()} == retrievable


async def test_must_cancel_rules() -> None:
    """"Receivers **MUST** reject cancellation requests for tasks already in a terminal
    status ... with error code `-32602`" "**MUST** transition the task to `cancelled`
    status before sending the response." "Once a task is cancelled, it **MUST** remain
    in `cancelled` status even if execution continues to completion or fails." """
    app = example_app()
    finished = trio.Event()

    @app.tool(task_support="optional")
    async def stubborn() -> str:
        # Work that finishes even though it was asked to stop.
        with trio.CancelScope(shield=True):
            await trio.sleep(0.2)
        finished.set()
        return "done anyway"

    async with trio_mcp.open_memory_pair(app) as (client, _):
        done = await client.call_tool_task("sleep", {"seconds": 0})
        await done.wait()
        with pytest.raises(trio_mcp.RemoteError) as info:
            await done.cancel()
        assert info.value.code == -32602 and "completed" in info.value.message
        handle = await client.call_tool_task("stubborn")
        response = await handle.cancel()
        assert response.status is TaskStatus.CANCELLED  # before the response was sent
        await finished.wait()
        await trio.sleep(0.05)
        assert (await handle.status()).status is TaskStatus.CANCELLED


async def test_must_bind_tasks_to_the_authorization_context() -> None:
    """"When an authorization context is provided, receivers **MUST** bind tasks to said
    context." "receivers **MUST** reject `tasks/get`, `tasks/result`, and
    `tasks/cancel` requests for tasks that do not belong to the same authorization
    context" "receivers **MUST** ensure the returned task list includes only tasks
    associated with the requestor's authorization context." """
    app = example_app()
    async with app.registry.running():
        async with trio_mcp.open_memory_pair(app, client_context="alice") as (a1, _):
            handle = await a1.call_tool_task("sleep", {"seconds": 0})
            await handle.wait()
        # Alice again, on a new connection: her task is still hers.
        async with trio_mcp.open_memory_pair(app, client_context="alice") as (a2, _), \
                trio_mcp.open_memory_pair(app, client_context="mallory") as (m, _):
            assert (await a2.get_task(handle.task_id)).status is TaskStatus.COMPLETED
            assert (await a2.task_result(handle.task_id))["content"]
            assert [t.task_id for t in (await a2.list_tasks()).tasks] == [handle.task_id]
            for call in (m.get_task, m.task_result, m.cancel_task):
                with pytest.raises(trio_mcp.RemoteError) as info:
                    await call(handle.task_id)
                assert info.value.code == -32602
            assert (await m.list_tasks()).tasks == []


async def test_must_protocol_errors_are_standard_json_rpc_errors() -> None:
    """"Receivers **MUST** return standard JSON-RPC errors for the following protocol
    error cases": invalid taskId, invalid cursor, cancelling a terminal task (-32602)."""
    async with open_raw("memory") as raw:
        await raw.initialize()
        for i, (method, params) in enumerate([
            ("tasks/get", {"taskId": "nope"}),
            ("tasks/result", {"taskId": "nope"}),
            ("tasks/cancel", {"taskId": "nope"}),
            ("tasks/list", {"cursor": "nope"}),
        ]):
            msg = await raw.request(i, method, params)
            assert msg["error"]["code"] == -32602 and msg["error"]["message"]
