"""Every message our peers sent during the test session validates against the
official MCP JSON Schema of its era: ``../shared/spec/schema-2025-11-25.json``,
or ``schema-2026-07-28.json`` for the messages of the modern era (a result
with ``resultType``, a request with the per-request ``_meta``, the methods
only 2026-07-28 has, a notification of a subscription).

The recorder in ``conftest.py`` sees every message any in-process trio_mcp
peer sends (client and server roles, over memory, stdio and WebSocket, and to
the foreign implementations in the interop tests). This module is named to
run last; it also runs a short conversation of its own so that it checks
something even when run alone.

One documented exception: JSON-RPC 2.0 (section 5) requires ``"id": null`` in
the error response to input whose id cannot be read (parse errors), but the
MCP schema's ``RequestId`` cannot be null. Such responses are validated with
the null id removed; everything else must validate as sent.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import jsonschema
import pytest

import trio_mcp

from .conftest import RECORDED
from .everything import connect_everything, feature_client
from .helpers import client_app, example_app
from .test_modern_server import (
    PV,
    TASK_REQUEST_DEF,
    conforms,
    conforms_tasks,
    validate_modern,
)

#: Methods only the 2026-07-28 era has.
MODERN_ONLY = frozenset({
    "server/discover", "subscriptions/listen", "notifications/subscriptions/acknowledged",
})
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


def is_modern(wire: dict[str, Any]) -> bool:
    """Whether ``wire`` is a message of the 2026-07-28 era (errors are the same in both)."""
    if "result" in wire:
        return "resultType" in wire["result"]
    if "method" in wire:
        meta = (wire.get("params") or {}).get("_meta") or {}
        return wire["method"] in MODERN_ONLY or PV in meta or SUBSCRIPTION in meta
    return False


def check_modern(wire: dict[str, Any], method: str | None, by_method: dict[str, str]) -> None:
    """Validate one modern message against the 2026-07-28 schema."""
    if "method" in wire and "id" in wire:  # a client's request
        conforms("JSONRPCRequest", wire)
        if wire["method"] in by_method:
            conforms(by_method[wire["method"]], wire)
        elif wire["method"] in TASK_REQUEST_DEF:
            conforms_tasks(TASK_REQUEST_DEF[wire["method"]], wire)
        return
    validate_modern(wire, method)

RESULT_BY_METHOD = {
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "tasks/get": "GetTaskResult",
    "tasks/list": "ListTasksResult",
    "tasks/cancel": "CancelTaskResult",
    "tasks/result": "GetTaskPayloadResult",
    "sampling/createMessage": "CreateMessageResult",
    "elicitation/create": "ElicitResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
    "logging/setLevel": "EmptyResult",
    "roots/list": "ListRootsResult",
}
RELATED = trio_mcp.RELATED_TASK_META


def _definition_for(wire: dict[str, Any], method: str | None,
                    by_method: dict[str, str]) -> list[str]:
    if "method" in wire:
        name = by_method.get(wire["method"])
        return [name] if name else ["JSONRPCRequest" if "id" in wire else "JSONRPCNotification"]
    if "error" in wire:
        return ["JSONRPCErrorResponse"]
    names = ["JSONRPCResultResponse"]
    result = wire["result"]
    if method in ("tools/call", "sampling/createMessage", "elicitation/create") and "task" in result:
        names.append("#CreateTaskResult")
    elif method == "tasks/result":
        names.append("#GetTaskPayloadResult")
        if "action" in result:
            names.append("#ElicitResult")
        elif "model" in result:
            names.append("#CreateMessageResult")
        elif "content" in result:
            names.append("#CallToolResult")
    elif method in RESULT_BY_METHOD:
        names.append("#" + RESULT_BY_METHOD[method])
    return names


def _check_related_task_rules(wire: dict[str, Any], method: str | None) -> list[str]:
    """The tasks page's rules on the related-task _meta key."""
    problems = []
    if wire.get("method") == "notifications/tasks/status":
        if RELATED in (wire.get("params", {}).get("_meta") or {}):
            problems.append("notifications/tasks/status carries related-task _meta")
    if "result" in wire and method in ("tasks/get", "tasks/list", "tasks/cancel"):
        if RELATED in (wire["result"].get("_meta") or {}):
            problems.append(f"{method} result carries related-task _meta")
    if "result" in wire and method == "tasks/result":
        if RELATED not in (wire["result"].get("_meta") or {}):
            problems.append("tasks/result result lacks related-task _meta")
    return problems


