"""The tasks extension of MCP 2026-07-28 (``io.modelcontextprotocol/tasks``) on the wire.

Every test runs ``examples/everything_server.py`` as a real subprocess over
stdio and speaks raw JSON-RPC to it, with the tools the official conformance
suite's ``tasks-*`` scenarios call (``greet``, ``slow_compute``,
``failing_job``, ``protocol_error_job``, ``confirm_delete``, ``multi_input``,
``test_tool_with_task``) and ``confirm_twice``. Each test pins MUSTs of the extension's specification
(repository ``modelcontextprotocol/ext-tasks``, ``specification/draft/tasks.md`` at
``e434597``, quoted as "ext-tasks §Section: ...") and
every message of the extension (``CreateTaskResult``, ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` and their results, ``inputRequests``) is
validated against its schema (``spec/schema-ext-tasks-draft.json``);
every other 2026-07-28 message against the core schema (as in
``test_modern_server.py``). The same tools are then driven as 2025-11-25 tasks
(``task: {ttl}``, ``tasks/get|result|list|cancel``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache
from typing import Any

import jsonschema
import pytest
import trio

from tests.helpers import SCHEMA_EXT_TASKS_PATH
from tests.modern_wire import (
    ALL_CAPS,
    LEGACY,
    SERVER_INFO,
    Server,
    accept,
    conforms,
    error_code,
    everything,
    meta,
    text_of,
    validate_modern,
)
from tests.raw import READ_TIMEOUT

SCHEMA_EXT_TASKS = SCHEMA_EXT_TASKS_PATH
TASKS = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"
#: A request's capabilities declaring the extension (and the three client capabilities).
EXT_CAPS: dict[str, Any] = {**ALL_CAPS, "extensions": {TASKS: {}}}
#: Method -> the extension schema's definitions of its request and of its result.
TASK_METHODS = {
    "tasks/get": ("GetTaskRequest", "GetTaskResult"),
    "tasks/update": ("UpdateTaskRequest", "UpdateTaskResult"),
    "tasks/cancel": ("CancelTaskRequest", "CancelTaskResult"),
}
#: The fields of a task; none may appear on an acknowledgement.
TASK_FIELDS = {"taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttlMs",
               "pollIntervalMs", "result", "error", "inputRequests"}
TERMINAL = ("completed", "failed", "cancelled")


@cache
def _ext_validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_EXT_TASKS.read_text())
    ref = {"$schema": schema["$schema"], "$ref": f"#/$defs/{name}", "$defs": schema["$defs"]}
    cls = jsonschema.validators.validator_for(ref)
    assert cls is jsonschema.Draft202012Validator
    return cls(ref)


def ext_conforms(name: str, value: Any) -> None:
    """Assert ``value`` is valid as the extension schema's ``name`` definition."""
    errors = sorted(_ext_validator(name).iter_errors(value), key=lambda e: list(e.path))
    assert not errors, f"not a valid {name}: {errors[0].message} at {list(errors[0].path)}\n" \
                       f"{json.dumps(value)[:2000]}"


def validate_tasks(msg: dict[str, Any], method: str | None) -> None:
    """Validate one server message: the extension's by its schema, the rest as core 2026."""
    result = msg.get("result")
    if method == "tools/call" and isinstance(result, dict) and result.get("resultType") == "task":
        conforms("JSONRPCResultResponse", msg)
        ext_conforms("CreateTaskResult", result)
        assert set(result) <= TASK_FIELDS - {"result", "error", "inputRequests"} | {
            "resultType", "_meta"}, result
        return
    if method in TASK_METHODS and "error" not in msg:
        conforms("JSONRPCResultResponse", msg)
        ext_conforms(TASK_METHODS[method][1], result)
        assert result["resultType"] == "complete", result
        assert SERVER_INFO in result["_meta"], result
        if method == "tasks/get":
            ext_conforms("DetailedTask", result)
            detailed_fields(result)
        else:  # an acknowledgement: an empty result
            assert set(result) == {"resultType", "_meta"}, result
        return
    validate_modern(msg, method)


