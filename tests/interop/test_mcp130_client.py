"""The Python SDK ``mcp`` 1.30.0's client -> our example server, over stdio and WebSocket.

``py/mcp_client.py`` runs in its own venv (``.interop/mcp130``) with the SDK's real
``ClientSession`` and experimental tasks API, and reports what it saw, wire log included.
Its WebSocket client cannot send headers, so the WebSocket server runs without a token.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import _support
from ._support import error_code, ok, related, text_of

pytestmark = pytest.mark.interop

SAMPLED = "sampled by the mcp 1.30 client"


@pytest.fixture(scope="module", params=["stdio", "ws"])
def report(request: pytest.FixtureRequest, mcp130: Path) -> Iterator[dict[str, Any]]:
    client = [str(mcp130), str(_support.MCP130_CLIENT)]
    if request.param == "stdio":
        yield _support.run_report([*client, "stdio", *_support.our_server_command()])
        return
    port = _support.free_port()
    argv = [sys.executable, str(_support.TASK_SERVER), "--ws", f"127.0.0.1:{port}"]
    with _support.background_server(argv, port) as url:
        yield _support.run_report([*client, "ws", url])


def test_initialize_and_tools_list(report: dict[str, Any]) -> None:
    assert report["protocol_version"] == "2025-11-25"
    assert report["server_info"]["name"] == "trio-mcp-example"
    assert report["server_capabilities"]["tasks"]["requests"]["tools"]["call"] == {}
    assert report["ping"]["ok"]
    assert report["tools"] == {
        "echo": None, "summarize": "optional", "sleep": "optional", "park": "optional",
        "fail": "optional", "approve": "required", "resumable_sleep": "optional",
    }


def test_plain_calls_and_task_modes(report: dict[str, Any]) -> None:
    assert text_of(ok(report["echo"])) == "hello"
    assert ok(report["fail_plain"])["isError"] is True
    assert error_code(report["approve_plain"]) == -32601  # required tool, plain call
    assert error_code(report["echo_task"]) == -32601  # forbidden tool, as a task


def test_task_poll_and_result(report: dict[str, Any]) -> None:
    created = report["sleep_created"]["task"]
    assert created["status"] == "working" and created["ttl"] == 60000
    assert report["sleep_polled"][-1] == "completed"
    result = ok(report["sleep_result"])
    assert text_of(result) == "slept 0.2 seconds" and related(result) == created["taskId"]


def test_failed_task(report: dict[str, Any]) -> None:
    assert report["fail_polled"][-1] == "failed"
    assert "task boom" in ok(report["fail_get"])["statusMessage"]
    result = ok(report["fail_result"])
    assert result["isError"] is True and text_of(result) == "task boom"


def test_input_required_elicitation(report: dict[str, Any]) -> None:
    """The SDK's way: poll_task() until input_required, then tasks/result."""
    task_id = report["created_ids"]["approve"]
    assert text_of(ok(report["approve_result"])) == "approved: ship it?"
    assert report["elicitations"][0] == {"message": "ship it?", "relatedTask": task_id}
    assert "input_required" in _support.announced_statuses(report["wire"], task_id)


def test_elicitation_comes_through_tasks_result(report: dict[str, Any]) -> None:
    task_id = report["created_ids"]["approve_side"]
    assert text_of(ok(report["approve_side_result"])) == "approved: side channel?"
    assert report["elicitations"][1] == {"message": "side channel?", "relatedTask": task_id}
    assert _support.delivered_inside_tasks_result(report["wire"], "elicitation/create", task_id)
    assert "input_required" in _support.announced_statuses(report["wire"], task_id)


def test_cancel_unknown_and_list(report: dict[str, Any]) -> None:
    assert ok(report["cancel"])["status"] == "cancelled"
    assert ok(report["cancel_get"])["status"] == "cancelled"
    assert error_code(report["cancel_result"]) == -32602
    assert error_code(report["cancel_again"]) == -32602
    assert error_code(report["get_unknown"]) == -32602
    assert error_code(report["list_bad_cursor"]) == -32602
    ids = report["created_ids"]
    listed = {t["taskId"]: t["status"] for t in report["list"]}
    assert listed == {ids["sleep"]: "completed", ids["fail"]: "failed",
                      ids["approve"]: "completed", ids["approve_side"]: "completed",
                      ids["cancelled"]: "cancelled"}


def test_client_hosted_sampling_inside_a_task(report: dict[str, Any]) -> None:
    """`summarize` as a task: its sampling request (task-augmented, related to our task)
    reaches the client through tasks/result; the client hosts it with a TTL it grants."""
    task_id = report["summarize_id"]
    hosted = report["sampling_requests"][-1]
    assert hosted["relatedTask"] == {"taskId": task_id} and hosted["task"] == {"ttl": 60000}
    result = ok(report["summarize_result"])
    assert text_of(result) == SAMPLED and result["isError"] is False
    for method in ("tasks/get", "tasks/result"):
        asked = _support.requests_in(report["wire"], "in", method)
        assert any(m["params"]["taskId"] == hosted["hostedTaskId"] for m in asked), method


def test_client_hosted_sampling_with_ttl_omitted(report: dict[str, Any]) -> None:
    # DEVIATION (mcp 1.30.0): it serializes `ttl: null` by leaving `ttl` out. Our server
    # asked for the sampling task with `task: {}`, so the SDK's CreateTaskResult has no ttl.
    plain = report["sampling_requests"][0]
    assert plain["task"] == {} and plain["relatedTask"] is None
    result = ok(report["summarize_plain"])
    assert result["isError"] is False and text_of(result) == SAMPLED


def test_our_messages_validate_against_the_schema(
    report: dict[str, Any], schema: dict[str, Any]
) -> None:
    problems, checked = _support.WireChecker(schema).violations(report["wire"], "in")
    assert not problems, "\n".join(problems[:10])
    assert checked > 10