async def test_schema_every_sent_message_validates(schema: dict[str, Any]) -> None:
    # A conversation of our own, so the check never runs on nothing.
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

    by_method = {}
    for name, definition in schema["$defs"].items():
        method = definition.get("properties", {}).get("method", {}).get("const")
        if method:
            by_method[method] = name

    registry_schema = dict(schema)
    validators: dict[str, jsonschema.protocols.Validator] = {}

    def validator(name: str) -> jsonschema.protocols.Validator:
        if name not in validators:
            ref = {"$ref": f"#/$defs/{name.lstrip('#')}", "$defs": schema["$defs"]}
            ref["$schema"] = schema.get("$schema", "https://json-schema.org/draft/2020-12/schema")
            cls = jsonschema.validators.validator_for(registry_schema)
            validators[name] = cls(ref)
        return validators[name]

    sent = [(wire, method) for direction, wire, method in RECORDED if direction == "sent"]
    assert len(sent) > 50
    modern_by_method = {
        name: definition for name, definition in (
            (d.get("properties", {}).get("method", {}).get("const"), n)
            for n, d in _schema_2026()["$defs"].items()
        ) if name
    }
    violations: list[str] = []
    kinds: Counter[str] = Counter()
    for wire, method in sent:
        if is_modern(wire):
            kinds["2026-07-28"] += 1
            try:
                check_modern(wire, method, modern_by_method)
            except AssertionError as problem:
                violations.append(f"2026-07-28: {str(problem)[:300]}")
            continue
        wire = copy.deepcopy(wire)
        if "error" in wire and wire.get("id") is None:
            del wire["id"]  # JSON-RPC 2.0 section 5: see the module docstring
        for name in _definition_for(wire, method, by_method):
            target = wire["result"] if name.startswith("#") else wire
            kinds[name] += 1
            errors = list(validator(name).iter_errors(target))
            if errors:
                violations.append(f"{name}: {errors[0].message[:200]} in {str(wire)[:300]}")
        violations.extend(_check_related_task_rules(wire, method))
    assert not violations, "\n".join(violations[:20])
    # The check covered the task messages, not only pings.
    for name in ("#CreateTaskResult", "GetTaskRequest", "#GetTaskResult",
                 "TaskStatusNotification", "#CallToolResult", "CreateMessageRequest",
                 "ElicitRequest", "#ListTasksResult",
                 "#ListResourcesResult", "#ListResourceTemplatesResult", "#ReadResourceResult",
                 "#ListPromptsResult", "#GetPromptResult", "#CompleteResult", "#ListRootsResult",
                 "ListRootsRequest", "SubscribeRequest", "SetLevelRequest", "CompleteRequest",
                 "LoggingMessageNotification", "ResourceUpdatedNotification",
                 "ToolListChangedNotification", "RootsListChangedNotification",
                 "ElicitationCompleteNotification"):
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


def test_schema_checker_catches_a_bad_message(schema: dict[str, Any]) -> None:
    """The validation above can fail: a Task without ttl is rejected."""
    ref = {"$ref": "#/$defs/Task", "$defs": schema["$defs"]}
    cls = jsonschema.validators.validator_for(schema)
    bad = {"taskId": "t", "status": "working", "createdAt": "x", "lastUpdatedAt": "x"}
    with pytest.raises(jsonschema.ValidationError):
        cls(ref).validate(bad)
    assert _check_related_task_rules(
        {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}, "tasks/result"
    )


def _schema_2026() -> dict[str, Any]:
    from .test_modern_server import SCHEMA_2026

    loaded: dict[str, Any] = json.loads(SCHEMA_2026.read_text(encoding="utf-8"))
    return loaded
