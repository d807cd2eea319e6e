"""Our clients in 2026-07-28 and ``auto``, over real processes and sockets.

``examples/everything_server.py`` serves both eras over stdio and WebSocket:
``era="auto"`` and ``era="2026-07-28"`` speak 2026-07-28 to it (tools, an
MRTR elicitation answered by the client App, resources, prompts). Against a
2025-11-25-only server (a raw NDJSON script here) ``auto`` falls back to
``initialize`` and remembers it per server (:data:`ERA_CACHE`: a second open
does not probe). The modern error codes arrive typed.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp.peer._dialects._modern_client import ERA_CACHE

from tests.helpers import EXAMPLES
from tests.interop import _support

EVERYTHING = [sys.executable, str(EXAMPLES / "everything_server.py")]

#: A raw stdio server: ``legacy`` (2025-11-25 only: server/discover is -32601),
#: ``modern`` (server/discover; tools/call answers the modern error codes) or
#: ``unsupported`` (server/discover: -32022 naming a version nobody speaks).
#: Every method it receives is appended to the log file.
RAW_SERVER = r'''
import json, sys
mode, log = sys.argv[1], sys.argv[2]
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    with open(log, "a") as f:
        f.write(json.dumps({"method": method, "meta": (msg.get("params") or {}).get("_meta")}) + "\n")
    if rid is None or method is None:
        continue
    def ok(result):
        send({"jsonrpc": "2.0", "id": rid, "result": result})
    def err(code, message, data=None):
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message, "data": data}})
    if method == "server/discover":
        if mode == "legacy":
            err(-32601, "Method not found")
        elif mode == "unsupported":
            err(-32022, "Unsupported protocol version", {"supported": ["1999-01-01"]})
        else:
            ok({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}})
    elif method == "initialize":
        ok({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-legacy", "version": "1"}})
    elif method == "tools/list":
        ok({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "needs_sampling":
            err(-32021, "Missing required client capability: sampling",
                {"requiredCapabilities": {"sampling": {}}})
        elif name == "mismatch":
            err(-32020, "Header mismatch")
        else:
            ok({"content": [{"type": "text", "text": "ok"}]})
    else:
        ok({})
'''


def client_app() -> trio_mcp.App:
    app = trio_mcp.App("modern-test-client", "1.0", host_tasks=False)

    @app.on_elicitation
    async def elicit(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        return trio_mcp.ElicitResult(action="accept", content={"response": "from the App"})

    return app


def raw_server(tmp_path: Path, mode: str) -> tuple[list[str], Path]:
    log = tmp_path / f"{mode}.log"
    return [sys.executable, "-c", RAW_SERVER, mode, str(log)], log


def methods(log: Path) -> list[str]:
    return [json.loads(line)["method"] for line in log.read_text().splitlines()]


async def exercise(client: trio_mcp.Peer) -> None:
    """What everything_server offers, in 2026-07-28."""
    assert client.protocol_version == "2026-07-28"
    assert client.remote_info is not None
    tools = {tool.name for tool in await client.list_all_tools()}
    assert {"test_simple_text", "test_elicitation"} <= tools
    assert (await client.call_tool("test_simple_text")).text
    answer = await client.call_tool("test_elicitation", {"message": "Who?"})
    assert "from the App" in answer.text and "accept" in answer.text
    read = await client.read_resource("test://static-text")
    assert read.contents
    prompt = await client.get_prompt("test_simple_prompt")
    assert prompt.messages


@pytest.fixture
def ws_url() -> Iterator[str]:
    port = _support.free_port()
    with _support.background_server([*EVERYTHING, "--ws", f"127.0.0.1:{port}"], port) as url:
        yield url


@pytest.mark.parametrize("era", ["auto", "2026-07-28"])
async def test_stdio_modern(era: str) -> None:
    async with trio_mcp.open_stdio_client(EVERYTHING, client_app(), era=era) as client:
        await exercise(client)
    if era == "auto":
        assert ERA_CACHE[shlex.join(EVERYTHING)] == "2026-07-28"


@pytest.mark.parametrize("era", ["auto", "2026-07-28"])
async def test_websocket_modern(ws_url: str, era: str) -> None:
    async with trio_mcp.open_websocket_client(ws_url, client_app(), era=era) as client:
        await exercise(client)


async def test_websocket_default_is_2025(ws_url: str) -> None:
    async with trio_mcp.open_websocket_client(ws_url, client_app()) as client:
        assert client.protocol_version == "2025-11-25"
        assert (await client.call_tool("test_elicitation", {"message": "Who?"})).text


async def test_auto_falls_back_to_initialize_and_remembers(tmp_path: Path) -> None:
    argv, log = raw_server(tmp_path, "legacy")
    async with trio_mcp.open_stdio_client(argv, client_app(), era="auto") as client:
        assert client.protocol_version == "2025-11-25"
        assert [t.name for t in await client.list_all_tools()] == ["t"]
    assert methods(log)[:2] == ["server/discover", "initialize"]
    assert ERA_CACHE[shlex.join(argv)] == "2025-11-25"
    log.unlink()
    async with trio_mcp.open_stdio_client(argv, client_app(), era="auto") as client:
        assert client.protocol_version == "2025-11-25"
    assert methods(log)[0] == "initialize"  # no second probe


async def test_modern_requests_carry_meta(tmp_path: Path) -> None:
    argv, log = raw_server(tmp_path, "modern")
    async with trio_mcp.open_stdio_client(argv, client_app(), era="2026-07-28") as client:
        assert (await client.call_tool("t")).text == "ok"
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["method"] for e in entries] == ["server/discover", "tools/call"]
    for entry in entries:
        meta: dict[str, Any] = entry["meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "modern-test-client"
        assert "elicitation" in meta["io.modelcontextprotocol/clientCapabilities"]


async def test_typed_modern_errors(tmp_path: Path) -> None:
    argv, _ = raw_server(tmp_path, "modern")
    async with trio_mcp.open_stdio_client(argv, client_app(), era="2026-07-28") as client:
        with pytest.raises(trio_mcp.MissingClientCapability) as missing:
            await client.call_tool("needs_sampling")
        assert missing.value.code == -32021
        with pytest.raises(trio_mcp.HeaderMismatch):
            await client.call_tool("mismatch")
    argv, _ = raw_server(tmp_path, "unsupported")
    with pytest.raises(trio_mcp.UnsupportedProtocolVersion) as unsupported:
        async with trio_mcp.open_stdio_client(argv, client_app(), era="2026-07-28"):
            pass
    assert unsupported.value.code == -32022
    assert unsupported.value.supported == ["1999-01-01"]
    # auto: a modern error identifies a modern server, so there is no fallback.
    with pytest.raises(trio_mcp.UnsupportedProtocolVersion):
        async with trio_mcp.open_stdio_client(argv, client_app(), era="auto"):
            pass


async def test_missing_capability_from_everything_server() -> None:
    bare = trio_mcp.App("bare-client", "1.0", host_tasks=False)
    async with trio_mcp.open_stdio_client(EVERYTHING, bare, era="2026-07-28") as client:
        with pytest.raises(trio_mcp.MissingClientCapability):
            await client.call_tool("test_missing_capability")


async def test_bogus_era_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="era"):
        async with trio_mcp.open_stdio_client(EVERYTHING, era="bogus"):
            pass
    with pytest.raises(ValueError, match="era"):
        async with trio_mcp.open_websocket_client("ws://127.0.0.1:9/", era="bogus"):
            pass
    with pytest.raises(ValueError, match="era"):
        async with trio_mcp.open_http_client("http://127.0.0.1:9/mcp", era="bogus"):
            pass


@pytest.fixture
def http_url() -> Iterator[str]:
    port = _support.free_port()
    with _support.background_server([*EVERYTHING, "--http", f"127.0.0.1:{port}"], port):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize("era", ["auto", "2026-07-28"])
async def test_http_modern(http_url: str, era: str) -> None:
    async with trio_mcp.open_http_client(http_url, client_app(), era=era) as client:
        await exercise(client)


async def test_http_listen_stream_carries_list_changes(http_url: str) -> None:
    """``subscriptions/listen`` is one long POST; its SSE stream brings the notifications."""
    app = client_app()
    changed: list[str] = []
    seen = trio.Event()

    @app.on_list_changed
    async def on_change(peer: trio_mcp.Peer, kind: str) -> None:
        changed.append(kind)
        seen.set()

    async with trio_mcp.open_http_client(http_url, app, era="2026-07-28") as client:
        await client.call_tool("test_trigger_tool_change")
        with trio.fail_after(10):
            await seen.wait()
    assert "tools" in changed
