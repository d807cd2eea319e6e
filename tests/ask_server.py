"""A small server for tests: one tool that elicits as a task hosted by the client.

Run as a script it serves over stdio, so tests can drive it as a subprocess.
"""

from __future__ import annotations

import trio

import trio_mcp


def build_app() -> trio_mcp.App:
    """An App with ``ask_name``: elicits a name (as a client-hosted task) and greets."""
    app = trio_mcp.App("ask-server", "1.0")

    @app.tool(task_support="optional")
    async def ask_name(ctx: trio_mcp.RequestContext) -> str:
        """Ask the user's name through the client, as a task the client hosts."""
        answer = await ctx.elicit(
            "Name?",
            {"type": "object", "properties": {"name": {"type": "string"}}},
            as_task=True,
            ttl=10_000,
        )
        return f"hello {(answer.content or {}).get('name')}"

    return app


if __name__ == "__main__":
    trio.run(trio_mcp.serve_stdio, build_app())
