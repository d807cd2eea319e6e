"""A traced MCP server: the task server's tools with OpenTelemetry spans and metrics.

    python examples/traced_server.py                        # stdio
    python examples/traced_server.py --http 127.0.0.1:8000  # Streamable HTTP, endpoint /mcp
    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 python examples/traced_server.py --http ...

Needs ``opentelemetry-sdk`` (in the ``dev`` extra; trio-mcp itself needs only the API,
the ``otel`` extra). Every span (one per request on each side, a task's work span, its
status events) and, at exit, the ``mcp.server.operation.duration`` histogram are
printed on stderr as one JSON object a line (stdout is the MCP channel on stdio). With
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set, spans
and metrics also go to that OTLP/HTTP collector, when
``opentelemetry-exporter-otlp-proto-http`` is installed; without it the server says
so and keeps to the console. ``OTEL_SERVICE_NAME`` names the service (default
``trio-mcp-traced-server``).

A client that traces (trio-mcp's with a provider set, mcp 2.3.0's, the TS SDK with
OpenTelemetry) sends its trace context in ``params._meta``: the server's spans join
its trace. Try ``approve`` as a task: the trace shows the ``tools/call``, the task's
work span, the elicitation sent back and the ``tasks/result``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio

import trio_mcp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import task_server

try:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        MetricExporter,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )
except ImportError:
    sys.exit("traced_server.py needs opentelemetry-sdk: pip install opentelemetry-sdk")


def _otlp_exporters() -> tuple[Any, MetricExporter | None]:
    """The OTLP/HTTP span and metric exporters, if an endpoint is set and they are installed."""
    if not (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        return None, None
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        print("OTEL_EXPORTER_OTLP_ENDPOINT is set, but opentelemetry-exporter-otlp-proto-http "
              "is not installed: exporting to the console only", file=sys.stderr, flush=True)
        return None, None
    print("exporting to OTLP/HTTP and the console", file=sys.stderr, flush=True)
    return OTLPSpanExporter(), OTLPMetricExporter()


def setup_telemetry() -> tuple[TracerProvider, MeterProvider]:
    """Set the global tracer and meter providers: console always, OTLP when configured."""
    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME", "trio-mcp-traced-server")}
    )
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        out=sys.stderr, formatter=lambda span: span.to_json(indent=None) + "\n",
    )))
    otlp_spans, otlp_metrics = _otlp_exporters()
    if otlp_spans is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(otlp_spans))
    readers = [PeriodicExportingMetricReader(ConsoleMetricExporter(
        out=sys.stderr, formatter=lambda data: data.to_json(indent=None) + "\n",
    ), export_interval_millis=60_000)]
    if otlp_metrics is not None:
        readers.append(PeriodicExportingMetricReader(otlp_metrics))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    # Automatic mode would find the providers set above; saying it is explicit.
    trio_mcp.configure_tracing(enabled=True)
    return tracer_provider, meter_provider


async def serve_http(
    app: trio_mcp.App, host: str, port: int, server: trio_mcp.HttpServerName | None = None
) -> None:
    """Serve over Streamable HTTP; print the endpoint's URL on stderr."""
    async with trio.open_nursery() as nursery:
        address = await nursery.start(partial(trio_mcp.serve_http, app, host, port,
                                              server=server))
        print(f"serving on {address.url}", file=sys.stderr, flush=True)


async def until_signalled(serve: Callable[[], Awaitable[None]]) -> None:
    """Run ``serve()`` until it returns or SIGTERM / SIGINT arrives (then flush and exit)."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def serve_then_stop() -> None:
                await serve()
                nursery.cancel_scope.cancel()

            nursery.start_soon(serve_then_stop)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", metavar="HOST:PORT",
                        help="serve over Streamable HTTP (endpoint /mcp) instead of stdio")
    parser.add_argument("--http-server", choices=("llhttp", "hypercorn"),
                        help="with --http: the HTTP/1.1 server (default: llhttp when httptools "
                             "is installed, else hypercorn)")
    parser.add_argument("--no-poll-spans", action="store_true",
                        help="leave tasks/get out of the traces (trace_task_polling=False)")
    args = parser.parse_args(argv)
    tracer_provider, meter_provider = setup_telemetry()
    if args.no_poll_spans:
        trio_mcp.configure_tracing(enabled=True, trace_task_polling=False)
    app = task_server.build_app()
    if args.http:
        host, _, port = args.http.rpartition(":")
        serve = partial(serve_http, app, host or "127.0.0.1", int(port), args.http_server)
    else:
        serve = partial(trio_mcp.serve_stdio, app)
    try:
        trio.run(until_signalled, serve)
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()  # the last collection: the histograms, on stderr


if __name__ == "__main__":
    main()