def detailed_fields(task: dict[str, Any]) -> None:
    """ext-tasks §Task Polling: each status carries its own fields, and only those."""
    status = task["status"]
    assert ("inputRequests" in task) == (status == "input_required"), task
    assert ("result" in task) == (status == "completed"), task
    assert ("error" in task) == (status == "failed"), task
    if status == "input_required":
        ext_conforms("InputRequests", task["inputRequests"])
    if status == "completed":
        assert isinstance(task["result"]["content"], list), task
        assert RELATED not in task["result"].get("_meta", {}), task


class TasksServer(Server):
    """:class:`Server` validating the extension's messages against its schema."""

    async def send(self, msg: dict[str, Any], *, valid: bool = True) -> None:
        method = msg.get("method")
        if valid and method in TASK_METHODS and "id" in msg:
            ext_conforms(TASK_METHODS[method][0], msg)
        await super().send(msg)

    async def recv(self, timeout: float = READ_TIMEOUT) -> dict[str, Any]:
        msg = await self.raw.recv(timeout)
        if self.modern:
            validate_tasks(msg, self.methods.get(msg.get("id")))
        if "method" in msg and "id" not in msg:
            self.seen.append(msg)
        return msg

    async def unchecked(self, method: str, params: dict[str, Any],
                        valid: bool = False) -> dict[str, Any]:
        """A request (validated against the extension schema only if ``valid``); its answer."""
        request_id = self.next_id()
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method,
                         "params": params}, valid=valid)
        while True:
            got = await self.recv()
            if "method" not in got and got.get("id") == request_id:
                return got

    async def task_request(self, method: str, task_id: str, caps: dict[str, Any] | None = None,
                           valid: bool = True, **params: Any) -> dict[str, Any]:
        """``tasks/get|update|cancel`` of ``task_id`` (declaring the extension by default)."""
        return await self.unchecked(method, {
            "_meta": meta(EXT_CAPS if caps is None else caps), "taskId": task_id, **params,
        }, valid=valid)

    async def get(self, task_id: str) -> dict[str, Any]:
        """``tasks/get``: the detailed task (asserted a result)."""
        response = await self.task_request("tasks/get", task_id)
        assert "result" in response, response
        task: dict[str, Any] = response["result"]
        assert task["taskId"] == task_id
        return task

    async def start(self, name: str, arguments: dict[str, Any] | None = None,
                    **params: Any) -> dict[str, Any]:
        """A ``tools/call`` declaring the extension, answered by a ``CreateTaskResult``."""
        response = await self.call(name, arguments, _meta=meta(EXT_CAPS), **params)
        assert "result" in response, response
        created: dict[str, Any] = response["result"]
        assert created["resultType"] == "task", created
        return created

    async def wait_for(self, task_id: str, *statuses: str, timeout: float = 10) -> dict[str, Any]:
        """Poll ``tasks/get`` until the task is in one of ``statuses`` (or terminal)."""
        with trio.fail_after(timeout):
            while True:
                task = await self.get(task_id)
                if task["status"] in statuses or task["status"] in TERMINAL:
                    return task
                await trio.sleep(0.05)


@asynccontextmanager
async def tasks_server() -> AsyncIterator[TasksServer]:
    """The everything server over stdio, spoken to by a :class:`TasksServer`."""
    async with everything() as plain:
        yield TasksServer(plain.raw)


def ack(response: dict[str, Any]) -> None:
    """ext-tasks §Task Update Requests / §Task Cancellation: "the server MUST acknowledge the
    request with an empty result", with ``resultType: "complete"``."""
    assert "result" in response, response
    result = response["result"]
    assert result["resultType"] == "complete" and not set(result) & TASK_FIELDS, result


def missing_extension(response: dict[str, Any]) -> None:
    """-32021 naming the extension in ``data.requiredCapabilities``."""
    assert error_code(response) == -32021, response
    assert response["error"]["data"]["requiredCapabilities"]["extensions"] == {TASKS: {}}


# --- the validator --------------------------------------------------------------------------


