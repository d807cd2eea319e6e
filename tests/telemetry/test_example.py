"""``examples/traced_server.py``: a real server process that traces, joined by our client's trace.

The client side traces in this process (the SDK's in-memory exporter); the server, a
subprocess over stdio, prints its spans and metrics on stderr (the console exporter, one
JSON object a line). Its spans must continue the client's trace through ``params._meta``
(SEP-414) across the process boundary. Skips without opentelemetry-sdk.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp.peer._session import message_observers

from tests.helpers import EXAMPLES, client_app

pytestmark = pytest.mark.timeout(90)
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk is not installed")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

SERVER = [sys.executable, str(EXAMPLES / "traced_server.py")]


def _printed(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """The spans and metric batches the server printed, and all of its stderr."""
    text = path.read_text(encoding="utf-8")
    spans, batches = [], []
    for line in text.splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            (batches if "resource_metrics" in obj else spans).append(obj)
    return spans, batches, text


async def _run(tmp_path: Path, env: dict[str, str] | None = None) -> tuple[Any, Any, Path]:
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trio_mcp.configure_tracing(enabled=True, tracer_provider=provider)
    log = tmp_path / "stderr.txt"
    try:
        with log.open("wb") as stderr, provider.get_tracer("test").start_as_current_span(
            "agent"
        ) as root:
            app = client_app(elicit_content={"approve": True})
            async with trio_mcp.open_stdio_client(SERVER, app, stderr=stderr, env=env) as peer:
                handle = await peer.call_tool_task("approve", {"question": "ship it?"})
                assert (await handle.result()).text == "approved: ship it?"
    finally:
        trio_mcp.configure_tracing()
    for _ in range(600):  # the server prints its metrics as it exits
        if "resource_metrics" in log.read_text(encoding="utf-8"):
            break
        await trio.sleep(0.05)
    return root, exporter, log


async def test_telemetry_example_server_spans_join_the_clients_trace(tmp_path: Path) -> None:
    root, exporter, log = await _run(tmp_path)
    spans, batches, _ = _printed(log)
    trace_id = f"0x{root.get_span_context().trace_id:032x}"
    by_name = {(s["name"], s["kind"]): s for s in spans}
    call = by_name["tools/call approve", "SpanKind.SERVER"]
    work = by_name["task tools/call approve", "SpanKind.INTERNAL"]
    ask = by_name["elicitation/create", "SpanKind.CLIENT"]
    result = by_name["tasks/result", "SpanKind.SERVER"]
    for span in (call, work, ask, result):
        assert span["context"]["trace_id"] == trace_id, span["name"]
    ours = {s.name: s for s in exporter.get_finished_spans()}
    assert call["parent_id"] == f"0x{ours['tools/call approve'].context.span_id:016x}"
    assert work["parent_id"] == call["context"]["span_id"]
    assert work["links"][0]["context"]["span_id"] == call["context"]["span_id"]
    assert [e["attributes"]["mcp.task.status"] for e in work["events"]] == [
        "working", "input_required", "working", "completed"]
    assert call["attributes"]["network.transport"] == "pipe"
    assert call["attributes"]["mcp.task.id"] == work["attributes"]["mcp.task.id"]
    assert call["resource"]["attributes"]["service.name"] == "trio-mcp-traced-server"
    # The client's handler of the elicitation is a child of the server's request.
    assert ours["elicitation/create"].parent.span_id == int(ask["context"]["span_id"], 16)
    names = {m["name"] for batch in batches for r in batch["resource_metrics"]
             for s in r["scope_metrics"] for m in s["metrics"]}
    assert "mcp.server.operation.duration" in names and "mcp.client.operation.duration" in names


async def test_telemetry_example_says_when_otlp_cannot_be_used(tmp_path: Path) -> None:
    """``OTEL_EXPORTER_OTLP_ENDPOINT`` set: OTLP when its exporter is installed, else
    a clear line on stderr and the console only."""
    import os

    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    _, _, log = await _run(tmp_path, env)
    spans, _, text = _printed(log)
    assert spans
    try:
        importlib.import_module("opentelemetry.exporter.otlp.proto.http")
    except ImportError:
        assert "opentelemetry-exporter-otlp-proto-http is not installed" in text
    else:  # pragma: no cover (not in the dev extra)
        assert "exporting to OTLP/HTTP and the console" in text


async def test_telemetry_example_over_http_without_poll_spans_flushes_on_sigterm(
    tmp_path: Path,
) -> None:
    """``--http`` with ``--no-poll-spans``: the server's spans of a task followed by
    ``tasks/get`` polling have no ``tasks/get`` among them; SIGTERM flushes the metrics."""
    import signal

    log = tmp_path / "stderr.txt"
    with log.open("wb") as stderr:
        proc = await trio.lowlevel.open_process(
            [*SERVER, "--http", "127.0.0.1:0", "--no-poll-spans"], stderr=stderr)
        try:
            url = None
            for _ in range(600):
                text = log.read_text(encoding="utf-8")
                if "serving on " in text:
                    url = text.split("serving on ", 1)[1].split()[0]
                    break
                await trio.sleep(0.05)
            assert url is not None, log.read_text(encoding="utf-8")
            sent: list[str] = []

            def observe(direction: str, msg: dict[str, Any], method: str | None) -> None:
                sent.append(msg.get("method", ""))

            message_observers.append(observe)
            try:
                async with trio_mcp.open_http_client(url) as peer:
                    handle = await peer.call_tool_task("sleep", {"seconds": 0.2})
                    await handle.wait()
                    await handle.status()
            finally:
                message_observers.remove(observe)
            assert "tasks/get" in sent  # polled, but not traced
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(30):
                assert await proc.wait() == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    spans, batches, _ = _printed(log)
    names = {s["name"] for s in spans}
    assert {"tools/call sleep", "task tools/call sleep"} <= names
    assert "tasks/get" not in names
    assert batches
