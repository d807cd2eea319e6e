"""The sharp edges a newcomer hit when trying the project as a new user would (issue 27).

Each test failed on the code before its fix: one exception for connection
failures on every transport, the CLI's words when the server dies under
``call --task``, the task hint of ``call_tool`` before ``list_all_tools()``,
``tasks list`` without a token, a 404 on the wrong path, the exit status of
``tasks result`` for a failed task, a short ``help(trio_mcp.App)`` and a
``repr(TaskHandle)`` without private fields.
"""

from __future__ import annotations

import json
import pydoc
import shlex
import signal
import socket
import subprocess
import sys
from functools import partial

import httpx
import pytest
import trio
import trio_websocket

import trio_mcp

from .cli_support import (
    CLI,
    TOKEN,
    one_line_error,
    read_until,
    run_cli,
    run_cli_here,
    serving,
    start_cli,
)
from .helpers import ROOT

pytestmark = pytest.mark.timeout(120)


def _closed_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- one exception for a connection that cannot be opened -------------------------------------


async def test_sharp_websocket_unreachable_is_connection_failed() -> None:
    url = f"ws://127.0.0.1:{_closed_port()}/"
    with pytest.raises(trio_mcp.ConnectionFailed) as got:
        async with trio_mcp.open_websocket_client(url):
            pass  # pragma: no cover
    assert isinstance(got.value.__cause__, trio_websocket.HandshakeError | OSError)
    assert got.value.status_code is None
    assert url in str(got.value)


async def test_sharp_http_unreachable_is_connection_failed() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/mcp"
    with pytest.raises(trio_mcp.ConnectionFailed) as got:
        async with trio_mcp.open_http_client(url):
            pass  # pragma: no cover
    assert isinstance(got.value.__cause__, httpx.ConnectError)
    assert got.value.status_code is None
    assert url in str(got.value)


def test_sharp_http_unreachable_writes_nothing_on_stderr() -> None:
    """No stray ``POST to ... failed`` line: the caller gets the exception, and only it."""
    url = f"http://127.0.0.1:{_closed_port()}/mcp"
    script = (
        "import trio, trio_mcp\n"
        "async def main():\n"
        f"    async with trio_mcp.open_http_client({url!r}):\n"
        "        pass\n"
        "try:\n"
        "    trio.run(main)\n"
        "except trio_mcp.ConnectionFailed as exc:\n"
        "    print(type(exc.__cause__).__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ConnectError\n", "")


async def test_sharp_stdio_server_gone_is_connection_failed() -> None:
    command = shlex.join([sys.executable, "-c", "pass"])  # exits before answering initialize
    with pytest.raises(trio_mcp.ConnectionFailed) as got:
        async with trio_mcp.open_stdio_client(command):
            pass  # pragma: no cover
    assert isinstance(got.value.__cause__, trio_mcp.ConnectionClosed)
    assert isinstance(got.value, trio_mcp.ConnectionClosed)  # what callers caught before


async def test_sharp_refusals_are_connection_failed_too() -> None:
    """401 over WebSocket and HTTP: ``ConnectionFailed`` with the status, and still the
    transport's own type for code written before."""
    app = trio_mcp.App("refusing")
    async with trio.open_nursery() as nursery:
        ws = await nursery.start(partial(trio_mcp.serve_websocket, app, tokens={"t": "ann"}))
        http = await nursery.start(partial(trio_mcp.serve_http, app, tokens={"t": "ann"}))
        with pytest.raises(trio_mcp.ConnectionFailed) as got_ws:
            async with trio_mcp.open_websocket_client(ws.url):
                pass  # pragma: no cover
        assert got_ws.value.status_code == 401
        assert isinstance(got_ws.value, trio_websocket.ConnectionRejected)
        with pytest.raises(trio_mcp.ConnectionFailed) as got_http:
            async with trio_mcp.open_http_client(http.url):
                pass  # pragma: no cover
        assert got_http.value.status_code == 401
        assert isinstance(got_http.value, httpx.HTTPStatusError)
        assert got_http.value.response.status_code == 401
        nursery.cancel_scope.cancel()


async def test_sharp_http_wrong_path_suggests_mcp() -> None:
    async with trio.open_nursery() as nursery:
        addr = await nursery.start(partial(trio_mcp.serve_http, trio_mcp.App("s")))
        with pytest.raises(trio_mcp.ConnectionFailed) as got:
            async with trio_mcp.open_http_client(addr.url.replace("/mcp", "/")):
                pass  # pragma: no cover
        assert got.value.status_code == 404
        assert "/mcp" in str(got.value)
        nursery.cancel_scope.cancel()


def test_sharp_cli_http_wrong_path_suggests_mcp() -> None:
    argv = [*CLI, "serve-example", "--http", "127.0.0.1:0"]
    with serving(argv, "http") as (url, _):
        proc = run_cli_here("call", "--http", url.replace("/mcp", "/nope"), "echo",
                            "--args", '{"text": "x"}')
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "trio-mcp: the server refused the HTTP connection: HTTP 404 "
        f"(is the path right? trio-mcp serves {url})")


