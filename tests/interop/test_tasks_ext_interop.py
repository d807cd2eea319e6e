"""The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) over Streamable HTTP
with other implementations, both ways (MCP 2026-07-28).

* FastMCP's requester (``fastmcp-tasks`` 4.1.4: importing ``fastmcp_tasks`` gives every
  FastMCP ``Client`` its ``TasksClientExtension``; ``call_tool_task`` gives a ``ToolTask``
  handle) -> our ``examples/everything_server.py --http`` (``py/fastmcp_tasks_client.py``),
  with ``mode="auto"`` and ``mode="2026-07-28"``: ``slow_compute`` to completion (through
  ``call_tool`` and through a handle), ``confirm_delete`` through ``input_required``
  answered by its ``elicitation_handler`` and ``tasks/update``, and ``slow_compute``
  (60 s) cancelled with ``tasks/cancel``. The client runs as shipped: fastmcp-tasks 4.1.4
  sends no ``Mcp-Name`` on ``tasks/*`` (SEP-2663 asks for it, for intermediaries to route
  by), and our server accepts that (the body's ``taskId`` decides; docs/interop.md F1).
* ``@modelcontextprotocol/ext-tasks`` 0.2.2 (``createTaskSessionFromClient`` over a
  ``@modelcontextprotocol/client`` 2.4.0 ``Client``, pinned to 2026-07-28 and ``auto``)
  -> our server (``node/ext_tasks_client.mjs``): the same three cases.
* Our client (``open_http_client(url, app, era="2026-07-28" | "auto")``) -> a FastMCP
  server with ``TasksExtension()`` on its memory backend (``py/fastmcp_tasks_server.py``):
  ``call_tool`` of a task tool returns its result, a mid-task question is answered by our
  App's ``on_elicitation`` through ``tasks/update``, and ``call_tool_task`` +
  ``handle.cancel()`` ends ``cancelled``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp import TaskStatus

from . import _support
from ._support import ok, text_of

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

MODERN = "2026-07-28"
EXTENSION = "io.modelcontextprotocol/tasks"
FASTMCP_CLIENT = _support.PY_DIR / "fastmcp_tasks_client.py"
FASTMCP_SERVER = _support.PY_DIR / "fastmcp_tasks_server.py"
EXT_TASKS_CLIENT = _support.NODE_DIR / "ext_tasks_client.mjs"
CONFIRM_FORM = {"type": "object", "properties": {"confirm": {"type": "boolean"}},
                "required": ["confirm"]}


@contextlib.contextmanager
def http_server(argv: list[str]) -> Iterator[str]:
    """Run ``argv + ["--http", "127.0.0.1:PORT"]`` for the block; yield its ``/mcp`` URL."""
    port = _support.free_port()
    with _support.background_server([*argv, "--http", f"127.0.0.1:{port}"], port):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def our_server() -> Iterator[str]:
    """Our ``everything_server.py --http`` (one for the module: each task has its own id)."""
    with http_server([sys.executable, str(_support.EVERYTHING_SERVER)]) as url:
        yield url


def _declares_extension(body: dict[str, Any]) -> bool:
    caps = body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    return EXTENSION in (caps.get("extensions") or {})


# --- fastmcp-tasks (requester) -> our server ---------------------------------------------------


@pytest.fixture(scope="module", params=["auto", MODERN])
def fastmcp_report(
    request: pytest.FixtureRequest, fastmcp: Path, our_server: str
) -> dict[str, Any]:
    return _support.run_report([str(fastmcp), str(FASTMCP_CLIENT), request.param, our_server])


def _fastmcp_wire(report: dict[str, Any], method: str) -> list[dict[str, Any]]:
    return [e for e in report["wire"] if (e["body"] or {}).get("method") == method]


def _unnamed(entries: list[dict[str, Any]]) -> bool:
    """fastmcp-tasks 4.1.4 as shipped: no ``Mcp-Name`` header on the task's requests (the
    deviation our server accepts), the right ``Mcp-Method``."""
    return bool(entries) and all(
        e["mcp_name"] is None and e["mcp_method"] == e["body"]["method"] for e in entries)


def test_fastmcp_task_completes(fastmcp_report: dict[str, Any]) -> None:
    """``slow_compute`` (``optional``) runs as a task because every request declares the
    extension; ``Client.call_tool`` polls ``tasks/get`` to the result, and
    ``call_tool_task`` shows our ``CreateTaskResult`` and the completed ``DetailedTask``,
    although no ``tasks/get`` carries ``Mcp-Name``."""
    assert fastmcp_report["protocol_version"] == MODERN
    assert ok(fastmcp_report["completed"]) == {
        "text": "slow_compute done after 0.3s", "is_error": False}
    handle = ok(fastmcp_report["completed_handle"])
    assert handle["created"]["resultType"] == "task"
    assert handle["created"]["status"] == "working"
    assert handle["created"]["taskId"] == handle["task_id"]
    assert handle["text"] == "slow_compute done after 0.3s (handle)"
    final = handle["final"]
    assert final["status"] == "completed" and final["resultType"] == "complete"
    assert final["result"]["isError"] is False
    calls = _fastmcp_wire(fastmcp_report, "tools/call")
    assert calls and all(_declares_extension(e["body"]) for e in calls)
    assert all(e["mcp_name"] == e["body"]["params"]["name"] for e in calls)
    assert _unnamed(_fastmcp_wire(fastmcp_report, "tasks/get"))


def test_fastmcp_input_required_answered_by_tasks_update(fastmcp_report: dict[str, Any]) -> None:
    """``confirm_delete`` parks in ``input_required``; fastmcp-tasks hands the
    ``elicitation/create`` of ``inputRequests`` to its ``elicitation_handler`` and sends
    the answer keyed ``confirm`` with ``tasks/update`` (no ``Mcp-Name``); the task then
    completes."""
    assert ok(fastmcp_report["input_required"]) == {"text": "Deleted notes.txt", "is_error": False}
    assert fastmcp_report["elicitations"] == [
        {"mode": "form", "message": "Delete notes.txt?", "requestedSchema": CONFIRM_FORM}]
    (update,) = _fastmcp_wire(fastmcp_report, "tasks/update")
    assert update["body"]["params"]["inputResponses"] == {
        "confirm": {"action": "accept", "content": {"confirm": True}}}
    assert _unnamed([update])


def test_fastmcp_cancel(fastmcp_report: dict[str, Any]) -> None:
    """``slow_compute`` for 60 s, ``ToolTask.cancel()`` (``tasks/cancel``, no ``Mcp-Name``),
    then ``wait()``: the task is ``cancelled``."""
    cancelled = ok(fastmcp_report["cancelled"])
    assert cancelled["before"]["status"] == "working"
    assert cancelled["final"]["status"] == "cancelled"
    assert cancelled["final"]["taskId"] == cancelled["task_id"]
    (cancel,) = _fastmcp_wire(fastmcp_report, "tasks/cancel")
    assert cancel["body"]["params"]["taskId"] == cancelled["task_id"]
    assert _unnamed([cancel])


# --- ext-tasks 0.2.2 (requester) -> our server -------------------------------------------------


@pytest.fixture(scope="module", params=["pin", "auto"])
def ext_report(request: pytest.FixtureRequest, node: str, our_server: str) -> dict[str, Any]:
    return _support.run_report([node, str(EXT_TASKS_CLIENT), our_server, request.param],
                               cwd=_support.NODE_DIR)


def _raw(report: dict[str, Any], method: str, task_id: str | None = None) -> list[dict[str, Any]]:
    return [
        e for e in report["raw"] if e["request"]["method"] == method
        and (task_id is None or e["request"]["params"].get("taskId") == task_id)
    ]


def test_ext_tasks_session_sees_the_extension(ext_report: dict[str, Any]) -> None:
    """The Client negotiates 2026-07-28 and finds the extension in our ``server/discover``
    capabilities, so the session is a V2 (SEP-2663) one: task calls and ``tasks/*`` go
    through rawDispatch, framed with the extension declared."""
    assert ext_report["protocol_version"] == MODERN and ext_report["era"] == "modern"
    assert ext_report["server_extensions"] == {EXTENSION: {}}
    caps = ext_report["session_capabilities"]
    assert caps["execution"] and caps["cancellation"] and caps["inputResponses"]
    assert all(_declares_extension(e["request"]) for e in ext_report["raw"])
    for entry in ext_report["raw"]:
        params = entry["request"]["params"]
        if entry["request"]["method"].startswith("tasks/"):
            assert entry["headers"]["mcp-name"] == params["taskId"]
        assert entry["status"] == 200, entry


def test_ext_tasks_task_completes_on_the_wire(ext_report: dict[str, Any]) -> None:
    """``slow_compute`` is a task (our ``CreateTaskResult``), polled with ``tasks/get`` to
    ``completed`` with the tool's result inlined."""
    value = ok(ext_report["completed"])
    assert value["kind"] == "task" and value["lastTaskStatus"] == "completed"
    gets = _raw(ext_report, "tasks/get", value["taskId"])
    last = gets[-1]["response"]["result"]
    assert last["status"] == "completed" and last["resultType"] == "complete"
    assert text_of(last["result"]) == "slow_compute done after 0.3s"


def test_ext_tasks_completed_outcome(ext_report: dict[str, Any]) -> None:
    """The execution settles ``completed`` with the CallToolResult."""
    value = ok(ext_report["completed"])
    assert value["status"] == "completed", value
    assert text_of(value["result"]) == "slow_compute done after 0.3s"


def test_ext_tasks_input_required_answered_by_tasks_update(ext_report: dict[str, Any]) -> None:
    """``confirm_delete`` parks in ``input_required``; ext-tasks hands the question to
    ``onInputRequest`` (scope task, delivery task-update, input id ``confirm``) and sends
    the answer with ``tasks/update``; our server then completes the task."""
    value = ok(ext_report["input_required"])
    assert value["kind"] == "task"
    statuses = [e["status"] for e in value["events"] if e["type"] == "task"]
    assert "input_required" in statuses and statuses[-1] == "completed"
    (asked,) = ext_report["inputs"]
    assert asked["kind"] == "elicitation" and asked["delivery"] == "task-update"
    assert asked["scope"] == "task" and asked["taskId"] == value["taskId"]
    assert asked["inputId"] == "confirm"
    assert asked["params"]["message"] == "Delete notes.txt?"
    assert asked["params"]["requestedSchema"] == CONFIRM_FORM
    (update,) = _raw(ext_report, "tasks/update", value["taskId"])
    assert update["request"]["params"]["inputResponses"] == {
        "confirm": {"action": "accept", "content": {"confirm": True}}}
    assert update["response"]["result"]["resultType"] == "complete"
    last = _raw(ext_report, "tasks/get", value["taskId"])[-1]["response"]["result"]
    assert last["status"] == "completed" and text_of(last["result"]) == "Deleted notes.txt"


def test_ext_tasks_input_required_outcome(ext_report: dict[str, Any]) -> None:
    """The execution settles ``completed`` with ``Deleted notes.txt``."""
    value = ok(ext_report["input_required"])
    assert value["status"] == "completed", value
    assert text_of(value["result"]) == "Deleted notes.txt"


def test_ext_tasks_cancel(ext_report: dict[str, Any]) -> None:
    """``slow_compute`` for 60 s, ``execution.cancel()`` (``tasks/cancel``, acknowledged
    with an empty ``complete`` result): the outcome is ``cancelled`` and so is the task
    our server reports."""
    value = ok(ext_report["cancelled"])
    assert value["kind"] == "task"
    assert value["outcome"] == "cancelled" and value["server_status"] == "cancelled"
    (cancel,) = _raw(ext_report, "tasks/cancel", value["taskId"])
    assert cancel["response"]["result"]["resultType"] == "complete"


# --- our client -> fastmcp-tasks server ------------------------------------------------------


@pytest.fixture(scope="module")
def fastmcp_server(fastmcp: Path) -> Iterator[str]:
    """``py/fastmcp_tasks_server.py`` (FastMCP + ``TasksExtension()``, memory backend)."""
    with http_server([str(fastmcp), str(FASTMCP_SERVER)]) as url:
        yield url


def asking_app(asked: list[trio_mcp.ElicitParams]) -> trio_mcp.App:
    app = trio_mcp.App("tasks-ext-interop-ours", "1.0")

    @app.on_elicitation
    async def elicit(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        asked.append(params)
        return trio_mcp.ElicitResult(action="accept", content={"confirm": True})

    return app


def _sent(wire: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return _support.requests_in(wire, "out", method)


def _answer(wire: list[dict[str, Any]], request: dict[str, Any]) -> dict[str, Any]:
    (answer,) = [e["msg"] for e in wire if e["dir"] == "in" and "method" not in e["msg"]
                 and e["msg"].get("id") == request["id"]]
    result: dict[str, Any] = answer["result"]
    return result


@pytest.mark.parametrize("era", [MODERN, "auto"])
async def test_our_client_follows_a_fastmcp_task(fastmcp_server: str, era: str) -> None:
    """``call_tool("add_later")``: their server answers with a ``CreateTaskResult``; our
    client polls ``tasks/get`` and returns the completed task's result."""
    with _support.our_wire() as wire, trio.fail_after(60):
        async with trio_mcp.open_http_client(fastmcp_server, asking_app([]), era=era) as peer:
            assert peer.protocol_version == MODERN
            result = await peer.call_tool("add_later", {"a": 2, "b": 3})
    assert not result.is_error and result.text == "sum: 5"
    (call,) = _sent(wire, "tools/call")
    assert _declares_extension(call)
    created = _answer(wire, call)
    assert created["resultType"] == "task"
    gets = _sent(wire, "tasks/get")
    assert gets and {g["params"]["taskId"] for g in gets} == {created["taskId"]}
    assert _answer(wire, gets[-1])["status"] == "completed"


@pytest.mark.parametrize("era", [MODERN, "auto"])
async def test_our_client_answers_a_fastmcp_task_question(fastmcp_server: str, era: str) -> None:
    """``approve`` asks mid-task (fastmcp-tasks' guard pattern: the task parks in
    ``input_required`` with ``inputRequests``); our App's ``on_elicitation`` answers it once,
    sent back with ``tasks/update`` under their key, and the task completes."""
    asked: list[trio_mcp.ElicitParams] = []
    with _support.our_wire() as wire, trio.fail_after(60):
        async with trio_mcp.open_http_client(fastmcp_server, asking_app(asked), era=era) as peer:
            result = await peer.call_tool("approve", {"action": "deploy"})
    assert not result.is_error and result.text == "deploy: approved"
    assert [p.message for p in asked] == ["Really deploy?"]
    assert asked[0].requested_schema == CONFIRM_FORM
    questions = [_answer(wire, g) for g in _sent(wire, "tasks/get")]
    parked = [q for q in questions if q["status"] == "input_required"]
    assert parked
    keys = set(parked[0]["inputRequests"])
    (update,) = _sent(wire, "tasks/update")
    assert set(update["params"]["inputResponses"]) == keys
    for answer in update["params"]["inputResponses"].values():
        assert answer == {"action": "accept", "content": {"confirm": True}}
    assert questions[-1]["status"] == "completed"


@pytest.mark.parametrize("era", [MODERN, "auto"])
async def test_our_client_cancels_a_fastmcp_task(fastmcp_server: str, era: str) -> None:
    """``call_tool_task("long_job")`` gives a working handle; ``handle.cancel()`` sends
    ``tasks/cancel`` and the task ends ``cancelled``."""
    with _support.our_wire() as wire, trio.fail_after(60):
        async with trio_mcp.open_http_client(fastmcp_server, asking_app([]), era=era) as peer:
            handle = await peer.call_tool_task("long_job", {"seconds": 60})
            assert handle.task.status is TaskStatus.WORKING and handle.task_id
            await handle.cancel()
            final = await handle.wait()
            assert final.status is TaskStatus.CANCELLED
            again = await peer.task(handle.task_id).status()
            assert again.status is TaskStatus.CANCELLED
    (cancel,) = _sent(wire, "tasks/cancel")
    assert cancel["params"]["taskId"] == handle.task_id
    assert _answer(wire, cancel)["resultType"] == "complete"
