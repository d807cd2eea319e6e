"""The trio-mcp OAuth client the official conformance suite drives (``auth/client-credentials-*``).

Usage: ``python conformance_auth_client.py <server-url>``. The suite sets
``MCP_CONFORMANCE_SCENARIO``, ``MCP_CONFORMANCE_CONTEXT`` (the client's
credentials: ``client_id`` with ``client_secret``, or with ``private_key_pem`` and
``signing_algorithm``) and, in 0.2.0, ``MCP_CONFORMANCE_PROTOCOL_VERSION``. Built on
``open_http_client(url, auth=ClientCredentials(...))``: the first request gets the
scenario server's 401, the provider discovers its protected-resource metadata and the
authorization server's, gets a token with ``client_credentials`` (``client_secret_basic``
or a ``private_key_jwt`` assertion) and retries; then ``tools/list`` and a call of
``test-tool``. Exits 0 when they succeeded.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import trio

import trio_mcp
from trio_mcp.auth import ClientCredentials

MODERN = "2026-07-28"


def provider(context: dict[str, Any]) -> ClientCredentials:
    """The ``client_credentials`` provider for the scenario's credentials."""
    if "private_key_pem" in context:
        return ClientCredentials(context["client_id"], private_key=context["private_key_pem"],
                                 signing_algorithm=context.get("signing_algorithm", "ES256"))
    # auth/resource-mismatch gives no credentials: the flow must stop at the metadata.
    return ClientCredentials(context.get("client_id", "trio-mcp-conformance"),
                             context.get("client_secret", "unused"))


async def run(url: str) -> None:
    context: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
    era = MODERN if version == MODERN else "2025-11-25"
    auth = provider(context)
    async with trio_mcp.open_http_client(url, auth=auth, era=era) as client:
        names = [tool.name for tool in await client.list_all_tools()]
        print(f"tools: {names} (tokens fetched: {auth.tokens_fetched})", file=sys.stderr)
        result = await client.call_tool("test-tool", {})
        print(f"test-tool: {result.text}", file=sys.stderr)


if __name__ == "__main__":
    trio.run(run, sys.argv[1])
