"""An MCP server over WebSocket that requires a bearer token.

    python examples/websocket_server.py --port 8765
    trio-mcp call --ws ws://127.0.0.1:8765/ --token alice-secret countdown \
        --args '{"n": 3}' --task
    trio-mcp tasks --ws ws://127.0.0.1:8765/ --token alice-secret list

Each token maps to an identity. A task belongs to the identity that created
it, not to the connection: a client that reconnects with the same token can
still follow its tasks, and no other identity can see them. A handshake
without a known token is refused with HTTP 401.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from functools import partial

import trio

import trio_mcp

# Token -> identity. Keep real tokens out of the source: here they can come
# from the environment as "token=identity,token=identity".
TOKENS = dict(
    pair.split("=", 1)
    for pair in os.environ.get("EXAMPLE_TOKENS", "alice-secret=alice,bob-secret=bob").split(",")
)

app = trio_mcp.App("websocket-example", "1.0")


@app.tool(task_support="optional")
async def countdown(ctx: trio_mcp.RequestContext, n: int = 3) -> str:
    """Count down from `n`, one second a step, reporting progress."""
    for step in range(1, n + 1):
        await trio.sleep(1)
        await ctx.report_progress(step, n, f"{n - step} to go")
    return "liftoff"


@app.tool()
async def whoami(ctx: trio_mcp.RequestContext) -> str:
    """The identity of the caller's token."""
    return f"you are {ctx.peer.bus.context}"


async def main(host: str, port: int) -> None:
    async with trio.open_nursery() as nursery:
        # nursery.start returns once the server listens; port 0 picks a free one.
        address = await nursery.start(
            partial(trio_mcp.serve_websocket, app, host, port, tokens=TOKENS)
        )
        print(f"listening on {address.url}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="An MCP WebSocket server with token auth.")
    parser.add_argument("--host", default="127.0.0.1", help="interface (default: loopback)")
    parser.add_argument("--port", type=int, default=8765, help="port (0: any free port)")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops the server
        trio.run(main, args.host, args.port)
