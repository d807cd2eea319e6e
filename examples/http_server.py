"""An MCP server over Streamable HTTP that requires a bearer token.

    python examples/http_server.py --port 8000
    # endpoint: http://127.0.0.1:8000/mcp

Each token maps to an identity. Sessions (``Mcp-Session-Id``) are per client,
but tasks belong to the identity: a client that starts a new session with the
same token still sees its tasks, and no other identity can. A request without
a known token gets HTTP 401; a browser page from another origin, or a request
whose ``Host`` is not this machine, gets HTTP 403.

The same ASGI application can be mounted in your own Trio ASGI server:
``trio_mcp.StreamableHttpApp(app, policy=trio_mcp.HttpPolicy(tokens=...))``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from functools import partial

import trio

import trio_mcp

# Token -> identity; real tokens come from the environment, "token=identity,...".
TOKENS = dict(
    pair.split("=", 1)
    for pair in os.environ.get("EXAMPLE_TOKENS", "alice-secret=alice,bob-secret=bob").split(",")
)

app = trio_mcp.App("http-example", "1.0")


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
        address = await nursery.start(partial(trio_mcp.serve_http, app, host, port, tokens=TOKENS))
        print(f"listening on {address.url}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="An MCP Streamable HTTP server with token auth.")
    parser.add_argument("--host", default="127.0.0.1", help="interface (default: loopback)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free port)")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops the server
        trio.run(main, args.host, args.port)
