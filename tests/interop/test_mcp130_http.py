"""The Python SDK ``mcp`` 1.30.0's Streamable HTTP client -> our ``serve_http``.

An independent client (httpx + httpx-sse inside the SDK) against our server: session
header, SSE answers with progress, and a server-to-client sampling request.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import trio

import trio_mcp

from ..helpers import example_app
from . import _support

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

CLIENT = _support.PY_DIR / "mcp_http_client.py"


async def test_mcp130_streamable_http_client_against_serve_http(mcp130: Path) -> None:
    async with trio.open_nursery() as nursery:
        address = await nursery.start(partial(trio_mcp.serve_http, example_app()))
        with trio.fail_after(90):
            proc = await trio.run_process([str(mcp130), str(CLIENT), address.url],
                                          capture_stdout=True, capture_stderr=True, check=False)
        nursery.cancel_scope.cancel()
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report = json.loads(proc.stdout)
    assert report["protocolVersion"] == "2025-11-25"
    assert report["serverName"] == "trio-mcp-example"
    assert report["sessionId"]
    assert report["tools"] == [
        "approve", "echo", "fail", "park", "resumable_sleep", "sleep", "summarize"
    ]
    assert report["echo"] == "hi"
    assert report["sleep"] == "slept 0.2 seconds" and report["progress"] == [1, 2]
    assert report["summarize"] == "sampled over streamable http"
