"""The schema check that every test gets (``tests/wire_schema.py``, run by ``conftest.py``
when each test ends) covers the task and feature messages of MCP 2025-11-25, and can fail.

Each test here records its own conversation, so it holds in any order, alone, or on any
pytest-xdist worker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import jsonschema
import pytest

import trio_mcp
from trio_mcp.peer._session import _outbound

from tests.everything import connect_everything, feature_client
from tests.helpers import client_app, example_app
from tests.wire_schema import related_task_problems, wire_schema

#: Definitions the check must meet in a task conversation and one of every feature.
COVERED = ("#CreateTaskResult", "GetTaskRequest", "#GetTaskResult",
           "TaskStatusNotification", "#CallToolResult", "CreateMessageRequest",
           "ElicitRequest", "#ListTasksResult",
           "#ListResourcesResult", "#ListResourceTemplatesResult", "#ReadResourceResult",
           "#ListPromptsResult", "#GetPromptResult", "#CompleteResult", "#ListRootsResult",
           "ListRootsRequest", "SubscribeRequest", "SetLevelRequest", "CompleteRequest",
           "LoggingMessageNotification", "ResourceUpdatedNotification",
           "ToolListChangedNotification", "RootsListChangedNotification",
           "ElicitationCompleteNotification")


@contextmanager
def sent_messages() -> Iterator[list[tuple[dict[str, Any], str | None]]]:
    """What the in-process peers send during the block, as (message, method answered)."""
    sent: list[tuple[dict[str, Any], str | None]] = []

    def observe(direction: str, wire: dict[str, Any], method: str | None) -> None:
        if direction == "sent":
            sent.append((json.loads(json.dumps(wire)), method))

    _outbound.message_observers.append(observe)
    try:
        yield sent
    finally:
        _outbound.message_observers.remove(observe)


async def test_schema_check_covers_tasks_and_every_feature() -> None:
    with sent_messages() as sent:
        async with trio_mcp.open_memory_pair(example_app(), client_app()) as (client, _):
            await client.list_all_tools()
            handle = await client.call_tool_task("approve", {"question": "q"})
            await handle.wait()
            await handle.result()
            handle = await client.call_tool_task("summarize", {"text": "t"})
            await handle.wait()
            await handle.result()
            await client.list_tasks()
            await client.ping()
        await _every_feature_conversation()

    assert len(sent) > 50
    violations, kinds = wire_schema().check(sent)
    assert not violations, "\n".join(violations[:20])
    for name in COVERED:
        assert kinds[name] > 0, name


async def _every_feature_conversation() -> None:
    """Send each message of the resources, prompts, completion, logging, roots,
    list-change and elicitation features at least once."""
    app, _ = feature_client(roots=["file:///r"])
    async with connect_everything("memory", app) as client:
        await client.list_all_resources()
        await client.list_all_resource_templates()
        for uri in ("test://static-text", "test://static-binary", "test://template/1/data"):
            await client.read_resource(uri)
        await client.subscribe_resource("test://watched-resource")
        await client.call_tool("test_update_watched_resource")
        await client.unsubscribe_resource("test://watched-resource")
        await client.list_all_prompts()
        for name, args in (("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"}),
                           ("test_prompt_with_image", None),
                           ("test_prompt_with_embedded_resource", {"resourceUri": "test://e"})):
            await client.get_prompt(name, args)
        await client.complete(trio_mcp.PromptReference("test_prompt_with_arguments"), "arg2",
                              "", context={"arg1": "a"})
        await client.set_logging_level("debug")
        for tool in ("test_log_levels", "test_list_roots", "test_toggle_dynamic_tool",
                     "test_url_elicitation", "test_elicitation_sep1330_enums",
                     "test_elicitation_sep1034_defaults", "test_multiple_content_types",
                     "test_resource_link", "test_audio_content"):
            await client.call_tool(tool)
        app.set_roots(["file:///s"])
        await client.call_tool("test_list_roots")
        await client.ping()


def test_schema_checker_catches_a_bad_message() -> None:
    """The check can fail: a Task without ttl is rejected, a tasks/result without the
    related-task _meta too, and so is a modern result that breaks the 2026-07-28 schema."""
    check = wire_schema()
    with pytest.raises(jsonschema.ValidationError):
        check.validator("Task").validate(
            {"taskId": "t", "status": "working", "createdAt": "x", "lastUpdatedAt": "x"})
    assert related_task_problems(
        {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}, "tasks/result"
    )
    violations, kinds = check.check([
        ({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "tools": "none"}},
         "tools/list"),
        ({"jsonrpc": "2.0", "id": 2, "result": {"content": "not a list"}}, "tools/call"),
    ])
    assert len(violations) == 2, violations
    assert kinds["2026-07-28"] == 1
