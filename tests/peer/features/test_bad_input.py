"""Bad input gets a clear JSON-RPC error and the connection keeps working.

Each case runs over memory, a real stdio subprocess, a real WebSocket and real
Streamable HTTP; after each, the peer still answers a ping.
"""

from __future__ import annotations

import json

import pytest

import trio_mcp

from tests.raw import open_raw


async def test_bad_input_malformed_json_is_parse_error_with_null_id(transport: str) -> None:
    async with open_raw(transport) as raw:
        await raw.initialize()
        await raw.send_line(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"')
        msg = await raw.recv()
        assert msg["id"] is None
        assert msg["error"]["code"] == trio_mcp.PARSE_ERROR
        assert await raw.ping_ok()


@pytest.mark.parametrize(
    "payload",
    [
        [1, 2, 3],
        "just a string",
        {"jsonrpc": "2.0"},
        {"jsonrpc": "1.0", "id": 9, "method": "ping"},
        {"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"},
        {"jsonrpc": "2.0", "id": 9, "method": "ping", "params": [1]},
    ],
)
async def test_bad_input_non_request_object_is_invalid_request(
    transport: str, payload: object
) -> None:
    async with open_raw(transport) as raw:
        await raw.initialize()
        await raw.send(payload)
        msg = await raw.recv()
        assert msg["error"]["code"] == trio_mcp.INVALID_REQUEST
        assert msg["id"] in (None, 9)
        assert await raw.ping_ok()


async def test_bad_input_unknown_method_is_method_not_found(transport: str) -> None:
    async with open_raw(transport) as raw:
        await raw.initialize()
        msg = await raw.request(5, "no/such/method", {})
        assert msg["error"]["code"] == trio_mcp.METHOD_NOT_FOUND
        assert await raw.ping_ok()


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"arguments": {}}),
        ("tools/call", {"name": 17}),
        ("tools/call", {"name": "echo", "arguments": "text"}),
        ("tasks/get", {}),
        ("tasks/get", {"taskId": 12}),
        ("tools/list", {"cursor": 5}),
        ("logging/setLevel", {"level": "loud"}),
        ("logging/setLevel", {}),
    ],
)
async def test_bad_input_bad_params_is_invalid_params(
    transport: str, method: str, params: dict[str, object]
) -> None:
    async with open_raw(transport) as raw:
        await raw.initialize()
        msg = await raw.request(6, method, params)
        assert msg["error"]["code"] == trio_mcp.INVALID_PARAMS
        assert await raw.ping_ok()


@pytest.mark.parametrize(
    "method",
    ["resources/list", "resources/read", "resources/templates/list", "resources/subscribe",
     "prompts/list", "prompts/get", "completion/complete", "roots/list",
     "sampling/createMessage"],
)
async def test_bad_input_feature_the_server_did_not_register_is_method_not_found(
    transport: str, method: str
) -> None:
    """The example server has tools only: its other features answer -32601."""
    async with open_raw(transport) as raw:
        await raw.initialize()
        msg = await raw.request(13, method, {"uri": "test://x", "name": "x"})
        assert msg["error"]["code"] == trio_mcp.METHOD_NOT_FOUND
        assert await raw.ping_ok()


async def test_bad_input_handler_crash_is_internal_error_without_traceback() -> None:
    app = trio_mcp.App("crashy")

    @app.tool()
    async def boom() -> str:  # pragma: no cover - never called
        return "x"

    async def crash(req: object) -> object:
        raise ZeroDivisionError("secret /home/internal/path")

    async with open_raw("memory", app) as raw:
        await raw.initialize()
        # Reach into the router to make one handler crash, as a bug would.
        peer_handlers = [p for p in app.registry._peers.values()][0][0].session.request_handlers
        peer_handlers["tools/list"] = crash
        msg = await raw.request(7, "tools/list")
        assert msg["error"] == {"code": trio_mcp.INTERNAL_ERROR, "message": "Internal error"}
        assert "secret" not in json.dumps(msg)
        assert await raw.ping_ok()


async def test_bad_input_requests_before_initialize_get_an_error(transport: str) -> None:
    async with open_raw(transport) as raw:
        if transport == "http":
            # No session before initialize: HTTP 400, with the error for this id.
            msg = await raw.request("ping", "ping")
            assert msg["error"]["code"] == trio_mcp.INVALID_REQUEST
            assert "Mcp-Session-Id" in msg["error"]["message"]
        else:
            assert await raw.ping_ok()  # ping is allowed before initialization
        msg = await raw.request(8, "tools/list")
        assert msg["error"]["code"] == trio_mcp.INVALID_REQUEST
        await raw.initialize()
        msg = await raw.request(9, "tools/list")
        assert "result" in msg


async def test_bad_input_second_initialize_is_rejected(transport: str) -> None:
    async with open_raw(transport) as raw:
        await raw.initialize()
        msg = await raw.request(10, "initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "again", "version": "1"}})
        assert msg["error"]["code"] == trio_mcp.INVALID_REQUEST
        assert await raw.ping_ok()


async def test_bad_input_too_long_line_is_rejected_not_buffered() -> None:
    """stdio: a line over the limit (4 MiB by default) is dropped with -32600."""
    async with open_raw("stdio") as raw:
        await raw.initialize()
        huge = b'{"jsonrpc":"2.0","id":11,"method":"ping","params":{"x":"' + b"a" * (5 << 20)
        await raw.send_line(huge + b'"}}')
        msg = await raw.recv(timeout=30)
        assert msg["error"]["code"] == trio_mcp.INVALID_REQUEST
        assert "limit" in msg["error"]["message"]
        assert await raw.ping_ok()


async def test_bad_input_duplicate_inflight_id_is_rejected() -> None:
    async with open_raw("memory") as raw:
        await raw.initialize()
        call = {"jsonrpc": "2.0", "id": 12, "method": "tools/call",
                "params": {"name": "sleep", "arguments": {"seconds": 0.3}}}
        await raw.send(call)
        await raw.send(call)
        first = await raw.recv()
        assert first["id"] == 12 and first["error"]["code"] == trio_mcp.INVALID_REQUEST
        second = await raw.recv()
        assert second["id"] == 12 and "result" in second
