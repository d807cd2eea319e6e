"""A stdio server with task tools, for the 2026-07-28 tasks client tests.

``slow_compute`` (optional), ``confirm_delete`` (required: elicits the key
``confirm``), ``failing_job`` (a tool error), ``broken_job`` (a JSON-RPC
error), ``greet`` (no task).
"""

from __future__ import annotations

from typing import Any

import trio

import trio_mcp

OBSERVED: dict[str, Any] = {"cancelled": 0}


def build_app(poll_interval: int | None = None) -> trio_mcp.App:
    """The App (``poll_interval``: the ``pollIntervalMs`` suggested, in ms)."""
    limits = trio_mcp.TaskLimits(poll_interval=poll_interval) if poll_interval else None
    app = trio_mcp.App("modern-tasks", "1.0", **({"limits": limits} if limits else {}))

    @app.tool(task_support="optional")
    async def slow_compute(seconds: float = 0.2) -> str:
        try:
            await trio.sleep(seconds)
        except trio.Cancelled:
            OBSERVED["cancelled"] += 1
            raise
        return f"done after {seconds}"

    @app.tool(task_support="required")
    async def confirm_delete(ctx: trio_mcp.RequestContext, filename: str) -> str:
        schema = {
            "type": "object",
            "properties": {"confirm": {"type": "boolean"}},
            "required": ["confirm"],
        }
        answer = await ctx.elicit(f"Delete {filename}?", schema, key="confirm")
        return f"deleted {filename}" if (answer.content or {}).get("confirm") else "kept"

    @app.tool(task_support="optional")
    async def failing_job() -> str:
        raise RuntimeError("boom")

    @app.tool(task_support="optional")
    async def broken_job() -> str:
        raise trio_mcp.McpError(-32603, "the backend is gone")

    @app.tool()
    async def greet(name: str) -> str:
        return f"Hello, {name}!"

    return app


if __name__ == "__main__":
    trio.run(trio_mcp.serve_stdio, build_app())
