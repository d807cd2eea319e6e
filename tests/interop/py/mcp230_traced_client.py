"""Start a trace in the Python SDK ``mcp`` 2.3.0's ``Client`` and call our server with it.

    python mcp230_traced_client.py MODE URL TRACE_ID SPAN_ID

Runs under ``.interop/mcp230`` (``mcp`` 2.3.0 depends on ``opentelemetry-api``; no SDK
there). The trace is started with the API alone: a span context with the given ids
(hex) is made current, so the SDK's own ``CLIENT`` span (a no-op tracer's: it keeps the
current span) injects it as ``traceparent`` into ``params._meta`` (SEP-414) of every
request it sends. Calls ``test_simple_text`` and the multi round-trip
``test_input_required_result_elicitation`` (its retry carries the context again) and
prints one JSON report: the texts, and the ``traceparent`` the SDK's propagator writes.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import anyio
import mcp_types as t
from mcp import Client
from opentelemetry import context, propagate, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

warnings.simplefilter("ignore", DeprecationWarning)


async def main(mode: str, url: str, trace_id: str, span_id: str) -> dict[str, Any]:
    started = SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False,
                          trace_flags=TraceFlags(TraceFlags.SAMPLED))
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(started)))
    carrier: dict[str, str] = {}
    propagate.inject(carrier)

    async def on_elicit(ctx: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    report: dict[str, Any] = {"traceparent": carrier.get("traceparent")}
    try:
        async with Client(url, mode=mode, elicitation_callback=on_elicit) as client:
            report["protocol_version"] = client.protocol_version
            simple = await client.call_tool("test_simple_text", {})
            report["simple_text"] = simple.content[0].text
            asked = await client.call_tool("test_input_required_result_elicitation", {})
            report["elicitation"] = asked.content[0].text
    finally:
        context.detach(token)
    return report


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, *sys.argv[1:5])))
