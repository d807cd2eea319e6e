"""What the tests of the 2026-07-28 dialect share: the official schemas' validators
(``validate_modern``, ``conforms``, ``conforms_tasks``), the raw stdio ``Server`` running
``examples/everything_server.py``, and the request and answer helpers.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache
from typing import Any

import jsonschema
import trio

from tests.helpers import EXAMPLES, SCHEMA_2026_PATH, SCHEMA_EXT_TASKS_PATH
from tests.raw import READ_TIMEOUT, _StdioRaw, stdio_server

EVERYTHING_SERVER = EXAMPLES / "everything_server.py"
SCHEMA_2026 = SCHEMA_2026_PATH
#: The tasks extension's own schema (its messages are not in the core one).
SCHEMA_TASKS = SCHEMA_EXT_TASKS_PATH
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUB_ID = "io.modelcontextprotocol/subscriptionId"
ALL_CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}

#: Method -> the schema's response definition (result envelope + result).
RESPONSE_DEF = {
    "server/discover": "DiscoverResultResponse",
    "tools/list": "ListToolsResultResponse",
    "tools/call": "CallToolResultResponse",
    "prompts/list": "ListPromptsResultResponse",
    "prompts/get": "GetPromptResultResponse",
    "resources/list": "ListResourcesResultResponse",
    "resources/templates/list": "ListResourceTemplatesResultResponse",
    "resources/read": "ReadResourceResultResponse",
    "completion/complete": "CompleteResultResponse",
    "subscriptions/listen": "SubscriptionsListenResultResponse",
}
#: Method -> the schema's definition of its complete result.
RESULT_DEF = {
    "server/discover": "DiscoverResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "completion/complete": "CompleteResult",
    "subscriptions/listen": "SubscriptionsListenResult",
}
#: The tasks extension: method -> its result's and request's definitions (SCHEMA_TASKS).
TASK_RESULT_DEF = {
    "tasks/get": "GetTaskResult", "tasks/update": "UpdateTaskResult",
    "tasks/cancel": "CancelTaskResult",
}
TASK_REQUEST_DEF = {
    "tasks/get": "GetTaskRequest", "tasks/update": "UpdateTaskRequest",
    "tasks/cancel": "CancelTaskRequest",
}
#: JSON-RPC error code -> the schema's definition of that error (response or object).
ERROR_DEF = {
    -32021: ("response", "MissingRequiredClientCapabilityError"),
    -32022: ("response", "UnsupportedProtocolVersionError"),
    -32602: ("error", "InvalidParamsError"),
    -32601: ("error", "MethodNotFoundError"),
}
#: Notification method -> the schema's definition.
NOTIFICATION_DEF = {
    "notifications/message": "LoggingMessageNotification",
    "notifications/progress": "ProgressNotification",
    "notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
    "notifications/tools/list_changed": "ToolListChangedNotification",
    "notifications/prompts/list_changed": "PromptListChangedNotification",
    "notifications/resources/list_changed": "ResourceListChangedNotification",
    "notifications/resources/updated": "ResourceUpdatedNotification",
}


@cache
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_2026.read_text())
    return schema


@cache
def _tasks_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_TASKS.read_text())
    return schema


def conforms_tasks(name: str, value: Any) -> None:
    """Assert ``value`` is valid as the tasks extension schema's ``name`` definition."""
    errors = sorted(_validator(name, True).iter_errors(value), key=lambda e: list(e.path))
    assert not errors, f"not a valid {name}: {errors[0].message} at {list(errors[0].path)}\n" \
                       f"{json.dumps(value)[:2000]}"


@cache
def _validator(name: str, tasks: bool = False) -> jsonschema.protocols.Validator:
    schema = _tasks_schema() if tasks else _schema()
    dialect = schema.get("$schema", "https://json-schema.org/draft/2020-12/schema")
    ref = {"$schema": dialect, "$ref": f"#/$defs/{name}", "$defs": schema["$defs"]}
    cls = jsonschema.validators.validator_for(ref)
    assert cls is jsonschema.Draft202012Validator
    return cls(ref)


def conforms(name: str, value: Any) -> None:
    """Assert ``value`` is valid as the schema's ``name`` definition."""
    errors = sorted(_validator(name).iter_errors(value), key=lambda e: list(e.path))
    assert not errors, f"not a valid {name}: {errors[0].message} at {list(errors[0].path)}\n" \
                       f"{json.dumps(value)[:2000]}"