def test_the_extension_validator_has_teeth() -> None:
    """The extension schema check rejects a 2025-style nested ``task``, a ``ttl`` instead of
    ``ttlMs``, a completed task without ``result`` and a failed one without ``error``; and
    the status-specific check rejects a working task carrying a result."""
    task = {"taskId": "t", "status": "working", "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttlMs": 1000}
    ext_conforms("CreateTaskResult", {**task, "resultType": "task"})
    with pytest.raises(AssertionError):
        ext_conforms("CreateTaskResult", {"resultType": "task", "task": task})
    legacy = {k: v for k, v in task.items() if k != "ttlMs"} | {"ttl": 1000}
    with pytest.raises(AssertionError):
        ext_conforms("CreateTaskResult", {**legacy, "resultType": "task"})
    with pytest.raises(AssertionError):
        ext_conforms("GetTaskResult", {**task, "status": "completed", "resultType": "complete"})
    with pytest.raises(AssertionError):
        ext_conforms("DetailedTask", {**task, "status": "failed"})
    with pytest.raises(AssertionError):
        detailed_fields({**task, "result": {"content": []}})
    with pytest.raises(AssertionError):
        ext_conforms("UpdateTaskResult", {})


# --- capability negotiation -----------------------------------------------------------------


@pytest.mark.parametrize("tool", ["failing_job", "protocol_error_job", "confirm_delete",
                                  "multi_input", "confirm_twice"])
async def test_required_tool_without_the_extension_is_32021(tool: str) -> None:
    """ext-tasks §Capability Negotiation: "If a server is unable to service a request to a
    client that does not declare this extension capability without returning
    CreateTaskResult, the server MUST return an error with the code -32021 (Missing
    Required Client Capability), indicating the required extension in the error
    response" -- also when the request carries a 2025-style ``task`` (the client does not
    choose) and when an earlier request on the connection declared the extension ("MUST NOT
    return CreateTaskResult to a client that did not include the extension capability on
    its request, regardless of prior declarations")."""
    arguments = {"filename": "x"} if tool == "confirm_delete" else {}
    async with tasks_server() as server:
        missing_extension(await server.call(tool, arguments))
        missing_extension(await server.call(tool, arguments, task={"ttl": 60000}))
        created = await server.start("slow_compute", {"seconds": 0})
        assert created["taskId"]
        missing_extension(await server.call(tool, arguments, _meta=meta({})))


async def test_optional_tool_without_the_extension_is_a_plain_result() -> None:
    """ext-tasks §Capability Negotiation: "A server MUST NOT return CreateTaskResult to a
    client that did not include the extension capability on its request, regardless of
    prior declarations": ``slow_compute`` (task support optional) answers its
    ``CallToolResult`` (``resultType: "complete"``), also after a request that declared the
    extension, and also with a 2025-style ``task`` in its params."""
    async with tasks_server() as server:
        plain = await server.call("slow_compute", {"seconds": 0})
        assert plain["result"]["resultType"] == "complete" and "taskId" not in plain["result"]
        assert text_of(plain) == "slow_compute done after 0s"
        await server.start("slow_compute", {"seconds": 0})
        again = await server.call("slow_compute", {"seconds": 0, "label": "again"},
                                  task={"ttl": 60000})
        assert again["result"]["resultType"] == "complete" and "taskId" not in again["result"]
        assert text_of(again) == "slow_compute done after 0s (again)"


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_task_methods_without_the_extension_are_32021(method: str) -> None:
    """ext-tasks §Error Handling: "Servers MUST return this error [-32021] for non-declaring
    clients issuing tasks/get, tasks/update, and tasks/cancel requests" -- for an unknown
    task and for a real one the same connection created with the extension declared (which
    keeps running: the refused tasks/cancel did not cancel it)."""
    extra = {"inputResponses": {}} if method == "tasks/update" else {}
    async with tasks_server() as server:
        missing_extension(await server.task_request(method, "no-such-task", ALL_CAPS, **extra))
        created = await server.start("slow_compute", {"seconds": 30})
        task_id = created["taskId"]
        missing_extension(await server.task_request(method, task_id, ALL_CAPS, **extra))
        missing_extension(await server.task_request(method, task_id, {}, **extra))
        assert (await server.get(task_id))["status"] == "working"
        ack(await server.task_request("tasks/cancel", task_id))


async def test_discover_advertises_the_extension_not_core_tasks() -> None:
    """ext-tasks §Capability Negotiation: the server declares the extension in
    ``server/discover``'s ``capabilities.extensions`` (an empty object); the 2025-11-25
    ``capabilities.tasks`` is not the extension's."""
    async with tasks_server() as server:
        response = await server.request("server/discover", {"_meta": meta(EXT_CAPS)})
        caps = response["result"]["capabilities"]
        assert caps["extensions"][TASKS] == {}
        assert "tasks" not in caps


