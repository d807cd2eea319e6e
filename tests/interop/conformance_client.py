"""The trio-mcp client the official conformance suite drives (``conformance client``).

Usage: ``python conformance_client.py <server-url>``; the suite sets
``MCP_CONFORMANCE_SCENARIO`` to the scenario it runs. Built on
:func:`trio_mcp.open_http_client`; it does what each scenario's server expects
of a client and nothing more. Exits 0 when the scenario's calls succeeded.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import trio

import trio_mcp


def build_app() -> trio_mcp.App:
    """A client App whose elicitation handler accepts with the schema's defaults."""
    app = trio_mcp.App("trio-mcp-conformance-client", "0.1.0", host_tasks=False)

    @app.on_elicitation
    async def elicit(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        properties: dict[str, Any] = (params.requested_schema or {}).get("properties", {})
        content = {name: spec["default"] for name, spec in properties.items()
                   if isinstance(spec, dict) and "default" in spec}
        return trio_mcp.ElicitResult(action="accept", content=content)

    return app


async def run(url: str, scenario: str) -> None:
    async with trio_mcp.open_http_client(url, build_app()) as client:
        if scenario == "initialize":
            return
        tools = {tool.name for tool in await client.list_all_tools()}
        if scenario == "tools_call":
            calls: list[tuple[str, dict[str, Any]]] = [("add_numbers", {"a": 5, "b": 3})]
        elif scenario == "elicitation-sep1034-client-defaults":
            calls = [("test_client_elicitation_defaults", {})]
        elif scenario == "sse-retry":
            calls = [("test_reconnection", {})]
        else:
            calls = [(name, {}) for name in sorted(tools)]
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            print(f"{name}: {result.text}", file=sys.stderr)


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    trio.run(run, sys.argv[1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize"))


if __name__ == "__main__":
    main()
