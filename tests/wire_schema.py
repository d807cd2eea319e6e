"""The schema check every test gets: each message an in-process trio_mcp peer sends must
validate against the official MCP JSON Schema of its era, ``spec/schema-2025-11-25.json``,
or ``spec/schema-2026-07-28.json`` (and the tasks extension's ``spec/schema-ext-tasks-draft.json``)
for the messages of the modern era (a result with ``resultType``, a request with the
per-request ``_meta``, the methods only 2026-07-28 has, a notification of a subscription).

``conftest.py`` records what each test's peers send (client and server roles, over memory,
stdio and WebSocket, and to the foreign implementations in the interop tests) and checks it
with :func:`check_sent` when the test ends: a violation fails that test, at teardown, with
the message that broke the schema. So the check needs no test order and holds under
pytest-xdist. ``tests/test_wire_schema.py`` shows it covers the task and feature messages.

One documented exception: JSON-RPC 2.0 (section 5) requires ``"id": null`` in the error
response to input whose id cannot be read (parse errors), but the MCP schema's ``RequestId``
cannot be null. Such responses are validated with the null id removed; everything else must
validate as sent.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterable
from functools import cache
from typing import Any

import jsonschema

import trio_mcp

from .helpers import SCHEMA_PATH
from .modern_wire import (
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
RELATED = trio_mcp.RELATED_TASK_META
#: 2025-11-25: method -> the schema's definition of its result.
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


def is_modern(wire: dict[str, Any]) -> bool:
    """Whether ``wire`` is a message of the 2026-07-28 era (errors are the same in both)."""
    if "result" in wire:
        return "resultType" in wire["result"]
    if "method" in wire:
        meta = (wire.get("params") or {}).get("_meta") or {}
        return wire["method"] in MODERN_ONLY or PV in meta or SUBSCRIPTION in meta
    return False


def related_task_problems(wire: dict[str, Any], method: str | None) -> list[str]:
    """What ``wire`` (answering ``method``) breaks of the 2025-11-25 tasks page's rules on
    the related-task ``_meta`` key."""
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


class WireSchema:
    """The validators of both eras' schemas, each definition's compiled once."""

    def __init__(self) -> None:
        self.schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
        #: 2025-11-25: method -> the definition of its request or notification.
        self.by_method = self._methods(self.schema)
        from .modern_wire import SCHEMA_2026

        #: 2026-07-28: the same.
        self.modern_by_method = self._methods(
            json.loads(SCHEMA_2026.read_text(encoding="utf-8")))
        self._validators: dict[str, jsonschema.protocols.Validator] = {}

    @staticmethod
    def _methods(schema: dict[str, Any]) -> dict[str, str]:
        return {
            method: name for name, definition in schema["$defs"].items()
            if (method := definition.get("properties", {}).get("method", {}).get("const"))
        }

    def validator(self, name: str) -> jsonschema.protocols.Validator:
        """The 2025-11-25 validator of definition ``name`` (a leading ``#``: of a result)."""
        if name not in self._validators:
            dialect = self.schema.get("$schema", "https://json-schema.org/draft/2020-12/schema")
            ref = {"$schema": dialect, "$ref": f"#/$defs/{name.lstrip('#')}",
                   "$defs": self.schema["$defs"]}
            self._validators[name] = jsonschema.validators.validator_for(ref)(ref)
        return self._validators[name]

    def definitions(self, wire: dict[str, Any], method: str | None) -> list[str]:
        """The 2025-11-25 definitions ``wire`` (answering ``method``) must satisfy; a leading
        ``#`` marks one that its ``result`` must."""
        if "method" in wire:
            name = self.by_method.get(wire["method"])
            return [name] if name else ["JSONRPCRequest" if "id" in wire else "JSONRPCNotification"]
        if "error" in wire:
            return ["JSONRPCErrorResponse"]
        names = ["JSONRPCResultResponse"]
        result = wire["result"]
        if method in ("tools/call", "sampling/createMessage", "elicitation/create") \
                and "task" in result:
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

    def _check_modern(self, wire: dict[str, Any], method: str | None) -> None:
        if "method" in wire and "id" in wire:  # a client's request
            conforms("JSONRPCRequest", wire)
            if wire["method"] in self.modern_by_method:
                conforms(self.modern_by_method[wire["method"]], wire)
            elif wire["method"] in TASK_REQUEST_DEF:
                conforms_tasks(TASK_REQUEST_DEF[wire["method"]], wire)
            return
        validate_modern(wire, method)

    def check(
        self, sent: Iterable[tuple[dict[str, Any], str | None]]
    ) -> tuple[list[str], Counter[str]]:
        """Validate each sent ``(message, method answered)``.

        Returns:
            The violations, and how many messages were checked against each definition
            (``"2026-07-28"`` counts the modern era's).
        """
        violations: list[str] = []
        kinds: Counter[str] = Counter()
        for wire, method in sent:
            if is_modern(wire):
                kinds["2026-07-28"] += 1
                try:
                    self._check_modern(wire, method)
                except AssertionError as problem:
                    violations.append(f"2026-07-28: {str(problem)[:300]}")
                continue
            wire = copy.deepcopy(wire)
            if "error" in wire and wire.get("id") is None:
                del wire["id"]  # JSON-RPC 2.0 section 5: see the module docstring
            for name in self.definitions(wire, method):
                target = wire["result"] if name.startswith("#") else wire
                kinds[name] += 1
                errors = list(self.validator(name).iter_errors(target))
                if errors:
                    violations.append(f"{name}: {errors[0].message[:200]} in {str(wire)[:300]}")
            violations.extend(related_task_problems(wire, method))
        return violations, kinds


@cache
def wire_schema() -> WireSchema:
    """The one :class:`WireSchema` of this process."""
    return WireSchema()


def check_sent(recorded: Iterable[tuple[str, dict[str, Any], str | None]]) -> None:
    """Assert every message ``recorded`` as sent validates (``conftest.RECORDED``'s shape)."""
    sent = [(wire, method) for direction, wire, method in recorded if direction == "sent"]
    if not sent:
        return
    violations, _ = wire_schema().check(sent)
    assert not violations, (
        f"{len(violations)} message(s) sent by this test break the official schema "
        "(tests/wire_schema.py):\n" + "\n".join(violations[:20])
    )