# --- task creation ---------------------------------------------------------------------------


async def test_create_task_result_is_flat_and_durable() -> None:
    """ext-tasks §Task Creation: ``CreateTaskResult = Result & Task`` -- ``resultType:
    "task"`` ("Servers MUST set resultType to "task" when returning a CreateTaskResult"),
    the task's fields at the top level (``ttlMs`` and ``pollIntervalMs`` integer ms, no
    2025 ``task``/``ttl``/``pollInterval``, no MRTR ``requestState``); and "A server MUST
    NOT return CreateTaskResult until the task is durably created -- that is, until a
    tasks/get for the returned taskId would resolve" (asked at once)."""
    async with tasks_server() as server:
        created = await server.start("slow_compute", {"seconds": 30, "label": "create"})
        assert created["status"] == "working"
        assert isinstance(created["ttlMs"], int) and created["ttlMs"] > 0
        assert isinstance(created["pollIntervalMs"], int) and created["pollIntervalMs"] > 0
        assert not {"task", "ttl", "pollInterval", "requestState"} & set(created)
        assert SERVER_INFO in created["_meta"]
        task = await server.get(created["taskId"])
        assert task["status"] == "working"
        assert task["createdAt"] == created["createdAt"] and task["ttlMs"] == created["ttlMs"]
        ack(await server.task_request("tasks/cancel", created["taskId"]))
        other = await server.start("slow_compute", {"seconds": 0})
        assert other["taskId"] != created["taskId"]


async def test_result_type_task_only_on_create_task_result() -> None:
    """ext-tasks §Polymorphic Results: "Servers MUST NOT set resultType to "task" on result
    types other than CreateTaskResult": a forbidden tool (``greet``), ``tools/list`` and
    every ``tasks/*`` answer are ``complete``; tools/list shows no core
    ``execution.taskSupport`` (tasks are an extension in this revision)."""
    async with tasks_server() as server:
        greeting = await server.call("greet", {"name": "World"}, _meta=meta(EXT_CAPS))
        assert greeting["result"]["resultType"] == "complete"
        assert text_of(greeting) == "Hello, World!"
        listed = await server.request("tools/list", {"_meta": meta(EXT_CAPS)})
        assert listed["result"]["resultType"] == "complete"
        tools = {t["name"]: t for t in listed["result"]["tools"]}
        assert {"greet", "slow_compute", "failing_job", "protocol_error_job", "confirm_delete",
                "multi_input", "test_tool_with_task"} <= set(tools)
        assert all("execution" not in t for t in tools.values())
        created = await server.start("slow_compute", {"seconds": 0})
        task = await server.wait_for(created["taskId"])
        assert task["resultType"] == "complete"


async def test_params_task_is_ignored_on_modern_requests() -> None:
    """ext-tasks §Capability Negotiation: "The server is the sole decider; clients do not
    signal task preference on the request itself": a 2025-style ``params.task`` neither makes
    a forbidden tool a task (``greet`` answers, no error) nor sets the task's TTL."""
    async with tasks_server() as server:
        greeting = await server.call("greet", {"name": "legacy"}, _meta=meta(EXT_CAPS),
                                     task={"ttl": 60000, "pollInterval": 100})
        assert greeting["result"]["resultType"] == "complete" and "taskId" not in \
            greeting["result"]
        assert text_of(greeting) == "Hello, legacy!"
        plain = await server.start("slow_compute", {"seconds": 0})
        hinted = await server.start("slow_compute", {"seconds": 0}, task={"ttl": 1234})
        assert hinted["ttlMs"] == plain["ttlMs"] != 1234


# --- tasks/get ------------------------------------------------------------------------------


async def test_get_working_then_completed_with_the_result() -> None:
    """ext-tasks §Task Polling: "If the status is working, the server MUST return a Task
    object with status working"; "If the status is completed, the server MUST return a Task
    object with status completed and a result field containing the final result of the
    task"; "The resultType field MUST be set to "complete" on this object". The inlined
    result carries no 2025 related-task ``_meta`` (the taskId is at the root)."""
    async with tasks_server() as server:
        created = await server.start("slow_compute", {"seconds": 0.5, "label": "get"})
        working = await server.get(created["taskId"])
        assert working["status"] == "working"
        done = await server.wait_for(created["taskId"])
        assert done["status"] == "completed"
        assert done["result"] == {"content": [{"type": "text",
                                               "text": "slow_compute done after 0.5s (get)"}],
                                  "isError": False, "resultType": "complete"}
        assert done["lastUpdatedAt"] >= done["createdAt"]
        assert (await server.get(created["taskId"]))["result"] == done["result"]  # stays


