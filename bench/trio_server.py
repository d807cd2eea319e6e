"""The trio-mcp benchmark server: ``python -m bench.trio_server [--ws PORT]``.

Tools: ``echo`` (plain), ``noop`` (a zero-length task), ``park`` (a task that
runs until cancelled), ``stats`` (this process's RSS and CPU time). Over stdio by
default; with ``--ws PORT`` it serves WebSocket on 127.0.0.1:PORT.
"""

from __future__ import annotations

import argparse

import trio

import trio_mcp
from bench._common import stats_text

#: Room for the 10,000-task workloads (and the tasks/s loop's finished tasks).
LIMITS = trio_mcp.TaskLimits(
    max_live_per_requestor=100_000,
    max_tasks=1_000_000,
    default_ttl=600_000,
    max_ttl=3_600_000,
)


def build_app() -> trio_mcp.App:
    app = trio_mcp.App("trio-mcp-bench", "1.0", limits=LIMITS)

    @app.tool(inline=True)  # quick and never blocking: runs on the event loop
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @app.tool()
    async def echo_async(text: str) -> str:
        """Return the text (an async tool: a Trio task per call)."""
        return text

    @app.tool(task_support="optional")
    async def noop() -> str:
        """Finish at once."""
        return "ok"

    @app.tool(task_support="optional")
    async def park() -> str:
        """Run until cancelled."""
        await trio.sleep_forever()

    @app.tool()
    async def stats() -> str:
        """This process's RSS (bytes) and CPU time (seconds), as JSON."""
        return stats_text()

    return app


async def serve_ws(port: int) -> None:
    await trio_mcp.serve_websocket(build_app(), "127.0.0.1", port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ws", type=int, metavar="PORT", help="serve WebSocket on 127.0.0.1")
    args = parser.parse_args()
    if args.ws is not None:
        trio.run(serve_ws, args.ws)
    else:
        trio.run(trio_mcp.serve_stdio, build_app())


if __name__ == "__main__":
    main()
