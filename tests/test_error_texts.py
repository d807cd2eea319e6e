"""What callers catch and read, the same in both eras (issue 35, finding 5), over loopback HTTP.

README "What callers catch" and docs/howto/transports.md promise ``ConnectionFailed`` with its
``status_code`` for a refused connection on every transport and in either era; an error a
handler raises reads the same whichever era carried it; each message says what a Python
user does next.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import trio_mcp

from tests.http_support import TOKENS, Raw, http_client, messages_of, serving

pytestmark = pytest.mark.timeout(60)

ERAS = ["2025-11-25", "2026-07-28"]
UNAUTHORIZED = "Unauthorized: a valid bearer token is required"


def _app() -> trio_mcp.App:
    app = trio_mcp.App("texts")

    @app.tool()
    async def bad() -> str:
        """Refuse with an McpError."""
        raise trio_mcp.McpError(trio_mcp.INVALID_PARAMS, "bad path")

    @app.tool()
    async def ask(ctx: trio_mcp.RequestContext) -> str:
        """Ask the client a question."""
        answer = await ctx.elicit("ok?", {"type": "object",
                                          "properties": {"ok": {"type": "boolean"}}})
        return answer.action

    return app


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("token", [None, "wrong"], ids=["no-token", "bad-token"])
async def test_error_refused_token_is_connection_failed_401_in_both_eras(
    era: str, token: str | None
) -> None:
    async with serving(_app(), policy=trio_mcp.HttpPolicy(tokens=TOKENS)) as (url, _):
        with pytest.raises(trio_mcp.ConnectionFailed) as info:
            async with trio_mcp.open_http_client(url, token=token, era=era):
                pass  # pragma: no cover
    refused: Any = info.value
    assert refused.status_code == 401
    assert isinstance(refused, httpx.HTTPStatusError)  # the transport's own type too
    assert refused.response.status_code == 401
    # The body's JSON-RPC message, not its raw bytes (b'{"jsonrpc":...').
    assert str(refused) == f"HTTP 401 from {url}: {UNAUTHORIZED}"


@pytest.mark.parametrize("era", ERAS)
async def test_error_an_mcp_error_reads_the_same_in_both_eras(era: str) -> None:
    async with serving(_app()) as (url, _):
        async with trio_mcp.open_http_client(url, era=era) as client:
            with pytest.raises(trio_mcp.RemoteError) as info:
                await client.call_tool("bad")
    assert str(info.value) == "[-32602] bad path"
    assert info.value.message == "bad path"
    if era == "2026-07-28":  # the HTTP status stays known, in data
        assert info.value.data == {"httpStatus": 400}


async def test_error_a_missing_elicitation_handler_names_the_decorator_2026() -> None:
    async with serving(_app()) as (url, _):
        async with trio_mcp.open_http_client(url, era="2026-07-28") as client:
            with pytest.raises(trio_mcp.MissingClientCapability) as info:
                await client.call_tool("ask")
    assert info.value.required == {"elicitation": {}}
    assert info.value.message.endswith(
        "; this client declares it when its App registers @app.on_elicitation")


async def test_error_a_2026_method_in_a_2025_session_gets_the_era_hint() -> None:
    """The reverse of a 2025-11-25 ``initialize`` sent as 2026-07-28 (which names both
    eras): ``tasks/update`` and ``subscriptions/listen`` in a 2025-11-25 session (sent raw:
    they are not valid 2025-11-25 messages), and the session goes on serving."""
    async with serving(_app()) as (url, _), http_client() as http:
        raw = Raw(http, url)
        await raw.initialize()
        for number, (method, where) in enumerate(
            (("tasks/update", "tasks extension"), ("subscriptions/listen", "MCP 2026-07-28")),
            start=2,
        ):
            response = await raw.post(
                {"jsonrpc": "2.0", "id": number, "method": method, "params": {"taskId": "x"}},
                mcp_protocol_version="2025-11-25",
            )
            (answer,) = messages_of(response.content) if response.headers[
                "content-type"].startswith("text/event-stream") else [response.json()]
            error = answer["error"]
            assert error["code"] == trio_mcp.METHOD_NOT_FOUND
            assert error["message"].startswith(f"Method not found: {method} (a method of ")
            assert where in error["message"]
            assert "this connection speaks MCP 2025-11-25" in error["message"]
        ping = await raw.post({"jsonrpc": "2.0", "id": 9, "method": "ping"},
                              mcp_protocol_version="2025-11-25")
        assert ping.status_code == 200  # still serving


async def test_error_a_trailing_slash_gets_the_mcp_path_hint() -> None:
    async with serving(_app()) as (url, _):
        with pytest.raises(trio_mcp.ConnectionFailed) as info:
            async with trio_mcp.open_http_client(url + "/"):
                pass  # pragma: no cover
    assert info.value.status_code == 404  # type: ignore[attr-defined]
    assert str(info.value).endswith(f"(is the path right? trio-mcp serves /mcp: {url})")


async def test_error_a_websocket_client_at_the_http_server_is_told_so() -> None:
    async with serving(_app()) as (url, _):
        ws_url = "ws" + url.removeprefix("http")
        with pytest.raises(trio_mcp.ConnectionFailed) as info:
            async with trio_mcp.open_websocket_client(ws_url):
                pass  # pragma: no cover
    assert info.value.status_code == 400  # type: ignore[attr-defined]
    assert str(info.value) == (
        f"the server refused the WebSocket connection to {ws_url}: HTTP 400: this is a "
        "Streamable HTTP MCP endpoint, not a WebSocket one: POST to /mcp over HTTP")


# --- smaller (finding 9) -------------------------------------------------------------------------


def test_require_scopes_documents_and_names_its_kinds() -> None:
    doc = trio_mcp.App.require_scopes.__doc__ or ""
    for kind, names in (("tool", "name"), ("resource", "URI"), ("template", "URI template"),
                        ("prompt", "name")):
        assert f'``"{kind}"``' in doc and names in doc
    app = trio_mcp.App("scoped")
    with pytest.raises(ValueError) as info:
        app.require_scopes("resources", "test://x", ["read"])
    assert str(info.value) == (
        "unknown kind 'resources': one of 'tool', 'resource', 'template', 'prompt'")
