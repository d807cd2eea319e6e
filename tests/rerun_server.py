"""A server process for the re-run tests of questions (issue 32).

Usage: ``python tests/rerun_server.py STORE_URL LOG`` serves Streamable HTTP on a free
port (token ``s3cret``) and prints ``serving on URL pid N`` on stderr. Its tool
``ask_then_sleep`` (re-runnable, 3 attempts) appends ``task_id attempt pid`` to LOG,
asks the requestor a yes/no question (elicitation), sleeps a little and answers with
the answer and the attempt.
"""

import os
import sys
from functools import partial

import trio

import trio_mcp

app = trio_mcp.App("rerun-server", store=sys.argv[1])
LOG = sys.argv[2]


@app.tool(task_support="optional", rerun=trio_mcp.Rerun(attempts=3))
async def ask_then_sleep(ctx: trio_mcp.RequestContext, question: str, delay: float = 0) -> str:
    """After ``delay`` s, ask ``question`` (yes/no), then sleep 0.2 s; the answer and the
    attempt."""
    with open(LOG, "a") as f:  # noqa: ASYNC230 (a test log)
        f.write(f"{ctx.task_id} {ctx.attempt} {os.getpid()}\n")
    await trio.sleep(delay)
    answer = await ctx.elicit(
        question,
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    )
    await trio.sleep(0.2)
    ok = answer.action == "accept" and (answer.content or {}).get("ok") is True
    return f"{'yes' if ok else 'no'} (attempt {ctx.attempt})"


async def main() -> None:
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            partial(trio_mcp.serve_http, app, "127.0.0.1", 0, tokens={"s3cret": "alice"})
        )
        print(f"serving on {address.url} pid {os.getpid()}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    trio.run(main)