async def test_tool_error_is_completed_with_is_error() -> None:
    """ext-tasks §Task Execution Errors: "The failed status MUST NOT be used to represent
    non-JSON-RPC errors, such as a tool result that completed with isError: true. Errors
    within the context of a protocol method result MUST use the completed status with the
    error details in the result field"."""
    async with tasks_server() as server:
        created = await server.start("failing_job")
        done = await server.wait_for(created["taskId"])
        assert done["status"] == "completed" and "error" not in done
        assert done["result"]["isError"] is True
        assert text_of({"result": done["result"]}) == "failing_job failed, as it always does"


async def test_protocol_error_is_failed_with_the_error() -> None:
    """ext-tasks §Task Execution Errors: "When the underlying request encounters a JSON-RPC
    protocol error during execution, the task moves to the failed status. The tasks/get
    response SHOULD include a statusMessage field with diagnostic information about the
    failure, and MUST include the error field with the JSON-RPC error" (and no result)."""
    async with tasks_server() as server:
        created = await server.start("protocol_error_job")
        failed = await server.wait_for(created["taskId"])
        assert failed["status"] == "failed" and "result" not in failed
        assert failed["error"] == {"code": -32603,
                                   "message": "protocol_error_job: internal error, on purpose"}
        assert "protocol_error_job" in failed["statusMessage"]


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_unknown_task_is_32602(method: str) -> None:
    """ext-tasks §Error Handling: "Invalid or nonexistent taskId: -32602 (Invalid params)
    -- Servers MUST return this error for tasks/get. Servers SHOULD return this error for
    tasks/update and tasks/cancel"."""
    extra = {"inputResponses": {}} if method == "tasks/update" else {}
    async with tasks_server() as server:
        response = await server.task_request(method, "tasks-conformance-nonexistent-1", **extra)
        assert error_code(response) == -32602


@pytest.mark.parametrize("params", [
    {}, {"taskId": 7}, {"taskId": None},
])
@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel"])
async def test_malformed_task_id_is_32602(method: str, params: dict[str, Any]) -> None:
    """schema (GetTaskRequest, CancelTaskRequest): ``params.taskId`` is a required string;
    without one the request is invalid (-32602)."""
    async with tasks_server() as server:
        response = await server.unchecked(method, {"_meta": meta(EXT_CAPS), **params})
        assert error_code(response) == -32602


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
@pytest.mark.parametrize("caps", [EXT_CAPS, ALL_CAPS])
async def test_removed_methods_are_not_found(method: str, caps: dict[str, Any]) -> None:
    """ext-tasks §Task Polling and §Security Considerations: the result is inlined on
    tasks/get and "there is no tasks/list": both 2025-11-25 methods are -32601 (Method not
    found) in this revision, declared extension or not."""
    params = {"taskId": "tasks-conformance-isolation-probe"} if method == "tasks/result" else {}
    async with tasks_server() as server:
        response = await server.request(method, {"_meta": meta(caps), **params})
        assert error_code(response) == -32601


# --- questions: inputRequests and tasks/update -------------------------------------------


async def test_input_required_shows_the_question_and_update_answers_it() -> None:
    """ext-tasks §Task Polling: "If the status is input_required, the server MUST return a
    Task object with status input_required and an inputRequests field ... MUST contain all
    outstanding requests"; §Task Update Requests: "On success, the server MUST acknowledge
    the request with an empty result" (``resultType: "complete"``), and the task resumes."""
    async with tasks_server() as server:
        created = await server.start("confirm_delete", {"filename": "a.txt"})
        waiting = await server.wait_for(created["taskId"], "input_required")
        assert waiting["status"] == "input_required"
        assert waiting["inputRequests"] == {"confirm": {"method": "elicitation/create", "params": {
            "mode": "form", "message": "Delete a.txt?",
            "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}},
                                "required": ["confirm"]}}}}
        assert (await server.get(created["taskId"]))["inputRequests"] == \
            waiting["inputRequests"]  # shown until answered
        ack(await server.task_request("tasks/update", created["taskId"],
                                      inputResponses={"confirm": accept(confirm=True)}))
        done = await server.wait_for(created["taskId"], "completed")
        assert done["status"] == "completed"
        assert text_of({"result": done["result"]}) == "Deleted a.txt"


