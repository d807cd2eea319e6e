"""One server process of a cluster sharing a task store (Redis, PostgreSQL), for the cluster tests.

Usage: ``python tests/cluster_server.py STORE_URL`` prints ``serving on URL`` on
stderr. Tokens: ``alice`` -> identity alice, ``bob`` -> bob, ``tN`` -> user-N.
"""

import os
import sys
from functools import partial
from pathlib import Path

import trio

import trio_mcp

app = trio_mcp.App("cluster-server", store=sys.argv[1])
TOKENS = {"alice": "alice", "bob": "bob", **{f"t{n}": f"user-{n}" for n in range(20)}}


@app.tool(task_support="optional")
async def quick(text: str) -> str:
    """Answer at once, naming the process that ran it."""
    return f"{text} by {os.getpid()}"


@app.tool(task_support="optional")
async def forever(marker: str) -> str:
    """Run until cancelled; on cancellation write this process's pid to the file ``marker``."""
    try:
        await trio.sleep_forever()
    except trio.Cancelled:
        Path(marker).write_text(str(os.getpid()))  # noqa: ASYNC240 (a test marker)
        raise
    raise AssertionError


@app.tool(task_support="required")
async def approve(ctx: trio_mcp.RequestContext, question: str) -> str:
    """Ask the requestor a yes/no question (elicitation, mid-task)."""
    answer = await ctx.elicit(
        question,
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    )
    ok = answer.action == "accept" and (answer.content or {}).get("ok") is True
    return f"{'approved' if ok else 'declined'} by {os.getpid()}"


async def main() -> None:
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            partial(trio_mcp.serve_websocket, app, "127.0.0.1", 0, tokens=TOKENS)
        )
        print(f"serving on {address.url} pid {os.getpid()}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    trio.run(main)
