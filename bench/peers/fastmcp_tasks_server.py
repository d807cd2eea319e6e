"""Benchmark server of FastMCP with its tasks extension (``fastmcp-tasks`` 4.1.x).

Runs under FastMCP's own interpreter (``.interop/fastmcp``), never trio-mcp's:

    .interop/fastmcp/bin/python bench/peers/fastmcp_tasks_server.py   # stdio

``TasksExtension()`` with its default backend (``memory://``: Docket on an
in-process store, its worker in this process). Tools: ``echo`` (plain, never a
task) and ``noop`` (``task=True``: a task when the client declares the
extension on its request; the tool returns at once).
"""

import os
import sys

from fastmcp import FastMCP
from fastmcp_tasks import TasksExtension

mcp = FastMCP("fastmcp-tasks-bench")
mcp.add_extension(TasksExtension(url=os.environ.get("BENCH_DOCKET_URL", "memory://")))


@mcp.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool(task=True)
async def noop() -> str:
    """A task that finishes at once."""
    return "done"


if __name__ == "__main__":
    if sys.argv[1:]:
        sys.exit("usage: fastmcp_tasks_server.py (stdio only)")
    mcp.run(show_banner=False)
