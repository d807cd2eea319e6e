"""The TypeScript SDK (``@modelcontextprotocol/sdk`` 1.32.x) and trio-mcp over Streamable HTTP.

Both directions, with tasks:

* their ``StreamableHTTPClientTransport`` -> our ``serve_http`` (``examples/task_server.py``'s
  tools, served in a subprocess, without and with a bearer token): ``node/ts_client.mjs http``
  runs the same scenario as over stdio and WebSocket, so the scenario checks of
  ``test_ts_client.py`` are collected here again, against this module's ``report``; the
  tests below add what only HTTP has (streams, session header, DELETE, identities);
* our ``open_http_client`` -> their ``StreamableHTTPServerTransport`` (``node/ts_server.mjs
  --http``: an ``McpServer`` per session with the SDK's task tools, one shared
  ``InMemoryTaskStore``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import trio_mcp

from ..helpers import ROOT, client_app, seen_by
from . import _support
from ._support import RELATED, error_code, ok

# The scenario checks shared with stdio and WebSocket: pytest collects them in this module
# too, where they get this module's `report` fixture (the HTTP runs).
from .test_ts_client import (  # noqa: F401
    test_cancel,
    test_client_hosted_sampling_task,
    test_elicitation_comes_through_tasks_result,
    test_failed_task,
    test_initialize_and_tools_list,
    test_input_required_elicitation_with_the_sdk_stream,
    test_list,
    test_our_messages_validate_against_the_schema,
    test_plain_calls,
    test_plain_sampling_for_a_client_without_tasks,
    test_sdk_deviation_task_options_leak_into_polls,
    test_task_call_with_stream_and_progress,
    test_task_mode_errors,
    test_task_without_ttl_gets_the_server_default,
    test_unknown_task_and_cursor,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

TOKEN = "interop-http-token"
#: Serve examples/task_server.py's tools with serve_http: argv PORT [TOKEN].
SERVE_OURS = """
import sys
from functools import partial
import trio
import trio_mcp
from tests.helpers import example_app
port, token = int(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else None)
tokens = {token: "ts-user"} if token else None
trio.run(partial(trio_mcp.serve_http, example_app(), "127.0.0.1", port, tokens=tokens))
"""


@contextlib.contextmanager
def our_http_server(token: str | None) -> Iterator[str]:
    """Run our serve_http in a subprocess; yield the endpoint's URL."""
    port = _support.free_port()
    argv = [sys.executable, "-c", SERVE_OURS, str(port), *([token] if token else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    try:
        _support._wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module", params=["http", "http+token"])
def report(request: pytest.FixtureRequest, node: str) -> Iterator[dict[str, Any]]:
    token = TOKEN if request.param == "http+token" else None
    with our_http_server(token) as url:
        result = _support.run_report(
            [node, str(_support.TS_CLIENT), "http", url, *([token] if token else [])])
    result["setup"] = request.param
    yield result


# --- reading the HTTP log of ts_client.mjs ---------------------------------------------------


def posts_of(http: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    """The logged POSTs carrying a ``method`` request."""
    return [e for e in http if e["method"] == "POST" and isinstance(e["request"], dict)
            and e["request"].get("method") == method and "id" in e["request"]]


def messages(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON-RPC messages that came back on one logged response (priming events left out)."""
    return [m["msg"] for m in entry["messages"] if "msg" in m]


def task_of(msg: dict[str, Any]) -> str | None:
    """The related-task id in a message's params ``_meta``."""
    meta = (msg.get("params") or {}).get("_meta") or {}
    value: str | None = (meta.get(RELATED) or {}).get("taskId")
    return value


def get_streams(http: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The standalone GET streams (no Last-Event-ID) that the server accepted."""
    return [e for e in http if e["method"] == "GET" and e["lastEventId"] is None
            and e["status"] == 200]


# --- their client -> our server: what only HTTP has --------------------------------------------


def test_http_session_header_protocol_version_and_delete(report: dict[str, Any]) -> None:
    for http, key in ((report["http"], "http_session_id"),
                      (report["plain_http"], "plain_http_session_id")):
        initialize = posts_of(http, "initialize")[0]
        assert initialize["status"] == 200 and initialize["contentType"] == "application/json"
        session_id = initialize["sessionId"]
        assert session_id and session_id == report[key]
        # Every later request carries the session and the negotiated version.
        later = [e for e in http[1:] if e["status"] is not None]
        assert later and all(e["sentSessionId"] == session_id for e in later
                             if e["method"] in ("POST", "DELETE"))
        assert all(e["sentProtocolVersion"] == "2025-11-25" for e in later
                   if e["method"] == "POST")
        # Their terminateSession(): our DELETE answer is 200.
        [delete] = [e for e in http if e["method"] == "DELETE"]
        assert delete["status"] == 200 and delete["sentSessionId"] == session_id
    assert report["terminate"] == {"ok": True} and report["plain_terminate"] == {"ok": True}
    assert report["http_session_id"] != report["plain_http_session_id"]


def test_http_answers_json_or_sse_per_method(report: dict[str, Any]) -> None:
    http = report["http"]
    for method in ("ping", "tasks/get", "tasks/list", "tasks/cancel"):
        for entry in posts_of(http, method):
            assert entry["contentType"] == "application/json", (method, entry)
            [answer] = messages(entry)
            assert answer["id"] == entry["request"]["id"]
    for method in ("tools/list", "tools/call", "tasks/result"):
        entries = posts_of(http, method)
        assert entries, method
        for entry in entries:
            assert entry["contentType"].startswith("text/event-stream"), (method, entry)
            # A priming event (id, no data) first; the response last.
            assert entry["messages"][0].get("priming") is True
            assert messages(entry)[-1]["id"] == entry["request"]["id"]
    # Notifications and the client's responses: 202, no body.
    accepted = [e for e in http if e["method"] == "POST" and isinstance(e["request"], dict)
                and ("id" not in e["request"] or "method" not in e["request"])]
    assert accepted and all(e["status"] == 202 and e["messages"] == [] for e in accepted)


def test_http_elicitation_rides_the_tasks_result_stream(report: dict[str, Any]) -> None:
    """input_required: our server's elicitation arrives on the SSE stream of their
    tasks/result POST (the side channel), before that request's response."""
    for task_id in (report["approve_side_task"]["taskId"],
                    report["approve_stream"][0]["task"]["taskId"]):
        [stream] = [e for e in posts_of(report["http"], "tasks/result")
                    if e["request"]["params"]["taskId"] == task_id
                    and any(m.get("method") == "elicitation/create" for m in messages(e))]
        got = messages(stream)
        asks = [m for m in got if m.get("method") == "elicitation/create"]
        assert len(asks) == 1 and task_of(asks[0]) == task_id
        assert got[-1]["id"] == stream["request"]["id"] and RELATED in got[-1]["result"]["_meta"]
        assert got.index(asks[0]) < len(got) - 1
        # Their answer came back as its own POST: 202.
        [answer] = [e for e in report["http"] if e["method"] == "POST"
                    and isinstance(e["request"], dict) and "method" not in e["request"]
                    and e["request"].get("id") == asks[0]["id"] and "result" in e["request"]]
        assert answer["status"] == 202
        assert answer["request"]["result"]["action"] == "accept"


def test_http_client_hosted_sampling_streams(report: dict[str, Any]) -> None:
    """`summarize` called plainly: the task-augmented sampling request and our polls of
    their hosted task ride the tools/call stream. Called as a task: the sampling request
    rides their tasks/result stream (or the GET stream when the ask came first), our polls
    of their task go on the GET stream."""
    http = report["http"]
    plain, in_task = report["sampling_requests"]
    [call] = [e for e in posts_of(http, "tools/call")
              if e["request"]["params"]["name"] == "summarize"
              and "task" not in e["request"]["params"]]
    got = messages(call)
    assert [m.get("method") for m in got][:2] == ["sampling/createMessage", "tasks/get"]
    assert all(m["params"]["taskId"] == plain["hostedTaskId"] for m in got[1:-1])
    assert [m.get("method") for m in got][-2:] == ["tasks/result", None]

    task_id = in_task["relatedTask"]["taskId"]
    [result_stream] = [e for e in posts_of(http, "tasks/result")
                       if e["request"]["params"]["taskId"] == task_id]
    [listen] = get_streams(http)
    # The question rides their tasks/result stream when that POST is open as the tool asks,
    # else the GET stream (the requestor's newest connection): seen once under load, when
    # the SDK's tasks/result came after the ask. Either way it is asked exactly once.
    asks = [m for m in messages(result_stream) + messages(listen)
            if m.get("method") == "sampling/createMessage" and task_of(m) == task_id]
    assert len(asks) == 1
    polls = [m for m in messages(listen) if m.get("method") in ("tasks/get", "tasks/result")
             and m["params"]["taskId"] == in_task["hostedTaskId"]]
    assert polls and polls[-1]["method"] == "tasks/result"


def test_http_progress_and_status_after_the_create_go_to_the_get_stream(
    report: dict[str, Any]
) -> None:
    """The tools/call stream ends with the CreateTaskResult; the task's later progress (on
    the original token) and status notifications travel on the standalone GET stream."""
    http = report["http"]
    task_id = report["created_ids"]["sleep"]
    [call] = [e for e in posts_of(http, "tools/call")
              if e["request"]["params"]["name"] == "sleep"
              and e["request"]["params"].get("arguments", {}).get("steps") == 3]
    assert [m.get("method") for m in messages(call)] == [None]
    assert messages(call)[0]["result"]["task"]["taskId"] == task_id
    [listen] = get_streams(http)
    progress = [m for m in messages(listen) if m.get("method") == "notifications/progress"
                and task_of(m) == task_id]
    assert [p["params"]["progress"] for p in progress] == [1, 2, 3]
    token = call["request"]["params"]["_meta"]["progressToken"]
    assert all(p["params"]["progressToken"] == token for p in progress)
    statuses = [m["params"]["status"] for m in messages(listen)
                if m.get("method") == "notifications/tasks/status"
                and m["params"]["taskId"] == task_id]
    assert statuses[-1] == "completed"


def test_http_task_binding_by_token_identity(report: dict[str, Any]) -> None:
    if report["setup"] == "http+token":
        # Same bearer token, same identity: the second session (opened after the first one
        # was DELETEd) sees the first one's task.
        assert ok(report["plain_get_main_task"])["taskId"] == report["created_ids"]["sleep"]
    else:
        # No token: tasks are bound to the session.
        assert error_code(report["plain_get_main_task"]) == -32602


def test_sdk_deviation_error_answers_are_resumed(report: dict[str, Any]) -> None:
    # DEVIATION T9 (TS SDK 1.32.2 StreamableHTTPClientTransport): a POST's SSE stream that
    # ends with a JSON-RPC *error* response is taken as cut short (only result responses
    # count as "received"), so about `retry` ms later the client re-opens it with GET and
    # Last-Event-ID = the error's event id. We answer 200 with an empty stream that ends; the
    # SDK then opens a plain GET, which gets 409 (the session already has its GET stream)
    # and is reported to `onerror` ("Failed to open SSE stream"). Harmless; ts_client.mjs
    # waits (5 s at most) for both before ending the session.
    assert report["waited_for_resumption"] is True
    http = report["http"]
    errors = {}
    for entry in http:
        if entry["method"] == "POST" and entry["contentType"] and \
                entry["contentType"].startswith("text/event-stream"):
            last = entry["messages"][-1]
            if "error" in last.get("msg", {}):
                errors[last["eventId"]] = entry["request"]["id"]
    assert errors
    resumed = [e for e in http if e["method"] == "GET" and e["lastEventId"] in errors]
    assert resumed, errors
    # What we owe the resumption: it is accepted, and the stream it resumes does not send the
    # error (or anything else answering that request) a second time. What the SDK does next
    # (a plain GET that meets our open GET stream: 409, "Failed to open SSE stream" on its
    # onerror) depends on timing, so it is not asserted.
    for entry in resumed:
        # None: the SDK closed the session before our answer to its GET arrived (timing).
        assert entry["status"] in (200, 409, None), entry
        answered = errors[entry["lastEventId"]]
        assert not any(
            m.get("msg", {}).get("id") == answered and "method" not in m.get("msg", {})
            for m in entry["messages"]
        ), entry


# --- our client -> their StreamableHTTPServerTransport -----------------------------------------


@pytest.fixture(scope="module")
def ts_http_url(node: str) -> Iterator[str]:
    """node ts_server.mjs --http PORT: their Streamable HTTP server with task tools."""
    port = _support.free_port()
    proc = subprocess.Popen([node, str(_support.TS_SERVER), "--http", str(port)],
                            stdin=subprocess.DEVNULL)
    try:
        _support._wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()


@asynccontextmanager
async def ts_http(url: str, app: trio_mcp.App | None = None) -> AsyncIterator[trio_mcp.Peer]:
    async with trio_mcp.open_http_client(url, app if app is not None else client_app()) as peer:
        yield peer


def result_text(result: trio_mcp.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, trio_mcp.TextContent))


async def test_their_http_server_initialize_tools_and_plain_call(ts_http_url: str) -> None:
    async with ts_http(ts_http_url) as peer:
        assert peer.remote_info is not None and peer.remote_info.name == "ts-sdk-interop-server"
        caps = peer.remote_server_capabilities
        assert caps is not None and caps.tasks is not None
        assert caps.tasks["requests"]["tools"]["call"] == {}
        tools = {t.name: t.task_support for t in await peer.list_all_tools()}
        assert tools["slow"] == "optional" and tools["needs-task"] == "required"
        assert tools["echo"] == "forbidden"
        assert result_text(await peer.call_tool("echo", {"text": "hi"})) == "hi"
        await peer.ping()


async def test_their_http_server_task_call_poll_result(ts_http_url: str) -> None:
    async with ts_http(ts_http_url) as peer:
        await peer.list_all_tools()
        handle = await peer.call_tool_task("slow", {"ms": 100}, ttl=60_000)
        assert handle.task.status is trio_mcp.TaskStatus.WORKING and handle.task.ttl == 60_000
        seen = [task.status async for task in handle]
        assert seen[-1] is trio_mcp.TaskStatus.COMPLETED
        result = await handle.result()
        assert result_text(result) == "slept 100 ms"
        assert result.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}
        assert (await peer.get_task(handle.task_id)).status is trio_mcp.TaskStatus.COMPLETED
        handle = await peer.call_tool_task("needs-task", {"text": "x"})
        await handle.wait()
        assert result_text(await handle.result()) == "done: x"
        handle = await peer.call_tool_task("flaky", {"message": "bad"})
        assert (await handle.wait()).status is trio_mcp.TaskStatus.FAILED
        failed = await handle.result()
        assert failed.is_error is True and result_text(failed) == "bad"


async def test_their_http_server_cancel(ts_http_url: str) -> None:
    async with ts_http(ts_http_url) as peer:
        handle = await peer.call_tool_task("slow", {"ms": 60_000})
        cancelled = await handle.cancel()
        assert cancelled.status is trio_mcp.TaskStatus.CANCELLED
        assert (await handle.status()).status is trio_mcp.TaskStatus.CANCELLED
        with pytest.raises(trio_mcp.RemoteError) as again:
            await handle.cancel()
        assert again.value.code == -32602
        # T5, over HTTP too: tasks/result of a cancelled task is -32603.
        with pytest.raises(trio_mcp.RemoteError) as no_result:
            await handle.result()
        assert no_result.value.code == -32603
        with pytest.raises(trio_mcp.RemoteError) as unknown:
            await peer.get_task("no-such-task")
        assert unknown.value.code == -32602


async def test_their_http_server_list_pages_and_session_binding(ts_http_url: str) -> None:
    async with ts_http(ts_http_url) as peer, ts_http(ts_http_url) as other:
        ids = set()
        for i in range(12):
            handle = await peer.call_tool_task("needs-task", {"text": str(i)}, ttl=60_000)
            ids.add(handle.task_id)
        first = await peer.list_tasks()
        assert len(first.tasks) == 10 and first.next_cursor
        assert {t.task_id async for t in peer.iter_tasks()} == ids
        # Their one InMemoryTaskStore binds each task to its HTTP session: the other
        # session neither lists nor finds them.
        assert not ids & {t.task_id async for t in other.iter_tasks()}
        with pytest.raises(trio_mcp.RemoteError) as foreign:
            await other.get_task(next(iter(ids)))
        assert foreign.value.code == -32602


async def test_their_http_server_input_required_through_tasks_result(ts_http_url: str) -> None:
    app = client_app()
    async with ts_http(ts_http_url, app) as peer:
        with _support.our_wire() as wire:
            handle = await peer.call_tool_task("ask", {"question": "ok?"})
            statuses = [task.status async for task in handle]
            result = await handle.result()
        assert trio_mcp.TaskStatus.INPUT_REQUIRED in statuses
        assert statuses[-1] is trio_mcp.TaskStatus.COMPLETED
        assert result_text(result) == "approved: ok?"
        [(kind, hosted, params)] = seen_by(app)
        assert kind == "elicitation" and hosted is None
        assert params.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}
        # Their queue hands the elicitation out only inside our tasks/result (over HTTP: on
        # that POST's SSE stream).
        assert _support.delivered_inside_tasks_result(wire, "elicitation/create", handle.task_id)


@pytest.mark.parametrize(("tool", "kind", "expected"), [
    ("sample-as-task", "sampling", {"content": {"type": "text", "text": "sampled text"}}),
    ("elicit-as-task", "elicitation", {"action": "accept", "content": {"approve": True}}),
])
async def test_their_http_server_to_client_task(ts_http_url: str, tool: str, kind: str,
                                                expected: dict[str, Any]) -> None:
    """Their server asks our HTTP client to host a task (createMessageStream /
    elicitInputStream with `task`), polls our tasks/get and reads our tasks/result; those
    requests reach us on SSE streams, our answers go back as POSTs."""
    app = client_app()
    async with ts_http(ts_http_url, app) as peer:
        with trio.fail_after(60):
            result = await peer.call_tool(tool, {"prompt": "p", "question": "q"})
        assert result.is_error is False, result
        outcome = result.structured_content
        assert outcome is not None and outcome["error"] is None
        assert outcome["seen"][0] == "taskCreated" and outcome["seen"][-1] == "completed"
        got = outcome["result"]
        for key, value in expected.items():
            assert got[key] == value
        [(seen_kind, hosted_task, params)] = seen_by(app)
        assert seen_kind == kind and hosted_task is not None
        assert got["_meta"] == {trio_mcp.RELATED_TASK_META: {"taskId": hosted_task}}
        assert params.task is not None and params.task.ttl == 60_000


async def test_their_http_server_our_messages_validate(ts_http_url: str,
                                                       schema: dict[str, Any]) -> None:
    app = client_app()
    async with ts_http(ts_http_url, app) as peer:
        with _support.our_wire() as wire:
            await peer.list_all_tools()
            handle = await peer.call_tool_task("ask", {"question": "valid?"})
            await handle.wait()
            await handle.result()
            await peer.call_tool("sample-as-task", {"prompt": "p"})
    problems, checked = _support.WireChecker(schema).violations(wire, "out")
    assert not problems, "\n".join(problems[:10])
    assert checked > 5
