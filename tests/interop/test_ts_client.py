"""The TypeScript SDK's client (``@modelcontextprotocol/sdk`` 1.32.x) -> our example server.

``node/ts_client.mjs`` runs one scenario with the SDK's real ``Client`` against
``examples/task_server.py`` and reports what it saw, wire log included; each test below
checks one part of it. Three setups: the server spawned over stdio, and over WebSocket with
the SDK's ``WebSocketClientTransport``, without and with a bearer token.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from ..redis_server import require_redis, running_redis
from . import _support
from ._support import error_code, ok, related, text_of

pytestmark = pytest.mark.interop

SAMPLED = "sampled by the TS client"
TOKEN = "interop-token"


@pytest.fixture(scope="module", params=["stdio", "ws", "ws+token", "ws+token+redis"])
def report(request: pytest.FixtureRequest, node: str) -> Iterator[dict[str, Any]]:
    setup = request.param
    if setup == "stdio":
        yield _support.run_report([node, str(_support.TS_CLIENT), "stdio",
                                   *_support.our_server_command()])
        return
    port = _support.free_port()
    argv = [sys.executable, str(_support.TASK_SERVER), "--ws", f"127.0.0.1:{port}"]
    token = [TOKEN] if "token" in setup else []
    if token:
        argv += ["--token", TOKEN]
    with contextlib.ExitStack() as stack:
        if setup.endswith("+redis"):  # the same scenario with every task in a private Redis
            require_redis()
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="tsr"))
            argv += ["--store", stack.enter_context(running_redis(folder))]
        with _support.background_server(argv, port) as url:
            result = _support.run_report([node, str(_support.TS_CLIENT), "ws", url, *token])
    result["setup"] = setup
    yield result


def events(stream: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in stream if e["type"] == kind]


def test_initialize_and_tools_list(report: dict[str, Any]) -> None:
    assert report["server_info"]["name"] == "trio-mcp-example"
    caps = report["server_capabilities"]
    assert caps["tasks"]["requests"]["tools"]["call"] == {}
    assert "list" in caps["tasks"] and "cancel" in caps["tasks"]
    assert report["ping"] == {"ok": True, "value": {}}
    # execution.taskSupport as the SDK read it; absent means forbidden.
    assert report["tools"] == {
        "echo": None, "summarize": "optional", "sleep": "optional", "park": "optional",
        "fail": "optional", "approve": "required", "resumable_sleep": "optional",
    }


def test_plain_calls(report: dict[str, Any]) -> None:
    assert ok(report["echo"]) == {"content": [{"type": "text", "text": "hello"}], "isError": False}
    failed = ok(report["fail_plain"])
    assert failed["isError"] is True and text_of(failed) == "boom"
    assert text_of(ok(report["sleep_plain"])) == "slept 0.05 seconds"


def test_task_mode_errors(report: dict[str, Any]) -> None:
    # The SDK refuses, on its own, a plain call of a tool it listed as `required`...
    assert error_code(report["approve_plain_guard"]) == -32600
    # ...and our server answers the raw request with -32601, as the spec says.
    assert error_code(report["approve_plain_raw"]) == -32601
    # A task-augmented call of a `forbidden` tool: -32601.
    assert error_code(report["echo_task_raw"]) == -32601


def test_task_call_with_stream_and_progress(report: dict[str, Any]) -> None:
    stream = report["sleep_stream"]
    created = events(stream, "taskCreated")[0]["task"]
    assert created["status"] == "working" and created["ttl"] == 60000
    assert isinstance(created["pollInterval"], int)
    assert [e["status"] for e in events(stream, "taskStatus")][-1] == "completed"
    result = events(stream, "result")[0]["result"]
    assert text_of(result) == "slept 0.3 seconds"
    assert related(result) == created["taskId"]
    # Progress keeps flowing after the CreateTaskResult, on the original token.
    progress = report["sleep_progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert all(p["total"] == 3 and related(p) == created["taskId"] for p in progress)
    assert ok(report["sleep_get_after"])["status"] == "completed"
    assert ok(report["sleep_result_again"]) == result


def test_task_without_ttl_gets_the_server_default(report: dict[str, Any]) -> None:
    task = ok(report["no_ttl_create"])["task"]
    assert isinstance(task["ttl"], int) and task["ttl"] > 0


def test_failed_task(report: dict[str, Any]) -> None:
    stream = report["fail_stream"]
    assert [e["status"] for e in events(stream, "taskStatus")][-1] == "failed"
    # The SDK's stream turns `failed` into an error without fetching the result...
    assert events(stream, "error")[0]["code"] == -32603
    get = ok(report["fail_get"])
    assert get["status"] == "failed" and "task boom" in get["statusMessage"]
    # ...which tasks/result still has: the tool's isError result.
    result = ok(report["fail_result"])
    assert result["isError"] is True and text_of(result) == "task boom"
    assert related(result) == get["taskId"]


def test_input_required_elicitation_with_the_sdk_stream(report: dict[str, Any]) -> None:
    stream = report["approve_stream"]
    task_id = events(stream, "taskCreated")[0]["task"]["taskId"]
    # (Whether a poll of the stream caught input_required depends on timing; what the client
    # saw while answering does not.)
    result = events(stream, "result")[0]["result"]
    assert text_of(result) == "approved: ship it?" and related(result) == task_id
    asked = [e for e in report["elicitations"] if e["relatedTask"] == task_id]
    assert len(asked) == 1
    assert asked[0]["message"] == "ship it?" and asked[0]["mode"] == "form"
    # The client looked while answering: the task was input_required.
    assert asked[0]["statusWhileAsked"] == "input_required"


def test_elicitation_comes_through_tasks_result(report: dict[str, Any]) -> None:
    task_id = report["approve_side_task"]["taskId"]
    assert text_of(ok(report["approve_side_result"])) == "approved: side channel?"
    assert ok(report["approve_side_get"])["status"] == "completed"
    assert _support.delivered_inside_tasks_result(report["wire"], "elicitation/create", task_id)
    assert "input_required" in _support.announced_statuses(report["wire"], task_id)


def test_cancel(report: dict[str, Any]) -> None:
    cancelled = ok(report["cancel"])
    assert cancelled["taskId"] == report["cancel_task"]["taskId"]
    assert cancelled["status"] == "cancelled"
    assert ok(report["cancel_get"])["status"] == "cancelled"
    assert error_code(report["cancel_result"]) == -32602  # a cancelled task has no result
    assert error_code(report["cancel_again"]) == -32602  # already terminal
    assert error_code(report["cancel_completed"]) == -32602


def test_unknown_task_and_cursor(report: dict[str, Any]) -> None:
    for key in ("get_unknown", "result_unknown", "cancel_unknown", "list_bad_cursor"):
        assert error_code(report[key]) == -32602, key


def test_list(report: dict[str, Any]) -> None:
    listed = {t["taskId"]: t["status"] for t in report["list"]}
    ids = report["created_ids"]
    assert listed[ids["sleep"]] == "completed"
    assert listed[ids["fail"]] == "failed"
    assert listed[ids["approve_side"]] == "completed"
    assert listed[ids["cancelled"]] == "cancelled"
    assert ids["no_ttl"] in listed


def test_client_hosted_sampling_task(report: dict[str, Any]) -> None:
    """`summarize` samples from the SDK client, which hosts the sampling as its own task."""
    assert text_of(ok(report["summarize_plain"])) == SAMPLED
    plain, in_task = report["sampling_requests"]
    # Called plainly: a task-augmented sampling request, not related to any task of ours.
    assert plain["task"] == {} and plain["relatedTask"] is None
    # Called as a task: the sampling request belongs to that task.
    stream = report["summarize_stream"]
    task_id = events(stream, "taskCreated")[0]["task"]["taskId"]
    assert in_task["relatedTask"] == {"taskId": task_id}
    assert text_of(events(stream, "result")[0]["result"]) == SAMPLED
    # Our server followed both client-side tasks with tasks/get and tasks/result.
    for entry in (plain, in_task):
        for method in ("tasks/get", "tasks/result"):
            asked = _support.requests_in(report["wire"], "in", method)
            assert any(m["params"]["taskId"] == entry["hostedTaskId"] for m in asked), method
    hosted = {t["taskId"]: t["status"] for t in report["client_hosted_tasks"]}
    assert hosted == {plain["hostedTaskId"]: "completed", in_task["hostedTaskId"]: "completed"}


def test_plain_sampling_for_a_client_without_tasks(report: dict[str, Any]) -> None:
    assert text_of(ok(report["plain_summarize"])) == SAMPLED
    result = events(report["plain_summarize_stream"], "result")[0]["result"]
    assert text_of(result) == SAMPLED
    assert report["plain_sampling_requests"] == [{"task": None}, {"task": None}]


def test_task_binding_across_connections(report: dict[str, Any]) -> None:
    if report.get("setup", "").startswith("ws+token"):
        # Same bearer token, same identity: the second connection sees the first's task.
        assert ok(report["plain_get_main_task"])["taskId"] == report["created_ids"]["sleep"]
    else:
        # Another process (stdio), or another unauthenticated connection (ws).
        assert error_code(report["plain_get_main_task"]) == -32602


def test_our_messages_validate_against_the_schema(
    report: dict[str, Any], schema: dict[str, Any]
) -> None:
    checker = _support.WireChecker(schema)
    for wire in (report["wire"], report["plain_wire"]):
        problems, checked = checker.violations(wire, "in")
        assert not problems, "\n".join(problems[:10])
        assert checked > 10


def test_sdk_deviation_task_options_leak_into_polls(report: dict[str, Any]) -> None:
    # DEVIATION (TS SDK 1.32.2): callToolStream() reuses its request options for its own
    # tasks/get and tasks/result polls, so they carry the `task` augmentation (and a fresh
    # progressToken) meant for tools/call. Our server ignores both, as it should.
    polls = _support.requests_in(report["wire"], "out", "tasks/get")
    assert any("task" in (m.get("params") or {}) for m in polls)
