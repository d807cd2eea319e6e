"""A trace started in the Python SDK ``mcp`` 2.3.0's client continues in our server's spans.

Their ``Client`` (``py/mcp230_traced_client.py``, in ``.interop/mcp230``) makes a span
context current and calls our ``examples/everything_server.py`` app, served here over
Streamable HTTP on loopback with tracing on (the OpenTelemetry SDK's in-memory exporter);
the SDK injects the context into ``params._meta`` (SEP-414: "the keys ``traceparent``,
``tracestate``, and ``baggage`` are reserved for OpenTelemetry trace context
propagation", ``docs/specification/2026-07-28/basic/index.mdx``) and our server spans
take it as their parent: same trace id, their span the remote parent. Both of their
modes: ``auto`` (the ``server/discover`` probe) and ``2026-07-28``; the multi
round-trip elicitation's retry is a second request in the same trace.
"""

from __future__ import annotations

import json
import secrets
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp

from ..helpers import load_example
from . import _support

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk is not installed")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind  # noqa: E402

CLIENT = _support.PY_DIR / "mcp230_traced_client.py"


@pytest.mark.parametrize("mode", ["auto", "2026-07-28"])
async def test_telemetry_mcp230_client_trace_continues_in_our_server(
    mcp230: Path, mode: str
) -> None:
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trio_mcp.configure_tracing(enabled=True, tracer_provider=provider)
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    try:
        app = load_example("everything_server").build_app()
        async with trio.open_nursery() as nursery:
            address = await nursery.start(partial(trio_mcp.serve_http, app, "127.0.0.1", 0))
            done = await trio.run_process(
                [str(mcp230), str(CLIENT), mode, address.url, trace_id, span_id],
                capture_stdout=True, capture_stderr=True, check=False,
            )
            nursery.cancel_scope.cancel()
    finally:
        trio_mcp.configure_tracing()
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["traceparent"] == f"00-{trace_id}-{span_id}-01"
    assert report["protocol_version"] == "2026-07-28"
    assert report["simple_text"] == "This is a simple text response for testing."
    assert "Ada" in report["elicitation"]

    spans = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER]
    calls = [s for s in spans if s.attributes["mcp.method.name"] == "tools/call"]
    names = sorted(s.name for s in calls)
    # The multi round-trip tool is two requests: the first answered input_required.
    assert names == ["tools/call test_input_required_result_elicitation"] * 2 + [
        "tools/call test_simple_text"], names
    for span in spans:  # every request of theirs, the probe and list calls included
        assert span.context.trace_id == int(trace_id, 16), span.name
        assert span.parent is not None and span.parent.is_remote
        assert span.parent.span_id == int(span_id, 16)
    for span in calls:
        assert span.attributes["mcp.protocol.version"] == "2026-07-28"
        assert span.attributes["network.transport"] == "tcp"
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert "error.type" not in span.attributes
