"""Tracing off: the ``otel`` extra absent, or no provider configured (no SDK needed here).

These run in every CI run, also the one with the ``test`` extra only (no OpenTelemetry at
all): trio-mcp works without it, and the 2025-11-25 wire stays what it is without tracing
(SEP-414's ``_meta`` keys are written only when tracing is on).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import trio_mcp
from trio_mcp import _telemetry
from trio_mcp.peer._session import message_observers

from tests.helpers import ROOT, client_app, connect


@pytest.fixture
def wire() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    seen: list[tuple[str, dict[str, Any]]] = []

    def observe(direction: str, msg: dict[str, Any], method: str | None) -> None:
        seen.append((direction, msg))

    message_observers.append(observe)
    try:
        yield seen
    finally:
        message_observers.remove(observe)


async def test_telemetry_off_adds_no_meta_keys(wire: list[tuple[str, dict[str, Any]]]) -> None:
    """Off (no provider configured), the 2025-11-25 wire is what it is without
    tracing: no ``_meta`` written, and no tracer in use."""
    trio_mcp.configure_tracing()
    assert _telemetry.active is None and not trio_mcp.tracing_enabled()
    app = client_app(elicit_content={"approve": True})
    async with connect("memory", app) as client:
        handle = await client.call_tool_task("approve", {"question": "q"})
        await handle.result()
        await client.list_tools()
    sent = [msg for direction, msg in wire if direction == "sent"]
    assert sent and not [msg for msg in sent if "traceparent" in repr(msg)]
    listing = next(msg for msg in sent if msg.get("method") == "tools/list")
    assert "params" not in listing or "_meta" not in listing["params"]


def test_telemetry_without_the_api_everything_works() -> None:
    """With ``opentelemetry`` not importable (the ``otel`` extra absent), a server
    and a client still work, tracing stays off, and ``enabled=True`` says what to
    install."""
    code = """
import sys
sys.modules["opentelemetry"] = None  # import opentelemetry -> ImportError
import trio, trio_mcp
from trio_mcp import _telemetry
app = trio_mcp.App("s")
@app.tool(inline=True)
def echo(text: str) -> str:
    return text
async def main():
    async with trio_mcp.open_memory_pair(app, trio_mcp.App("c")) as (client, _):
        assert (await client.call_tool("echo", {"text": "ok"})).text == "ok"
    assert _telemetry.active is None and not trio_mcp.tracing_enabled()
    try:
        trio_mcp.configure_tracing(enabled=True)
    except ImportError as exc:
        print("refused:", exc)
trio.run(main)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "refused: tracing needs opentelemetry-api" in proc.stdout
