"""The Python SDK ``mcp`` 1.30.0's client driving a trio-mcp server (examples/task_server.py).

Runs under the interpreter of the mcp 1.30.0 venv (``.interop/mcp130``), never ours:

    python mcp_client.py stdio <command> [args...]    spawn the server, talk over its stdio
    python mcp_client.py ws <url>                     mcp.client.websocket.websocket_client

It runs one fixed scenario with the real ``ClientSession`` and its experimental tasks API
and prints ONE JSON report of what it observed on stdout (the pytest in tests/interop
asserts on it), including the full wire log. The client hosts sampling tasks itself
(``ExperimentalTaskHandlers`` over the SDK's ``InMemoryTaskStore``), so the server's
``summarize`` tool becomes a task on this side. Diagnostics go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

# The experimental tasks API and the WebSocket transport warn that mcp 2.x removed them.
warnings.simplefilter("ignore", DeprecationWarning)

import mcp.types as types  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.experimental.task_handlers import ExperimentalTaskHandlers  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import McpError  # noqa: E402
from mcp.shared.experimental.tasks.in_memory_task_store import InMemoryTaskStore  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402

SAMPLED_TEXT = "sampled by the mcp 1.30 client"
RELATED = "io.modelcontextprotocol/related-task"
TERMINAL = ("completed", "failed", "cancelled")


def dump(value: Any) -> Any:
    if isinstance(value, types.BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


async def attempt(fn: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    try:
        return {"ok": True, "value": dump(await fn())}
    except McpError as exc:
        return {"ok": False, "code": exc.error.code, "message": exc.error.message}
    except Exception as exc:
        return {"ok": False, "code": None, "message": f"{type(exc).__name__}: {exc}"}


@asynccontextmanager
async def logged(read: Any, write: Any, wire: list[dict[str, Any]]) -> Any:
    """Interpose on the transport's streams to log every message both ways."""
    to_session_send, to_session_recv = anyio.create_memory_object_stream[Any](0)
    from_session_send, from_session_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_in() -> None:
        async with to_session_send:
            async for item in read:
                if isinstance(item, SessionMessage):
                    wire.append({"dir": "in", "msg": dump(item.message)})
                await to_session_send.send(item)

    async def pump_out() -> None:
        async for item in from_session_recv:
            wire.append({"dir": "out", "msg": dump(item.message)})
            await write.send(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump_in)
        tg.start_soon(pump_out)
        yield to_session_recv, from_session_send
        tg.cancel_scope.cancel()


