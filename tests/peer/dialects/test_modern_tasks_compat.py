"""A 2025-11-25 task read and cancelled with the 2026-07-28 methods, by the same identity.

SEP-2663, backward compatibility: the tasks extension runs on the runtime the
core tasks of 2025-11-25 use, so a task created by a legacy session (a
bearer-token identity over WebSocket) is the same task for a modern request
of that identity: ``tasks/get`` shows it in the extension's shape,
``tasks/cancel`` stops its work. Another identity cannot see it.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import trio
from trio_websocket import open_websocket_url

import trio_mcp

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}},
}


def server_app(stopped: trio.Event) -> trio_mcp.App:
    app = trio_mcp.App("compat")

    @app.tool(task_support="optional")
    async def forever() -> str:
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError

    @app.tool(task_support="optional")
    async def quick(text: str) -> str:
        return text.upper()

    return app


async def modern(url: str, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = [("Authorization", f"Bearer {token}")]
    async with open_websocket_url(url, subprotocols=["mcp"], extra_headers=headers) as ws:
        await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                          "params": {**params, "_meta": META}}))
        answer: dict[str, Any] = json.loads(await ws.get_message())
        return answer


async def test_compat_a_2025_task_is_read_and_cancelled_with_the_2026_methods() -> None:
    stopped = trio.Event()
    async with trio.open_nursery() as nursery:
        address = await nursery.start(partial(
            trio_mcp.serve_websocket, server_app(stopped), "127.0.0.1", 0, tokens=TOKENS))
        url = address.url
        async with trio_mcp.open_websocket_client(url, token="alice-token") as legacy:
            done = await legacy.call_tool_task("quick", {"text": "hi"})
            await done.wait()
            running = await legacy.call_tool_task("forever", {})

        got = await modern(url, "alice-token", "tasks/get", {"taskId": done.task_id})
        assert got["result"]["status"] == "completed"
        assert got["result"]["result"]["content"][0]["text"] == "HI"
        assert got["result"]["resultType"] == "complete"

        foreign = await modern(url, "bob-token", "tasks/get", {"taskId": running.task_id})
        assert foreign["error"]["code"] == -32602  # foreign and unknown look the same

        ack = await modern(url, "alice-token", "tasks/cancel", {"taskId": running.task_id})
        assert ack["result"]["resultType"] == "complete"
        with trio.fail_after(5):
            await stopped.wait()  # the work really stopped
        after = await modern(url, "alice-token", "tasks/get", {"taskId": running.task_id})
        assert after["result"]["status"] == "cancelled"
        nursery.cancel_scope.cancel()