async def test_update_ignores_unknown_keys_and_takes_partial_answers() -> None:
    """ext-tasks §Task Update Requests: keys let "servers ignore inputResponses for unknown
    or already-satisfied requests" (an unknown key is acked and answers nothing); answering
    one of two outstanding questions is acked, the task stays ``input_required`` and shows
    only the other; answering the satisfied key again changes nothing."""
    async with tasks_server() as server:
        created = await server.start("multi_input")
        task_id = created["taskId"]
        with trio.fail_after(10):
            while True:
                waiting = await server.wait_for(task_id, "input_required")
                if len(waiting.get("inputRequests", {})) == 2:
                    break
                await trio.sleep(0.05)
        assert set(waiting["inputRequests"]) == {"first", "second"}
        ack(await server.task_request("tasks/update", task_id, valid=False,
                                      inputResponses={"unknown-key": {"ignored": True}}))
        assert set((await server.get(task_id))["inputRequests"]) == {"first", "second"}
        ack(await server.task_request("tasks/update", task_id,
                                      inputResponses={"first": accept(name="A")}))
        after_first = await server.get(task_id)
        assert after_first["status"] == "input_required"
        assert set(after_first["inputRequests"]) == {"second"}
        ack(await server.task_request("tasks/update", task_id,
                                      inputResponses={"first": accept(name="again")}))
        assert set((await server.get(task_id))["inputRequests"]) == {"second"}
        ack(await server.task_request("tasks/update", task_id,
                                      inputResponses={"second": accept(name="B")}))
        done = await server.wait_for(task_id, "completed")
        assert text_of({"result": done["result"]}) == \
            "multi_input: first=accept:A, second=accept:B"
        ack(await server.task_request("tasks/update", task_id,  # terminal: still an ack
                                      inputResponses={"second": accept(name="late")}))


async def test_input_request_keys_are_unique_for_the_task_life() -> None:
    """ext-tasks §Task Update Requests: "Each request key in inputRequests MUST be unique over
    the lifetime of a single task. A server MUST NOT reuse a key for a subsequent
    server-to-client request after a response for that key has been delivered": the tool
    asks ``confirm`` twice in a row; the second question has another key, and the first
    key's answer sent again does not answer it."""
    async with tasks_server() as server:
        created = await server.start("confirm_twice")
        task_id = created["taskId"]
        first = await server.wait_for(task_id, "input_required")
        (first_key,) = first["inputRequests"]
        assert first_key == "confirm"
        ack(await server.task_request("tasks/update", task_id,
                                      inputResponses={first_key: accept(confirm=True)}))
        with trio.fail_after(10):
            while True:
                second = await server.wait_for(task_id, "input_required")
                if set(second.get("inputRequests", {})) - {first_key}:
                    break
                await trio.sleep(0.05)
        (second_key,) = second["inputRequests"]
        assert second_key != first_key
        assert second["inputRequests"][second_key]["params"]["message"] == "Really sure?"
        ack(await server.task_request("tasks/update", task_id,
                                      inputResponses={first_key: accept(confirm=False)}))
        assert set((await server.get(task_id))["inputRequests"]) == {second_key}
        ack(await server.task_request("tasks/update", task_id, inputResponses={
            second_key: {"action": "decline"}}))
        done = await server.wait_for(task_id, "completed")
        assert text_of({"result": done["result"]}) == "confirm_twice: accept, then decline"


@pytest.mark.parametrize("responses", [[], "x", {"confirm": "yes"}, {"confirm": None}])
async def test_malformed_input_responses_are_32602(responses: Any) -> None:
    """schema (UpdateTaskRequest): ``inputResponses`` is an object of responses (objects);
    anything else is invalid params (-32602), and the question stays outstanding."""
    async with tasks_server() as server:
        created = await server.start("confirm_delete", {"filename": "b.txt"})
        await server.wait_for(created["taskId"], "input_required")
        response = await server.task_request("tasks/update", created["taskId"], valid=False,
                                             inputResponses=responses)
        assert error_code(response) == -32602
        assert set((await server.get(created["taskId"]))["inputRequests"]) == {"confirm"}
        ack(await server.task_request("tasks/cancel", created["taskId"]))


