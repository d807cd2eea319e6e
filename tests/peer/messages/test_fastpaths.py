"""The hand-written fast paths give exactly what the generated cattrs hooks give."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp import McpError
from trio_mcp.peer._messages import (
    CallToolParams,
    CallToolResult,
    TextContent,
    from_wire,
    wire_object,
)
from trio_mcp.peer._messages import _tools as tool_types


@pytest.mark.parametrize(
    "data",
    [
        {"name": "echo"},
        {"name": "echo", "arguments": {"text": "hi"}},
        {"name": "echo", "arguments": None},
        {"name": "echo", "arguments": {}, "_meta": {"progressToken": 1}},
        {"name": "sleep", "arguments": {"seconds": 0}, "task": {"ttl": 60_000}},
        {"name": "sleep", "task": {}},
        {"name": "sleep", "task": {"ttl": None}},
        {"name": "sleep", "task": {"ttl": 5, "x": 1}},
        {"name": "sleep", "task": {"x": 1}},
        {"name": "echo", "other": 1},
        {"name": "echo", "_meta": None},
    ],
)
def test_call_params_fast_path_matches_cattrs(data: dict[str, Any]) -> None:
    fast = from_wire(data, CallToolParams)
    generic = tool_types._generic_call_params(data, CallToolParams)
    assert fast == generic
    assert fast.extra == generic.extra


@pytest.mark.parametrize(
    "data",
    [
        {"name": "echo"},
        {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": 1}},
        {"name": "sleep", "task": {"ttl": 60_000}},
        {"name": "sleep", "task": {}},
        {"name": "echo", "other": 1},
        {"name": 5},
        {"name": "x", "task": {"ttl": "5"}},
        None,
        [],
    ],
)
def test_call_params_fields_are_the_structured_params(data: Any) -> None:
    """tools/call reads its params without a CallToolParams: the same fields, the same errors."""
    try:
        params = from_wire(data if data is not None else {}, CallToolParams)
    except McpError as exc:
        with pytest.raises(McpError) as caught:
            tool_types.call_params_fields(data)
        assert (caught.value.code, caught.value.message) == (exc.code, exc.message)
    else:
        fields = tool_types.call_params_fields(data)
        assert fields == (params.name, params.arguments, params.task, params.meta)


@pytest.mark.parametrize("text", ["", "hi", "caf\u00e9 \U0001f600", "a\nb"])
def test_text_result_wire_is_the_converters(text: str) -> None:
    wire = tool_types.text_result_wire(text)
    generic = tool_types._generic_call_result(CallToolResult([TextContent(text)]))
    assert wire == generic and list(wire) == list(generic)


@pytest.mark.parametrize(
    "data",
    [
        {"name": 5},
        {"name": "x", "arguments": []},
        {"name": "x", "task": {"ttl": True}},
        {"name": "x", "task": {"ttl": "5"}},
        {"name": "x", "_meta": []},
        [],
    ],
)
def test_call_params_fast_path_falls_back(data: Any) -> None:
    try:
        generic: Any = tool_types._generic_call_params(data, CallToolParams)
    except Exception as exc:
        with pytest.raises(type(exc)):
            tool_types._structure_call_params(data, CallToolParams)
    else:
        assert tool_types._structure_call_params(data, CallToolParams) == generic


@pytest.mark.parametrize(
    "result",
    [
        CallToolResult([]),
        CallToolResult([TextContent("hi")]),
        CallToolResult([TextContent("a"), TextContent("b")], is_error=True),
        CallToolResult([TextContent("a", annotations={"priority": 1})]),
        CallToolResult([TextContent("a", meta={"k": 1})]),
        CallToolResult([TextContent("a")], structured_content={"a": 1}),
        CallToolResult([TextContent("a")], meta={"m": 1}),
        CallToolResult([TextContent("a")], extra={"x": 1}),
    ],
)
def test_call_result_fast_path_matches_cattrs(result: CallToolResult) -> None:
    assert wire_object(result) == tool_types._generic_call_result(result)


def _tasks() -> list[Any]:
    from trio_mcp.peer._messages import Task, TaskStatus

    return [
        Task("a", TaskStatus.WORKING, "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"),
        Task("a", TaskStatus.CANCELLED, "c", "u", ttl=60_000, poll_interval=500),
        Task("a", TaskStatus.FAILED, "c", "u", ttl=None, status_message="boom"),
        Task("a", TaskStatus.COMPLETED, "c", "u", meta={"k": 1}),
        Task("a", TaskStatus.COMPLETED, "c", "u", extra={"x": 1}),
    ]


@pytest.mark.parametrize("task", _tasks())
def test_task_fast_path_matches_cattrs(task: Any) -> None:
    from trio_mcp.peer._messages import CreateTaskResult
    from trio_mcp.peer._messages import _tasks as task_types

    assert wire_object(task) == task_types._generic_task(task)
    for meta in (None, {}, {"m": 1}):
        result = CreateTaskResult(task, meta=meta)
        assert wire_object(result) == task_types._generic_create_result(result)


@pytest.mark.parametrize("status_message", [None, "", "boom"])
@pytest.mark.parametrize("ttl", [None, 0, 60_000])
@pytest.mark.parametrize("status", ["working", "input_required", "completed", "failed", "cancelled"])
def test_record_wire_matches_the_snapshot_through_cattrs(
    status: str, ttl: int | None, status_message: str | None
) -> None:
    """TaskRecord.wire() (the hot paths' Task JSON) is exactly to_wire(snapshot()), key order too."""
    import math

    from trio_mcp.peer._messages import TaskStatus
    from trio_mcp.peer._messages import _tasks as task_types
    from trio_mcp.peer._tasks._store import TaskRecord

    record = TaskRecord("id", "owner", 1, "tools/call", TaskStatus(status), "c", "u", ttl, 500,
                        math.inf, status_message)
    wire = record.wire()
    generic = task_types._generic_task(record.snapshot())
    assert wire == generic and list(wire) == list(generic)
    assert wire == wire_object(record.snapshot())
