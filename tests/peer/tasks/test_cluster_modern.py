"""The tasks extension (2026-07-28) across three server processes sharing one real store
(Redis, Redis Cluster and PostgreSQL: ``shared_store``).

The issue's cluster test, on the modern wire (raw JSON-RPC over WebSocket, one
identity, each request with its own ``_meta``): a task created on A, its
question answered with ``tasks/update`` on B, its result read on C; a
``tasks/cancel`` on C stops the work on A; SIGKILL of A fails its running task
once its lease lapses.
"""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from tests.peer.tasks.test_cluster import cluster, server, shared_store

__all__ = ["shared_store"]  # the fixture, imported

TASKS = "io.modelcontextprotocol/tasks"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}, "elicitation": {}},
}


class Raw:
    """One modern client connection: requests with the per-request ``_meta``."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.next_id = 0

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        request_id = self.next_id
        await self.ws.send_message(json.dumps({
            "jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**params, "_meta": META},
        }))
        while True:
            message = json.loads(await self.ws.get_message())
            if message.get("id") == request_id:
                assert "result" in message, message
                result: dict[str, Any] = message["result"]
                return result


@asynccontextmanager
async def raw(url: str, token: str = "alice") -> AsyncIterator[Raw]:
    headers = [("Authorization", f"Bearer {token}")]
    async with open_websocket_url(url, subprotocols=["mcp"], extra_headers=headers) as ws:
        yield Raw(ws)


async def until(peer: Raw, task_id: str, *statuses: str) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task is in one of ``statuses``."""
    with trio.fail_after(20):
        while True:
            task = await peer.call("tasks/get", {"taskId": task_id})
            if task["status"] in statuses:
                return task
            await trio.sleep(0.05)


async def test_cluster_modern_created_on_a_answered_on_b_read_on_c(
    shared_store: str, tmp_path: Path
) -> None:
    """SEP-2663: tasks/get, tasks/update and tasks/cancel work from any process of the deployment."""
    async with cluster(shared_store) as [(_, a, pid_a), (_, b, _), (_, c, _)]:
        async with raw(a) as on_a, raw(b) as on_b, raw(c) as on_c:
            created = await on_a.call("tools/call", {"name": "approve", "arguments": {
                "question": "ship it?"}})
            assert created["resultType"] == "task"
            task_id = created["taskId"]
            asked = await until(on_b, task_id, "input_required")
            (key,) = asked["inputRequests"]
            assert asked["inputRequests"][key]["method"] == "elicitation/create"
            ack = await on_b.call("tasks/update", {"taskId": task_id, "inputResponses": {
                key: {"action": "accept", "content": {"ok": True}}, "unknown": {"action": "cancel"}}})
            assert ack["resultType"] == "complete"
            done = await until(on_c, task_id, "completed", "failed")
            assert done["status"] == "completed"
            assert done["result"]["content"][0]["text"] == f"approved by {pid_a}"

            # A running task on A, cancelled from C: the tool on A sees its cancellation.
            marker = tmp_path / "cancelled"
            running = await on_a.call("tools/call", {"name": "forever", "arguments": {
                "marker": str(marker)}})
            assert (await on_b.call("tasks/get", {"taskId": running["taskId"]}))["status"] == (
                "working")
            assert (await on_c.call("tasks/cancel", {"taskId": running["taskId"]}))[
                "resultType"] == "complete"
            assert (await until(on_b, running["taskId"], "cancelled"))["status"] == "cancelled"
            with trio.fail_after(10):
                while not (marker.exists() and marker.read_text()):  # noqa: ASYNC110 (written elsewhere)
                    await trio.sleep(0.05)
            assert marker.read_text() == str(pid_a)


async def test_cluster_modern_sigkill_fails_the_running_task_within_the_lease(
    shared_store: str, tmp_path: Path
) -> None:
    """A process that dies takes no task with it: its running task becomes failed."""
    store = shared_store
    async with server(store) as (proc_a, a, _), server(store) as (_, b, _):
        async with raw(a) as on_a:
            running = await on_a.call("tools/call", {"name": "forever", "arguments": {
                "marker": str(tmp_path / "never")}})
        proc_a.send_signal(signal.SIGKILL)
        async with raw(b) as on_b:
            failed = await until(on_b, running["taskId"], "failed")
            assert failed["error"]["code"] == -32603
