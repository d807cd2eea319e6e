"""A FastMCP server with the tasks extension (``fastmcp-tasks`` 4.1.4, memory backend).

    python fastmcp_tasks_server.py --http 127.0.0.1:PORT      (Streamable HTTP at /mcp)

Runs under ``.interop/fastmcp`` (not our venv). ``TasksExtension()`` with its default
``memory://`` backend (docket in process) serves ``io.modelcontextprotocol/tasks``; every
tool is ``task=TaskConfig(mode="optional", poll_interval=100 ms)`` (``task=True`` with a
short ``pollIntervalMs``: the server may run a call as a task when the request declares
the extension):

* ``add_later {a, b}``: sleeps 0.2 s, returns ``a + b`` (as text ``"sum: N"``);
* ``approve {action}``: asks mid-task for confirmation. fastmcp-tasks has no imperative
  ``ctx.elicit()`` inside a task: a tool gathers input with the guard pattern (it returns
  an ``InputRequiredResult``; the task parks in ``input_required`` with those
  ``inputRequests``; ``tasks/update`` re-runs it with ``ctx.input_responses``). It asks
  ``confirm`` (a boolean form, message ``"Really <action>?"``), then answers
  ``"<action>: approved"`` or ``"<action>: refused (<action>)"``;
* ``long_job {seconds}``: sleeps ``seconds`` (default 60), for cancellation.
"""

from __future__ import annotations

import argparse
import logging
from datetime import timedelta

import anyio
import mcp_types as t
from fastmcp import Context, FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

#: ``task=True`` with a short advertised ``pollIntervalMs`` (the default is 5 s).
TASK = TaskConfig(mode="optional", poll_interval=timedelta(milliseconds=100))

CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


def build() -> FastMCP:
    mcp = FastMCP("fastmcp-tasks-interop", version="4.1.4")
    mcp.add_extension(TasksExtension())

    @mcp.tool(task=TASK)
    async def add_later(a: int, b: int) -> str:
        """Adds two numbers, slowly (a task)."""
        await anyio.sleep(0.2)
        return f"sum: {a + b}"

    @mcp.tool(task=TASK)
    async def approve(action: str, ctx: Context) -> t.InputRequiredResult | str:
        """Asks for confirmation mid-task (guard pattern), then answers."""
        answers = ctx.input_responses or {}
        answer = answers.get("confirm")
        if answer is None:
            return t.InputRequiredResult(input_requests={
                "confirm": t.ElicitRequest(
                    method="elicitation/create",
                    params=t.ElicitRequestFormParams(
                        message=f"Really {action}?", requested_schema=CONFIRM_SCHEMA
                    ),
                ),
            })
        content = getattr(answer, "content", None) or {}
        if getattr(answer, "action", None) == "accept" and content.get("confirm") is True:
            return f"{action}: approved"
        return f"{action}: refused ({getattr(answer, 'action', None)})"

    @mcp.tool(task=TASK)
    async def long_job(seconds: float = 60.0) -> str:
        """Sleeps `seconds` seconds (a task to cancel)."""
        await anyio.sleep(seconds)
        return f"long_job done after {seconds}s"

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True, metavar="HOST:PORT")
    args = parser.parse_args()
    host, port = args.http.rsplit(":", 1)
    logging.basicConfig(level=logging.WARNING)
    build().run("streamable-http", host=host, port=int(port), path="/mcp",
                show_banner=False, log_level="warning")


if __name__ == "__main__":
    main()
