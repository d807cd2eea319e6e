"""The Python SDK ``mcp`` 1.30.0's Streamable HTTP client driving a trio-mcp server.

Runs under the interpreter of the mcp 1.30.0 venv (``.interop/mcp130``), never ours:

    python mcp_http_client.py <url>

Uses ``mcp.client.streamable_http.streamablehttp_client`` and ``ClientSession``: lists the
tools, calls ``echo``, calls ``sleep`` with a progress callback, and calls ``summarize``,
whose sampling request the client answers with its sampling callback. Prints ONE JSON
report on stdout; diagnostics go to stderr.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import anyio

warnings.simplefilter("ignore", DeprecationWarning)

import mcp.types as types  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamablehttp_client  # noqa: E402

SAMPLED_TEXT = "sampled over streamable http"


async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=SAMPLED_TEXT),
        model="mcp130-test",
    )


def text_of(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def main(url: str) -> None:
    report: dict[str, Any] = {}
    async with streamablehttp_client(url) as (read, write, get_session_id):
        async with ClientSession(read, write, sampling_callback=sample) as session:
            init = await session.initialize()
            report["protocolVersion"] = init.protocolVersion
            report["serverName"] = init.serverInfo.name
            report["sessionId"] = get_session_id()
            report["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
            report["echo"] = text_of(await session.call_tool("echo", {"text": "hi"}))
            progress: list[float] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(value)

            slept = await session.call_tool("sleep", {"seconds": 0.2, "steps": 2},
                                            progress_callback=on_progress)
            report["sleep"] = text_of(slept)
            report["progress"] = progress
            report["summarize"] = text_of(await session.call_tool("summarize", {"text": "x"}))
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