class HostedSampling:
    """Client-hosted sampling tasks: the server's task-augmented sampling/createMessage."""

    def __init__(self, report: dict[str, Any], tg: anyio.abc.TaskGroup) -> None:
        self.store = InMemoryTaskStore()
        self.report = report
        self.tg = tg

    async def augmented_sampling(self, ctx: Any, params: types.CreateMessageRequestParams,
                                 task: types.TaskMetadata) -> types.CreateTaskResult:
        if task.ttl is None and self.report["grant_ttl"]:
            # A receiver may pick the TTL; granting one also avoids the SDK omitting
            # `"ttl": null` from its answer (a deviation: Task.ttl is required).
            task = types.TaskMetadata(ttl=60000)
        created = await self.store.create_task(task)
        self.report["sampling_requests"].append({
            "task": dump(task),
            "relatedTask": (params.meta.model_dump().get(RELATED) if params.meta else None),
            "hostedTaskId": created.taskId,
        })

        async def work() -> None:
            await anyio.sleep(0.1)
            await self.store.store_result(created.taskId, types.CreateMessageResult(
                role="assistant", content=types.TextContent(type="text", text=SAMPLED_TEXT),
                model="mcp130-test-model"))
            await self.store.update_task(created.taskId, status="completed")

        self.tg.start_soon(work)
        return types.CreateTaskResult(task=created)

    async def get_task(self, ctx: Any, params: types.GetTaskRequestParams) -> Any:
        task = await self.store.get_task(params.taskId)
        if task is None:
            return types.ErrorData(code=types.INVALID_PARAMS, message="Task not found")
        return types.GetTaskResult(**task.model_dump())

    async def get_task_result(self, ctx: Any, params: types.GetTaskPayloadRequestParams) -> Any:
        while True:
            task = await self.store.get_task(params.taskId)
            if task is None:
                return types.ErrorData(code=types.INVALID_PARAMS, message="Task not found")
            if task.status in TERMINAL:
                break
            await self.store.wait_for_update(params.taskId)
        result = await self.store.get_result(params.taskId)
        payload = result.model_dump(by_alias=True, exclude_none=True) if result else {}
        payload["_meta"] = {RELATED: {"taskId": params.taskId}}
        return types.GetTaskPayloadResult(**payload)

    async def list_tasks(self, ctx: Any, params: Any) -> Any:
        tasks, cursor = await self.store.list_tasks(params.cursor if params else None)
        return types.ListTasksResult(tasks=tasks, nextCursor=cursor)

    async def cancel_task(self, ctx: Any, params: types.CancelTaskRequestParams) -> Any:
        task = await self.store.update_task(params.taskId, status="cancelled")
        return types.CancelTaskResult(**task.model_dump())

    def handlers(self) -> ExperimentalTaskHandlers:
        return ExperimentalTaskHandlers(
            get_task=self.get_task,
            get_task_result=self.get_task_result,
            list_tasks=self.list_tasks,
            cancel_task=self.cancel_task,
            augmented_sampling=self.augmented_sampling,
        )


async def scenario(session: ClientSession, report: dict[str, Any]) -> None:
    tasks = session.experimental
    init = report["initialize"]
    report["server_info"] = init["serverInfo"]
    report["server_capabilities"] = init["capabilities"]
    report["protocol_version"] = init["protocolVersion"]
    report["ping"] = await attempt(session.send_ping)

    listed = await session.list_tools()
    report["tools"] = {
        t.name: (t.execution.taskSupport if t.execution else None) for t in listed.tools
    }

    report["echo"] = await attempt(lambda: session.call_tool("echo", {"text": "hello"}))
    report["fail_plain"] = await attempt(lambda: session.call_tool("fail", {"message": "boom"}))
    report["approve_plain"] = await attempt(
        lambda: session.call_tool("approve", {"question": "plain?"}))
    report["echo_task"] = await attempt(
        lambda: tasks.call_tool_as_task("echo", {"text": "as task"}))

    # A task followed with the SDK's poll_task, then tasks/result.
    created = await tasks.call_tool_as_task("sleep", {"seconds": 0.2, "steps": 2}, ttl=60000)
    report["sleep_created"] = dump(created)
    sleep_id = created.task.taskId
    report["sleep_polled"] = [s.status async for s in tasks.poll_task(sleep_id)]
    report["sleep_result"] = await attempt(
        lambda: tasks.get_task_result(sleep_id, types.CallToolResult))

    created = await tasks.call_tool_as_task("fail", {"message": "task boom"}, ttl=60000)
    fail_id = created.task.taskId
    report["fail_polled"] = [s.status async for s in tasks.poll_task(fail_id)]
    report["fail_get"] = await attempt(lambda: tasks.get_task(fail_id))
    report["fail_result"] = await attempt(
        lambda: tasks.get_task_result(fail_id, types.CallToolResult))

    # `approve`, the SDK's way: poll; on input_required, tasks/result carries the elicitation.
    created = await tasks.call_tool_as_task("approve", {"question": "ship it?"}, ttl=60000)
    approve_id = created.task.taskId
    statuses = []
    async for status in tasks.poll_task(approve_id):
        statuses.append(status.status)
        if status.status == "input_required":
            break
    report["approve_polled"] = statuses
    report["approve_result"] = await attempt(
        lambda: tasks.get_task_result(approve_id, types.CallToolResult))

    # `approve` again, opening tasks/result at once: the elicitation must come through it.
    created = await tasks.call_tool_as_task("approve", {"question": "side channel?"}, ttl=60000)
    side_id = created.task.taskId
    report["approve_side_result"] = await attempt(
        lambda: tasks.get_task_result(side_id, types.CallToolResult))

    # Cancel a long task.
    created = await tasks.call_tool_as_task("sleep", {"seconds": 60}, ttl=60000)
    cancel_id = created.task.taskId
    report["cancel"] = await attempt(lambda: tasks.cancel_task(cancel_id))
    report["cancel_get"] = await attempt(lambda: tasks.get_task(cancel_id))
    report["cancel_result"] = await attempt(
        lambda: tasks.get_task_result(cancel_id, types.CallToolResult))
    report["cancel_again"] = await attempt(lambda: tasks.cancel_task(cancel_id))

    report["get_unknown"] = await attempt(lambda: tasks.get_task("no-such-task"))
    report["list_bad_cursor"] = await attempt(lambda: tasks.list_tasks("not-a-cursor"))
    listed_tasks: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await tasks.list_tasks(cursor)
        listed_tasks.extend({"taskId": t.taskId, "status": t.status} for t in page.tasks)
        cursor = page.nextCursor
        if not cursor:
            break
    report["list"] = listed_tasks
    report["created_ids"] = {"sleep": sleep_id, "fail": fail_id, "approve": approve_id,
                             "approve_side": side_id, "cancelled": cancel_id}

    # `summarize` samples from this client, which hosts the sampling as a task. The server
    # asks with `task: {}` (no ttl); the first time the client keeps the SDK's own answer
    # (ttl unlimited, which mcp 1.30.0 writes by omitting `ttl`), the second time it grants one.
    report["grant_ttl"] = False
    report["summarize_plain"] = await attempt(
        lambda: session.call_tool("summarize", {"text": "a long text"}))
    report["grant_ttl"] = True
    created = await tasks.call_tool_as_task("summarize", {"text": "another text"}, ttl=60000)
    summarize_id = created.task.taskId
    statuses = []
    async for status in tasks.poll_task(summarize_id):
        statuses.append(status.status)
        if status.status == "input_required":
            break  # the sampling request waits for tasks/result
    report["summarize_result"] = await attempt(
        lambda: tasks.get_task_result(summarize_id, types.CallToolResult))
    report["summarize_id"] = summarize_id


