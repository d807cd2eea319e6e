"""A WebSocket server with a durable task store, for the restart tests.

Usage: ``python tests/store_server.py STORE_URL`` prints ``serving on URL`` on
stderr; the bearer token ``secret`` is the identity ``alice``, ``other`` is ``bob``.
"""

import sys
from functools import partial

import trio

import trio_mcp

app = trio_mcp.App("store-server", store=sys.argv[1])


@app.tool(task_support="optional")
async def quick(text: str) -> str:
    """Answer at once."""
    return f"done: {text}"


@app.tool(task_support="optional")
async def broken() -> str:
    """Fail with a JSON-RPC error."""
    raise trio_mcp.McpError(-32602, "broken on purpose")


@app.tool(task_support="optional")
async def reports_failure() -> trio_mcp.CallToolResult:
    """Complete with a tool error."""
    return trio_mcp.CallToolResult([trio_mcp.TextContent("tool error")], is_error=True)


@app.tool(task_support="optional")
async def forever() -> str:
    """Run until cancelled."""
    await trio.sleep_forever()
    raise AssertionError


async def main() -> None:
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            partial(trio_mcp.serve_websocket, app, "127.0.0.1", 0, tokens={"secret": "alice", "other": "bob"})
        )
        print(f"serving on {address.url}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    trio.run(main)
