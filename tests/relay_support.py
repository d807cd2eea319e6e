"""Relays for the task-tree tests: ``examples/relay_server.py`` as real processes, or its App
in this process, on loopback Streamable HTTP."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import trio

import trio_mcp

from .helpers import EXAMPLES

RELAY = EXAMPLES / "relay_server.py"
#: The relay's question and the answers the tests give.
CONFIRM = {"confirm": True}


@cache
def relay_module() -> ModuleType:
    """``examples/relay_server.py`` imported as a module (for in-process relays)."""
    spec = importlib.util.spec_from_file_location("trio_mcp_example_relay_server", RELAY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@attrs.define(eq=False)
class RelayProcess:
    """One ``relay_server.py --http 127.0.0.1:0`` process."""

    proc: subprocess.Popen[bytes]
    log: Path
    token: str
    url: str = ""

    def wait_serving(self, timeout: float = 30) -> None:
        """Block until it printed its URL."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(r"serving on (\S+)", self.log.read_text(errors="replace"))
            if match:
                self.url = match.group(1)
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"relay exited: {self.log.read_text(errors='replace')}")
            time.sleep(0.02)
        raise AssertionError(f"relay did not start: {self.log.read_text(errors='replace')}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.proc.kill()
                self.proc.wait()


def spawn_relay(
    log: Path, token: str, *, upstream: RelayProcess | None = None, era: str | None = None,
    extra: Sequence[str] = (),
) -> RelayProcess:
    """Start a relay process (not waiting for it: see :meth:`RelayProcess.wait_serving`)."""
    args = [sys.executable, str(RELAY), "--http", "127.0.0.1:0", "--token", token, *extra]
    if upstream is not None:
        args += ["--upstream", upstream.url, "--upstream-token", upstream.token]
    if era is not None:
        args += ["--era", era]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stderr=out, stdout=subprocess.DEVNULL)
    return RelayProcess(proc, log, token)


def answering_app(
    asked: list[dict[str, Any]], *, answer: dict[str, Any] | None = None,
    gate: trio.Event | None = None,
) -> trio_mcp.App:
    """A client App that records each elicitation and accepts it with ``answer``
    (after ``gate`` is set, if given)."""
    app = trio_mcp.App("tree-test-client", "1.0")

    @app.on_elicitation
    async def elicit(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        asked.append({"message": params.message, "meta": params.meta,
                      "schema": params.requested_schema})
        if gate is not None:
            await gate.wait()
        return trio_mcp.ElicitResult("accept", answer if answer is not None else CONFIRM)

    return app


async def status_on(url: str, token: str, task_id: str) -> trio_mcp.Task:
    """``tasks/get`` of ``task_id`` on ``url`` with ``token`` (a fresh 2025 connection)."""
    async with trio_mcp.open_http_client(url, token=token) as peer:
        return await peer.get_task(task_id)


async def wait_on(
    peer: trio_mcp.Peer, task_id: str, wanted: str, bound: float = 30
) -> trio_mcp.Task:
    """Poll ``task_id`` on ``peer`` until its status is ``wanted`` (fails after ``bound`` s).

    2025-11-25: poll with the connection that follows the task: a new connection of the
    same requestor would be the "newest connection" a task's question may be sent to."""
    with trio.fail_after(bound):
        while True:
            task = await peer.get_task(task_id)
            if task.status.value == wanted:
                return task
            await trio.sleep(0.05)


async def wait_status(
    url: str, token: str, task_id: str, wanted: str, bound: float = 30
) -> trio_mcp.Task:
    """Poll ``task_id`` on ``url`` until its status is ``wanted`` (fails after ``bound`` s)."""
    with trio.fail_after(bound):
        async with trio_mcp.open_http_client(url, token=token) as peer:
            while True:
                task = await peer.get_task(task_id)
                if task.status.value == wanted:
                    return task
                await trio.sleep(0.05)


async def descendants(peer: trio_mcp.Peer, task_id: str, depth: int, bound: float = 30) -> list[str]:
    """The ids of ``task_id``'s first child, grandchild... down ``depth`` levels, read from
    its ``tasks/get`` tree ``_meta`` (polled until they all show)."""
    with trio.fail_after(bound):
        while True:
            task = await peer.get_task(task_id)
            ids: list[str] = []
            level = (task.meta or {}).get(trio_mcp.TREE_CHILDREN_META)
            while isinstance(level, list) and level and len(ids) < depth:
                ids.append(level[0]["taskId"])
                level = level[0].get("children")
            if len(ids) == depth:
                return ids
            await trio.sleep(0.05)