async def main() -> None:
    mode, *rest = sys.argv[1:]
    report: dict[str, Any] = {"sdk": "mcp-1.30.0", "transport": mode, "sampling_requests": [],
                              "grant_ttl": False,
                              "elicitations": [], "wire": []}

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        meta = params.meta.model_dump() if params.meta else {}
        report["elicitations"].append({"message": params.message,
                                       "relatedTask": (meta.get(RELATED) or {}).get("taskId")})
        return types.ElicitResult(action="accept", content={"approve": True})

    async def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        report["sampling_requests"].append({"task": None})
        return types.CreateMessageResult(role="assistant", model="mcp130-test-model",
                                         content=types.TextContent(type="text", text=SAMPLED_TEXT))

    if mode == "stdio":
        command, *args = rest
        # Our whole environment (the SDK passes only a safe subset by default), so the
        # server finds trio_mcp however the test run made it importable.
        transport = stdio_client(StdioServerParameters(command=command, args=args,
                                                       env=dict(os.environ)))
    else:
        from mcp.client.websocket import websocket_client

        transport = websocket_client(rest[0])

    async with anyio.create_task_group() as tg:
        hosted = HostedSampling(report, tg)
        async with transport as (read, write), logged(read, write, report["wire"]) as (r, w):
            async with ClientSession(r, w, sampling_callback=sample, elicitation_callback=elicit,
                                     experimental_task_handlers=hosted.handlers()) as session:
                report["initialize"] = dump(await session.initialize())
                await scenario(session, report)
        tg.cancel_scope.cancel()
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    anyio.run(main)
