"""One exception (``ConnectionFailed``) for a connection that cannot be opened, on every
transport, and what it says (a refusal's status, the ``/mcp`` hint of a 404).
"""

from __future__ import annotations

import shlex
import socket
import subprocess
import sys
from functools import partial

import httpx
import pytest
import trio
import trio_websocket

import trio_mcp

from tests.cli_support import (
    CLI,
    one_line_error,
    run_cli_here,
    serving,
)
from tests.helpers import ROOT

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