def validate_modern(msg: dict[str, Any], method: str | None) -> None:
    """Validate one server message of the modern era (``method``: of the request answered)."""
    if "method" in msg:
        assert "id" not in msg, f"a modern server sent a request: {msg}"
        conforms("JSONRPCNotification", msg)
        if msg["method"] == "notifications/tasks":
            conforms_tasks("TaskStatusNotification", msg)
        else:
            conforms(NOTIFICATION_DEF[msg["method"]], msg)
        return
    if "error" in msg:
        conforms("JSONRPCErrorResponse", msg)
        kind, name = ERROR_DEF.get(msg["error"]["code"], ("error", "Error"))
        conforms(name, msg if kind == "response" else msg["error"])
        return
    conforms("JSONRPCResultResponse", msg)
    assert method is not None
    result = msg["result"]
    if method in TASK_RESULT_DEF:
        conforms_tasks(TASK_RESULT_DEF[method], result)
        return
    if result.get("resultType") == "task":
        assert method == "tools/call", msg  # SEP-2663: only tools/call becomes a task
        conforms_tasks("CreateTaskResult", result)
        return
    conforms(RESPONSE_DEF[method], msg)
    if result.get("resultType") == "input_required":
        conforms("InputRequiredResult", result)
    else:
        assert result.get("resultType") == "complete", result
        conforms(RESULT_DEF[method], result)


def meta(caps: dict[str, Any] | None = None, /, **extra: Any) -> dict[str, Any]:
    """A modern request's ``_meta``: version, capabilities (all three by default), client info."""
    out = {PV: MODERN, CAPS: ALL_CAPS if caps is None else caps,
           INFO: {"name": "raw-modern", "version": "0"}}
    out.update(extra)
    return out


def accept(**content: Any) -> dict[str, Any]:
    """An ``ElicitResult`` accepting ``content``."""
    return {"action": "accept", "content": content}


def sampled(text: str) -> dict[str, Any]:
    """A ``CreateMessageResult`` with ``text``."""
    return {"role": "assistant", "content": {"type": "text", "text": text},
            "model": "test-model", "stopReason": "endTurn"}


ROOTS = {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}


def text_of(response: dict[str, Any]) -> str:
    """The text of a tools/call or prompts/get result's only content block."""
    result = response["result"]
    if "messages" in result:
        (message,) = result["messages"]
        return str(message["content"]["text"])
    (block,) = result["content"]
    return str(block["text"])


def form(field: str, kind: str = "string") -> dict[str, Any]:
    return {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}


class Server:
    """A raw stdio connection to the everything server; validates the modern era's messages."""

    def __init__(self, raw: _StdioRaw) -> None:
        self.raw = raw
        #: Validate what arrives against the 2026-07-28 schema (off for a 2025 session).
        self.modern = True
        self.chose_modern = False
        self.methods: dict[Any, str] = {}
        self.seen: list[dict[str, Any]] = []  # notifications received, in order
        self._next = 0

    def next_id(self) -> int:
        self._next += 1
        return self._next

    async def send(self, msg: dict[str, Any]) -> None:
        if "id" in msg and "method" in msg:
            self.methods[msg["id"]] = msg["method"]
            modern_meta = PV in ((msg.get("params") or {}).get("_meta") or {})
            if modern_meta and msg["method"] != "server/discover":
                self.chose_modern = True
            elif msg["method"] == "initialize" and not self.chose_modern:
                self.modern = False  # this connection is a 2025-11-25 session
        await self.raw.send(msg)

    async def recv(self, timeout: float = READ_TIMEOUT) -> dict[str, Any]:
        msg = await self.raw.recv(timeout)
        if self.modern:
            validate_modern(msg, self.methods.get(msg.get("id")))
        if "method" in msg and "id" not in msg:
            self.seen.append(msg)
        return msg

    async def request(
        self, method: str, params: dict[str, Any] | None = None, request_id: Any = None
    ) -> dict[str, Any]:
        """Send a request; return its response (notifications meanwhile go to ``seen``)."""
        request_id = self.next_id() if request_id is None else request_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)
        while True:
            got = await self.recv()
            if "method" not in got and got.get("id") == request_id:
                return got
            assert "method" in got, f"an unexpected response: {got}"

    async def call(self, name: str, arguments: dict[str, Any] | None = None,
                   _meta: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
        """A modern ``tools/call`` (``params``: ``inputResponses``, ``requestState``...)."""
        return await self.request("tools/call", {
            "_meta": meta() if _meta is None else _meta, "name": name,
            "arguments": {} if arguments is None else arguments, **params,
        })

    async def quiet(self, seconds: float = 0.3) -> list[dict[str, Any]]:
        """Whatever arrives in ``seconds`` (nothing, when the server is idle)."""
        got: list[dict[str, Any]] = []
        with trio.move_on_after(seconds):
            while True:
                got.append(await self.recv(seconds + 1))
        return got


@asynccontextmanager
async def everything() -> AsyncIterator[Server]:
    """``examples/everything_server.py`` as a subprocess, spoken to over raw stdio."""
    async with stdio_server([sys.executable, str(EVERYTHING_SERVER)]) as raw:
        yield Server(raw)


def input_required(response: dict[str, Any]) -> dict[str, Any]:
    """The ``input_required`` result of ``response`` (asserted)."""
    assert "result" in response, response
    result: dict[str, Any] = response["result"]
    assert result["resultType"] == "input_required", result
    assert isinstance(result["requestState"], str) and result["requestState"]
    assert SERVER_INFO in result["_meta"]
    return result


def error_code(response: dict[str, Any]) -> int:
    assert "error" in response, response
    code: int = response["error"]["code"]
    return code
