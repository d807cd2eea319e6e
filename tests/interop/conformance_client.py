"""The trio-mcp client the official conformance suite drives (``conformance client``).

Usage: ``python conformance_client.py <server-url>``; the suite sets
``MCP_CONFORMANCE_SCENARIO`` to the scenario it runs,
``MCP_CONFORMANCE_PROTOCOL_VERSION`` to the revision under test (0.2.0's
``--spec-version``) and ``MCP_CONFORMANCE_CONTEXT`` to the scenario's extra
data (e.g. the tool calls to make). Built on :func:`trio_mcp.open_http_client`
(``era="2026-07-28"`` when the suite tests that revision); it does what each
scenario's server expects of a client and nothing more. Exits 0 when the
scenario's calls succeeded.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

import trio

import trio_mcp

MODERN = "2026-07-28"


def build_app(peer: list[trio_mcp.Peer]) -> trio_mcp.App:
    """A client App declaring sampling, elicitation and roots.

    The elicitation handler accepts with the schema's defaults (and
    ``confirmed: true``). For the MRTR scenario, the first question about
    ``test_mrtr_echo_state`` is answered only after an unrelated tool call,
    made while that call waits for its retry (``peer`` holds the connection).
    """
    app = trio_mcp.App("trio-mcp-conformance-client", "0.1.0", host_tasks=False)
    between_rounds = {"done": False}

    @app.on_elicitation
    async def elicit(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        properties: dict[str, Any] = (params.requested_schema or {}).get("properties", {})
        content = {name: spec["default"] for name, spec in properties.items()
                   if isinstance(spec, dict) and "default" in spec}
        if "confirmed" in properties:
            content["confirmed"] = True
        if params.message == "Please confirm to continue" and peer and not between_rounds["done"]:
            between_rounds["done"] = True
            result = await peer[0].call_tool("test_mrtr_unrelated", {})
            print(f"test_mrtr_unrelated (between rounds): {result.text}", file=sys.stderr)
        return trio_mcp.ElicitResult(action="accept", content=content)

    @app.on_sampling
    async def sample(
        ctx: trio_mcp.RequestContext, params: trio_mcp.CreateMessageParams
    ) -> trio_mcp.CreateMessageResult:
        return trio_mcp.CreateMessageResult(
            role="assistant", content={"type": "text", "text": "ok"}, model="conformance"
        )

    @app.on_roots
    async def roots(ctx: trio_mcp.RequestContext) -> list[trio_mcp.Root]:
        return [trio_mcp.Root("file:///tmp", "tmp")]

    return app


async def _call(client: trio_mcp.Peer, name: str, arguments: dict[str, Any]) -> None:
    result = await client.call_tool(name, arguments)
    print(f"{name}: {result.text}", file=sys.stderr)


async def run_legacy(client: trio_mcp.Peer, scenario: str) -> None:
    """The 0.1.16 scenarios (2025-11-25)."""
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
        await _call(client, name, arguments)


async def run_modern(client: trio_mcp.Peer, scenario: str, context: dict[str, Any]) -> None:
    """The 2026-07-28 scenarios of 0.2.0."""
    tools = await client.list_all_tools()
    names = [tool.name for tool in tools]
    print(f"tools: {names}", file=sys.stderr)
    if scenario == "request-metadata":
        return
    if scenario == "sep-2322-client-request-state":
        for name in ("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_no_result_type"):
            await _call(client, name, {})
        return
    if scenario == "http-standard-headers":
        for name in names:
            await _call(client, name, {})
        for resource in await client.list_all_resources():
            print(f"read {resource.uri}: {await client.read_resource(resource.uri)}",
                  file=sys.stderr)
        for prompt in await client.list_all_prompts():
            print(f"prompt {prompt.name}: {await client.get_prompt(prompt.name)}",
                  file=sys.stderr)
        return
    if scenario == "http-custom-headers":
        for call in context.get("toolCalls", []):
            await _call(client, call["name"], call.get("arguments") or {})
        return
    # http-invalid-tool-headers and the rest: call every tool the client kept
    # (an invalid x-mcp-header tool is left out of list_all_tools).
    for tool in tools:
        schema = tool.input_schema or {}
        arguments = {name: "x" for name in schema.get("required", [])
                     if (schema.get("properties") or {}).get(name, {}).get("type") == "string"}
        await _call(client, tool.name, arguments)


async def run(url: str, scenario: str) -> None:
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
    context: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    era = MODERN if version == MODERN else "2025-11-25"
    peer: list[trio_mcp.Peer] = []
    for attempt in range(2):
        try:
            async with trio_mcp.open_http_client(url, build_app(peer), era=era) as client:
                peer.append(client)
                if era == MODERN:
                    await run_modern(client, scenario, context)
                else:
                    await run_legacy(client, scenario)
            return
        except trio_mcp.UnsupportedProtocolVersion as exc:
            # The server refused our version while naming ones it speaks:
            # open again with one we share (request-metadata checks this).
            if attempt or MODERN not in exc.supported:
                raise
            print(f"retrying after {exc}", file=sys.stderr)


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    trio.run(run, sys.argv[1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize"))


if __name__ == "__main__":
    main()