# --- the CLI ---------------------------------------------------------------------------------


def test_sharp_cli_http_server_dies_during_a_task() -> None:
    """Not "the server answered with an error": the connection was lost; the task's id and
    the command that fetches its result, as after Ctrl-C."""
    argv = [*CLI, "serve-example", "--http", "127.0.0.1:0", "--token", TOKEN]
    with serving(argv, "http") as (url, server):
        cli = start_cli("call", "--http", url, "--token", TOKEN, "sleep", "--args",
                        '{"seconds": 60}', "--task")
        task_id = read_until(cli, r"task ([0-9a-f]{32}) created").group(1)
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        _, err = cli.communicate(timeout=60)
    assert cli.returncode == 2, err
    last = err.splitlines()[-1]
    assert last.startswith("trio-mcp: the connection to the server was lost"), err
    assert "answered with an error" not in err
    assert last.endswith(
        f"task {task_id} may still run on the server (if it was not restarted); fetch its "
        f"result with: trio-mcp tasks --http {url} --token TOKEN result {task_id}")


def test_sharp_cli_tasks_list_without_token_says_why_it_is_empty() -> None:
    argv = [*CLI, "serve-example", "--http", "127.0.0.1:0"]
    with serving(argv, "http") as (url, _):
        proc = run_cli_here("tasks", "--http", url, "list")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().replace("\n", "").replace(" ", "") == '{"tasks":[]}'
    assert "without --token" in proc.stderr
    assert "bound to the connection or session that created them" in proc.stderr


def test_sharp_cli_tasks_result_of_a_failed_task_exits_1() -> None:
    """The README's exit table: 1 when the task failed or was cancelled."""
    argv = [*CLI, "serve-example", "--http", "127.0.0.1:0", "--token", TOKEN]
    with serving(argv, "http") as (url, _):
        failed = run_cli("call", "--http", url, "--token", TOKEN, "sleep", "--args",
                         '{"seconds": -1}', "--task", "--quiet")
        assert failed.returncode == 1, failed.stderr
        listed = run_cli("tasks", "--http", url, "--token", TOKEN, "--quiet", "list")
        (task,) = json.loads(listed.stdout)["tasks"]
        assert task["status"] == "failed"
        proc = run_cli("tasks", "--http", url, "--token", TOKEN, "--quiet", "result",
                       task["taskId"])
        unknown = run_cli("tasks", "--http", url, "--token", TOKEN, "--quiet", "result",
                          "0" * 32)
    assert proc.returncode == 1, proc.stderr
    assert one_line_error(proc) == (
        "trio-mcp: task failed: seconds must not be negative")
    assert unknown.returncode == 2  # an unknown id stays a usage/protocol error


# --- the API's surface ---------------------------------------------------------------------


async def test_sharp_call_tool_on_a_required_tool_before_listing_gives_the_hint() -> None:
    app = trio_mcp.App("s")

    @app.tool(task_support="required")
    async def long_job() -> str:
        return "done"

    async with trio_mcp.open_memory_pair(app) as pair:
        with pytest.raises(trio_mcp.RemoteError) as got:
            await pair.client.call_tool("long_job")  # never listed: no local check
        assert got.value.code == trio_mcp.METHOD_NOT_FOUND
        assert "use call_tool_task()" in got.value.message
        await pair.client.list_all_tools()
        with pytest.raises(trio_mcp.LocalUsageError, match=r"use call_tool_task\(\)"):
            await pair.client.call_tool("long_job")


def test_sharp_help_of_app_is_short() -> None:
    """The API and its docstrings only: no attrs machinery, no slots of inner state, no
    private module names, and a signature without attrs' ``NOTHING``."""
    text = pydoc.render_doc(trio_mcp.App, renderer=pydoc.plaintext)
    assert len(text.splitlines()) < 380, len(text.splitlines())  # was 452, 396 when filed
    for private in ("_runner", "peer._features", "_app_server", "_app_client", "__attrs_",
                    "__setattr__", "__match_args__", "Data descriptors", "NOTHING"):
        assert private not in text, private
    assert " |  App(name, version='0.0.0', instructions=None, limits=TaskLimits()," in text
    for method in ("tool(self", "resource(self", "on_elicitation(self", "run(self"):
        assert f"\n |  {method}" in text, method
    for cls in (trio_mcp.App, trio_mcp.Peer, trio_mcp.TaskHandle, trio_mcp.RequestContext):
        assert cls.__module__ == "trio_mcp", cls


async def test_sharp_task_handle_repr_has_no_private_fields() -> None:
    app = trio_mcp.App("s")

    @app.tool(task_support="optional")
    async def quick() -> str:
        return "ok"

    async with trio_mcp.open_memory_pair(app) as pair:
        handle = await pair.client.call_tool_task("quick")
        await handle.result()
        text = repr(handle)
    assert "_outcome" not in text and "_collecting" not in text and "outcome=" not in text
    assert text.startswith(f"TaskHandle(task_id={handle.task_id!r}, status=")

