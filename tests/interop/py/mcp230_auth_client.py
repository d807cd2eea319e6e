"""The Python SDK ``mcp`` 2.3.0's client against our OAuth-protected server (Streamable HTTP).

    python mcp230_auth_client.py MODE URL bearer TOKEN
    python mcp230_auth_client.py MODE URL client_credentials CLIENT_ID SECRET ISSUER SCOPE

``MODE`` is the ``Client``'s ``mode=`` (``auto`` or ``2026-07-28``). ``bearer``: an
``httpx2`` client with ``Authorization: Bearer TOKEN``; ``client_credentials``: the
SDK's ``ClientCredentialsOAuthProvider`` (it discovers our protected-resource metadata,
then the authorization server's, and gets its own token). Runs under ``.interop/mcp230``;
prints one JSON report: ``whoami``'s answer, the tool names, and ``admin_echo``'s outcome.
"""

from __future__ import annotations

import json
import sys
import traceback
import warnings
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

warnings.simplefilter("ignore", DeprecationWarning)


class MemoryStorage:
    """The SDK's TokenStorage protocol, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client_info: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


async def main(argv: list[str]) -> dict[str, Any]:
    mode, url, kind, *rest = argv
    report: dict[str, Any] = {"mode": mode, "kind": kind}
    if kind == "bearer":
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {rest[0]}"})
    else:
        client_id, secret, issuer, scope = rest
        provider = ClientCredentialsOAuthProvider(
            server_url=url, storage=MemoryStorage(), client_id=client_id,
            client_secret=secret, scope=scope, issuer=issuer)
        http = create_mcp_http_client(auth=provider)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        report["protocol_version"] = client.protocol_version
        tools = await client.list_tools()
        report["tools"] = sorted(tool.name for tool in tools.tools)
        whoami = await client.call_tool("whoami", {})
        report["whoami"] = json.loads(whoami.content[0].text)
        try:
            echoed = await client.call_tool("admin_echo", {"text": "hi"})
            report["admin_echo"] = {"ok": True, "is_error": bool(echoed.is_error),
                                    "text": echoed.content[0].text if echoed.content else None}
        except Exception as exc:  # a 403 insufficient_scope
            report["admin_echo"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
    return report


if __name__ == "__main__":
    try:
        print(json.dumps(anyio.run(main, sys.argv[1:])))
    except BaseException:
        # Why, on both streams: the report (stdout) for the test, the traceback (stderr)
        # for whoever reads the failed test's output.
        print(json.dumps({"fatal": traceback.format_exc()[-3000:]}))
        traceback.print_exc()
        sys.exit(1)
    _ = httpx2