# --- a multi round-trip prelude, then the task ----------------------------------------------


async def test_mrtr_prelude_then_the_task() -> None:
    """ext-tasks with MRTR (SEP-2663 commit 451f5e1, conformance ``tasks-mrtr-composition``):
    a task-required tool may gather input with ``input_required`` rounds before its task; the
    first round carries ``inputRequests`` and ``requestState`` but no ``taskId``; the final
    round is a ``CreateTaskResult`` carrying neither ``requestState`` nor ``inputRequests``;
    the task's result reflects the answer of the prelude. Without the extension declared
    the tool is still -32021 (it cannot be served without CreateTaskResult)."""
    async with tasks_server() as server:
        missing_extension(await server.call("test_tool_with_task"))
        first = await server.call("test_tool_with_task", _meta=meta(EXT_CAPS))
        round1 = first["result"]
        assert round1["resultType"] == "input_required" and "taskId" not in round1
        assert list(round1["inputRequests"]) == ["user_name"]
        assert round1["inputRequests"]["user_name"]["method"] == "elicitation/create"
        created = await server.start("test_tool_with_task", requestState=round1["requestState"],
                                     inputResponses={"user_name": accept(name="Alice")})
        assert not {"requestState", "inputRequests"} & set(created)
        done = await server.wait_for(created["taskId"])
        assert done["status"] == "completed"
        assert text_of({"result": done["result"]}) == "Hello, Alice! (from the task)"


# --- tasks/cancel ----------------------------------------------------------------------------


async def test_cancel_acks_a_running_task_which_ends_cancelled() -> None:
    """ext-tasks §Task Cancellation: "On success, the server MUST acknowledge the request
    with an empty result" (``resultType: "complete"``, no task fields); the status is then
    read with tasks/get ("If the status is cancelled, the server MUST return a Task object
    with status cancelled"): here ``cancelled``, without result or error."""
    async with tasks_server() as server:
        created = await server.start("slow_compute", {"seconds": 60, "label": "cancel"})
        ack(await server.task_request("tasks/cancel", created["taskId"]))
        cancelled = await server.wait_for(created["taskId"])
        assert cancelled["status"] == "cancelled"
        asking = await server.start("confirm_delete", {"filename": "c.txt"})
        await server.wait_for(asking["taskId"], "input_required")
        ack(await server.task_request("tasks/cancel", asking["taskId"]))
        assert (await server.wait_for(asking["taskId"]))["status"] == "cancelled"


async def test_cancel_acks_a_terminal_task() -> None:
    """ext-tasks §Task Cancellation: the ack is the answer to a known task whatever its
    status (the spec reserves -32602 for unknown ids; conformance
    ``tasks-cancel-terminal-idempotent-ack``), and cancelling a completed, failed or
    cancelled task changes nothing."""
    async with tasks_server() as server:
        completed = await server.start("slow_compute", {"seconds": 0})
        failed = await server.start("protocol_error_job")
        cancelled = await server.start("slow_compute", {"seconds": 60})
        ack(await server.task_request("tasks/cancel", cancelled["taskId"]))
        for created, status in ((completed, "completed"), (failed, "failed"),
                                (cancelled, "cancelled")):
            before = await server.wait_for(created["taskId"])
            assert before["status"] == status
            ack(await server.task_request("tasks/cancel", created["taskId"]))
            ack(await server.task_request("tasks/cancel", created["taskId"]))
            assert await server.get(created["taskId"]) == before


# --- the same tools as 2025-11-25 tasks -----------------------------------------------------


async def _initialize_2025(server: Server) -> dict[str, Any]:
    init = await server.request("initialize", {
        "protocolVersion": LEGACY, "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "raw-legacy", "version": "0"}}, request_id="init")
    assert init["result"]["protocolVersion"] == LEGACY
    await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    caps: dict[str, Any] = init["result"]["capabilities"]
    return caps


async def _task_2025(server: Server, name: str, arguments: dict[str, Any]) -> str:
    response = await server.request("tools/call", {"name": name, "arguments": arguments,
                                                   "task": {"ttl": 60000}})
    task = response["result"]["task"]
    assert task["status"] == "working" and task["ttl"] == 60000
    return str(task["taskId"])


async def test_the_same_tools_as_2025_tasks() -> None:
    """2025-11-25 tasks on the same fixture: the server declares ``tasks.requests.tools.call``
    and each tool's ``execution.taskSupport`` (greet none, slow_compute optional, the others
    required); a required tool without ``task`` and a forbidden one with it are -32601;
    ``task: {ttl}`` makes a task (``CreateTaskResult {task}``), read with tasks/get,
    tasks/result (the result, a tool error as ``isError``, a JSON-RPC error as the error)
    and tasks/list; tasks/cancel answers the cancelled task."""
    async with tasks_server() as server:
        caps = await _initialize_2025(server)
        assert caps["tasks"]["requests"]["tools"]["call"] == {}
        listed = await server.request("tools/list", {})
        support = {t["name"]: t.get("execution", {}).get("taskSupport")
                   for t in listed["result"]["tools"]}
        assert support["greet"] is None and support["slow_compute"] == "optional"
        for name in ("failing_job", "protocol_error_job", "confirm_delete", "multi_input",
                     "test_tool_with_task"):
            assert support[name] == "required", name
        required = await server.request("tools/call", {"name": "failing_job", "arguments": {}})
        assert error_code(required) == -32601
        forbidden = await server.request("tools/call", {
            "name": "greet", "arguments": {"name": "x"}, "task": {"ttl": 60000}})
        assert error_code(forbidden) == -32601
        plain = await server.request("tools/call", {"name": "slow_compute",
                                                    "arguments": {"seconds": 0}})
        assert text_of(plain) == "slow_compute done after 0s"

        slow = await _task_2025(server, "slow_compute", {"seconds": 0.2})
        got = await server.request("tasks/get", {"taskId": slow})
        assert got["result"]["taskId"] == slow and "resultType" not in got["result"]
        result = await server.request("tasks/result", {"taskId": slow})  # waits for the end
        assert text_of(result) == "slow_compute done after 0.2s"
        assert result["result"]["_meta"][RELATED] == {"taskId": slow}
        tool_error = await _task_2025(server, "failing_job", {})
        assert (await server.request("tasks/result", {"taskId": tool_error}))[
            "result"]["isError"] is True
        protocol = await _task_2025(server, "protocol_error_job", {})
        assert error_code(await server.request("tasks/result", {"taskId": protocol})) == -32603
        listed_tasks = await server.request("tasks/list", {})
        assert {slow, tool_error, protocol} <= {t["taskId"]
                                                for t in listed_tasks["result"]["tasks"]}
        long = await _task_2025(server, "slow_compute", {"seconds": 60})
        cancelled = await server.request("tasks/cancel", {"taskId": long})
        assert cancelled["result"]["taskId"] == long
        assert cancelled["result"]["status"] == "cancelled"
        assert (await server.request("tasks/get", {"taskId": long}))["result"][
            "status"] == "cancelled"


async def test_a_2025_task_question_is_a_request_to_the_client() -> None:
    """2025-11-25: a task's question is an ``elicitation/create`` request to the client
    (with the related-task ``_meta``), delivered while the client waits in tasks/result;
    ``multi_input`` asks its two at once; ``test_tool_with_task``'s prelude question is
    asked the same way (the whole tool is the task)."""
    async with tasks_server() as server:
        await _initialize_2025(server)
        for name, arguments, asked, expected in (
            ("confirm_delete", {"filename": "d.txt"}, 1, "Deleted d.txt"),
            ("multi_input", {}, 2, "multi_input: first=accept:N, second=accept:N"),
            ("test_tool_with_task", {}, 1, "Hello, N! (from the task)"),
        ):
            task_id = await _task_2025(server, name, arguments)
            request_id = server.next_id()
            await server.send({"jsonrpc": "2.0", "id": request_id, "method": "tasks/result",
                               "params": {"taskId": task_id}})
            questions = []
            while True:
                msg = await server.recv()
                if msg.get("id") == request_id and "method" not in msg:
                    break
                if msg.get("method") == "elicitation/create":
                    questions.append(msg)
                    assert msg["params"]["_meta"][RELATED] == {"taskId": task_id}
                    await server.send({"jsonrpc": "2.0", "id": msg["id"],
                                       "result": accept(confirm=True, name="N")})
            assert len(questions) == asked
            assert text_of(msg) == expected
