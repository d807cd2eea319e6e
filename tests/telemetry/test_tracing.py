"""Tracing (the ``otel`` extra): spans, metrics and trace context per the MCP conventions.

The OpenTelemetry semantic conventions for MCP (``docs/gen-ai/mcp.md`` of
``open-telemetry/semantic-conventions-genai``) and SEP-414 (trace context in
``params._meta``, ``docs/specification/2026-07-28/basic/index.mdx``: "the keys
``traceparent``, ``tracestate``, and ``baggage`` are reserved for OpenTelemetry
trace context propagation"). Spans go to the SDK's in-memory exporter; the SDK
is in the ``dev`` extra, and these tests skip without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import trio_mcp
from trio_mcp import _telemetry
from trio_mcp.peer._session import message_observers

from tests.helpers import ROOT, client_app, connect
from tests.raw import open_raw

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk is not installed")
from opentelemetry import baggage, trace  # noqa: E402
from opentelemetry import context as otel_context  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402


class Otel:
    """An SDK tracer and meter provider writing to memory, and what they hold."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = sdk_trace.TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("test")

    def spans(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str, kind: SpanKind | None = None) -> list[Any]:
        return [s for s in self.spans() if s.name == name and (kind is None or s.kind == kind)]

    def one(self, name: str, kind: SpanKind) -> Any:
        found = self.named(name, kind)
        assert len(found) == 1, (name, kind, [(s.name, s.kind) for s in self.spans()])
        return found[0]

    def histogram(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        assert metric.unit == "s"
                        points.extend(metric.data.data_points)
        return points


@pytest.fixture
def otel() -> Iterator[Otel]:
    state = Otel()
    trio_mcp.configure_tracing(
        enabled=True, tracer_provider=state.tracer_provider, meter_provider=state.meter_provider
    )
    try:
        yield state
    finally:
        trio_mcp.configure_tracing()  # back to automatic (off: no global provider)
        assert _telemetry.active is None


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


def _parent(span: Any) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_telemetry_one_trace_spans_a_task_its_work_its_elicitation_and_its_result(
    otel: Otel,
) -> None:
    """Our client's ``tools/call`` as a task, the server span, the task's work span
    (a child linked to its creator), the elicitation the task sends back to the client
    and the final ``tasks/result``: one trace, over Streamable HTTP, with the
    conventions' attributes."""
    app = client_app(elicit_content={"approve": True})
    with otel.tracer.start_as_current_span("agent") as root:
        async with connect("http", app) as client:
            handle = await client.call_tool_task("approve", {"question": "ship it?"})
            result = await handle.result()
    assert result.text == "approved: ship it?"
    trace_id = root.get_span_context().trace_id
    task_id = handle.task_id

    call_out = otel.one("tools/call approve", SpanKind.CLIENT)
    call_in = otel.one("tools/call approve", SpanKind.SERVER)
    work = otel.one("task tools/call approve", SpanKind.INTERNAL)
    ask_out = otel.one("elicitation/create", SpanKind.CLIENT)
    ask_in = otel.one("elicitation/create", SpanKind.SERVER)
    result_out = otel.one("tasks/result", SpanKind.CLIENT)
    result_in = otel.one("tasks/result", SpanKind.SERVER)
    everything = [call_out, call_in, work, ask_out, ask_in, result_out, result_in]
    assert {s.context.trace_id for s in everything} == {trace_id}

    # Parents: client -> server (through _meta) -> the task's work -> the question
    # sent back -> the client's handler of it; tasks/result under the caller's span.
    assert _parent(call_out) == root.get_span_context().span_id
    assert _parent(call_in) == call_out.context.span_id and call_in.parent.is_remote
    assert _parent(work) == call_in.context.span_id
    assert [link.context.span_id for link in work.links] == [call_in.context.span_id]
    assert _parent(ask_out) == work.context.span_id
    assert _parent(ask_in) == ask_out.context.span_id
    assert _parent(result_out) == root.get_span_context().span_id
    assert _parent(result_in) == result_out.context.span_id

    for span in (call_out, call_in):
        attrs = span.attributes
        assert attrs["mcp.method.name"] == "tools/call"
        assert attrs["gen_ai.tool.name"] == "approve"
        assert attrs["gen_ai.operation.name"] == "execute_tool"
        assert attrs["jsonrpc.request.id"] == str(attrs["jsonrpc.request.id"])
        assert attrs["mcp.protocol.version"] == "2025-11-25"
        assert attrs["network.transport"] == "tcp" and attrs["network.protocol.name"] == "http"
        assert attrs["mcp.task.id"] == task_id
        assert "error.type" not in attrs and span.status.status_code is StatusCode.UNSET
    assert call_in.attributes["mcp.session.id"]
    assert work.attributes["mcp.task.id"] == task_id
    assert work.attributes["gen_ai.tool.name"] == "approve"
    statuses = [e.attributes["mcp.task.status"] for e in work.events if e.name == "mcp.task.status"]
    assert statuses == ["working", "input_required", "working", "completed"]
    for span in (ask_out, ask_in, result_out, result_in):
        assert span.attributes["mcp.task.id"] == task_id
    assert ask_in.attributes["jsonrpc.request.id"] == ask_out.attributes["jsonrpc.request.id"]

    server_points = otel.histogram("mcp.server.operation.duration")
    client_points = otel.histogram("mcp.client.operation.duration")
    tool_point = [p for p in server_points if p.attributes.get("gen_ai.tool.name") == "approve"]
    assert tool_point and tool_point[0].count == 1 and tool_point[0].sum >= 0
    assert tool_point[0].attributes["mcp.method.name"] == "tools/call"
    assert "jsonrpc.request.id" not in tool_point[0].attributes  # low cardinality only
    assert tool_point[0].explicit_bounds[:3] == (0.01, 0.02, 0.05)
    methods = {p.attributes["mcp.method.name"] for p in client_points}
    assert {"initialize", "tools/call", "tasks/result", "elicitation/create"} <= methods


async def test_telemetry_errors_set_error_type(otel: Otel) -> None:
    """``error.type``: the JSON-RPC code for an error answer (and
    ``rpc.response.status_code``), ``tool_error`` for a ``CallToolResult`` with
    ``isError``; the span status is ERROR with the error's message."""
    async with connect("memory") as client:
        failed = await client.call_tool("fail", {"message": "no luck"})
        assert failed.is_error
        with pytest.raises(trio_mcp.RemoteError):
            await client.call_tool("no_such_tool", {})
    for kind in (SpanKind.CLIENT, SpanKind.SERVER):
        tool_error = otel.one("tools/call fail", kind)
        assert tool_error.attributes["error.type"] == "tool_error"
        assert tool_error.status.status_code is StatusCode.ERROR
        unknown = otel.one("tools/call no_such_tool", kind)
        code = unknown.attributes["error.type"]
        assert code == unknown.attributes["rpc.response.status_code"] == "-32602"
        assert unknown.status.status_code is StatusCode.ERROR and unknown.status.description
    points = otel.histogram("mcp.server.operation.duration")
    assert {p.attributes.get("error.type") for p in points} >= {"tool_error", "-32602"}


async def test_telemetry_trace_context_travels_in_meta_both_ways(
    otel: Otel, wire: list[tuple[str, dict[str, Any]]]
) -> None:
    """SEP-414: ``traceparent`` (W3C format) in ``params._meta`` of every request,
    client to server and server to client (the task's elicitation), beside the
    keys that were there (``progressToken``, the related-task ``_meta``); ``baggage``
    too, carried on by the server into what the task sends back."""
    app = client_app(elicit_content={"approve": True})
    token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        async with connect("memory", app) as client:
            handle = await client.call_tool_task("approve", {"question": "q"})
            await handle.result()
    finally:
        otel_context.detach(token)
    requests = [msg for direction, msg in wire if direction == "sent" and "method" in msg
                and "id" in msg]
    # Baggage rides along: into the server, and on into the task's question back.
    assert {msg["params"]["_meta"].get("baggage") for msg in requests} == {"tenant=acme"}
    assert {msg["method"] for msg in requests} >= {"initialize", "tools/call", "elicitation/create"}
    for msg in requests:
        parent = msg["params"]["_meta"]["traceparent"]
        version, trace_id, span_id, flags = parent.split("-")
        assert (version, len(trace_id), len(span_id)) == ("00", 32, 16)
        assert int(flags, 16) & 1  # sampled
    ask = next(msg for msg in requests if msg["method"] == "elicitation/create")
    assert ask["params"]["_meta"][trio_mcp.RELATED_TASK_META] == {"taskId": handle.task_id}
    # Notifications and answers carry nothing new.
    assert not [msg for _, msg in wire if "method" not in msg
                and "traceparent" in str(msg.get("result", {}).get("_meta", ""))]


async def test_telemetry_task_polling_can_be_left_out(otel: Otel) -> None:
    """``trace_task_polling=False``: no ``tasks/get`` span on either side (and no
    trace context in those requests); the other spans stay."""
    trio_mcp.configure_tracing(
        enabled=True, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider,
        trace_task_polling=False,
    )
    async with connect("memory") as client:
        handle = await client.call_tool_task("sleep", {"seconds": 0.05})
        await handle.wait()
        await handle.status()
    assert not otel.named("tasks/get")
    assert otel.named("tools/call sleep", SpanKind.SERVER)


async def test_telemetry_incoming_trace_context_is_the_parent(otel: Otel) -> None:
    """A request whose ``_meta`` carries a ``traceparent`` from another tracer: the
    server span continues that trace (its span the remote parent; ``tracestate`` and
    ``baggage`` read too), and a malformed one is ignored (the request still answered)."""
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    meta = {"traceparent": f"00-{trace_id}-{span_id}-01", "tracestate": "rojo=00f067aa0ba902b7",
            "baggage": "userId=alice"}
    async with open_raw("memory") as raw:
        await raw.initialize()
        answer = await raw.request(1, "tools/call", {
            "name": "echo", "arguments": {"text": "hi"}, "_meta": meta})
        assert answer["result"]["content"][0]["text"] == "hi"
        bad = {"traceparent": "00-zz-not-valid-01", "tracestate": 7}
        answer = await raw.request(2, "tools/call", {
            "name": "echo", "arguments": {"text": "again"}, "_meta": bad})
        assert answer["result"]["content"][0]["text"] == "again"
    first, second = otel.named("tools/call echo", SpanKind.SERVER)
    assert first.context.trace_id == int(trace_id, 16)
    assert first.parent.span_id == int(span_id, 16) and first.parent.is_remote
    assert first.parent.trace_state.get("rojo") == "00f067aa0ba902b7"
    assert first.attributes["jsonrpc.request.id"] == "1"
    assert second.context.trace_id != int(trace_id, 16) and second.parent is None


async def test_telemetry_ambient_span_is_a_link_or_the_parent(otel: Otel) -> None:
    """The conventions: the server span's parent is the context from ``_meta`` "and
    SHOULD link current ambient context" (e.g. a transport's span); without trace
    context in ``_meta``, the ambient span is the parent."""
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with otel.tracer.start_as_current_span("transport") as ambient:
        async with open_raw("memory") as raw:  # the server's tasks start in this context
            await raw.initialize()
            await raw.request(1, "tools/call", {"name": "echo", "arguments": {"text": "a"},
                                                "_meta": {"traceparent": f"00-{trace_id}-{span_id}-01"}})
            await raw.request(2, "tools/call", {"name": "echo", "arguments": {"text": "b"}})
    linked, child = otel.named("tools/call echo", SpanKind.SERVER)
    assert linked.parent.span_id == int(span_id, 16)
    assert [link.context.span_id for link in linked.links] == [ambient.get_span_context().span_id]
    assert child.parent.span_id == ambient.get_span_context().span_id and not child.links


def test_telemetry_automatic_mode_follows_the_global_provider() -> None:
    """Without ``configure_tracing``: off while no provider is set (and opentelemetry is
    not even imported by trio-mcp), on for the connections made once
    ``trace.set_tracer_provider`` was called; ``TRIO_MCP_TRACING=off`` keeps it off."""
    code = """
import os, sys
import trio, trio_mcp
from trio_mcp import _telemetry
app = trio_mcp.App("s")
@app.tool(inline=True)
def echo(text: str) -> str:
    return text
async def call():
    async with trio_mcp.open_memory_pair(app, trio_mcp.App("c")) as (client, _):
        await client.call_tool("echo", {"text": "ok"})
trio.run(call)
print("imported before:", "opentelemetry.trace" in sys.modules, _telemetry.active is not None)
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
print("enabled:", trio_mcp.tracing_enabled())
trio.run(call)
print("spans:", sorted({s.name for s in exporter.get_finished_spans()}))
"""
    def run(env: dict[str, str]) -> str:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, cwd=ROOT, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    base = {k: v for k, v in os.environ.items() if k != _telemetry.ENV_SWITCH}
    out = run(base)
    assert "imported before: False False" in out
    assert "enabled: True" in out
    assert "'tools/call echo'" in out and "'initialize'" in out
    out = run({**base, _telemetry.ENV_SWITCH: "off"})
    assert "enabled: False" in out and "spans: []" in out


async def test_telemetry_modern_era_mrtr_rounds_and_tasks_stay_in_the_trace(otel: Otel) -> None:
    """2026-07-28 over Streamable HTTP: each round of a multi round-trip request (the
    first answered ``input_required``, the retry with ``inputResponses``) is a client
    span with its own server span, in the caller's trace; a task of the tasks extension
    (its question pulled with ``tasks/get`` and answered with ``tasks/update``) has its
    work span, linked, in the same trace; ``mcp.protocol.version`` is read per request."""
    from functools import partial

    import trio

    from tests.helpers import load_example

    app = client_app(elicit_content={"name": "Ada", "confirm": True})
    server = load_example("everything_server").build_app()
    with otel.tracer.start_as_current_span("agent") as root:
        async with trio.open_nursery() as nursery:
            address = await nursery.start(partial(trio_mcp.serve_http, server, "127.0.0.1", 0))
            async with trio_mcp.open_http_client(address.url, app, era="2026-07-28") as client:
                hello = await client.call_tool("test_input_required_result_elicitation", {})
                handle = await client.call_tool_task("confirm_delete", {"filename": "a.txt"})
                deleted = await handle.result()
            nursery.cancel_scope.cancel()
    assert hello.text == "Hello, Ada!" and deleted.text == "Deleted a.txt"
    trace_id = root.get_span_context().trace_id
    rounds = otel.named("tools/call test_input_required_result_elicitation", SpanKind.CLIENT)
    served = otel.named("tools/call test_input_required_result_elicitation", SpanKind.SERVER)
    assert len(rounds) == len(served) == 2
    assert {_parent(s) for s in served} == {s.context.span_id for s in rounds}
    work = otel.one("task tools/call confirm_delete", SpanKind.INTERNAL)
    created = otel.one("tools/call confirm_delete", SpanKind.SERVER)
    assert _parent(work) == created.context.span_id
    assert work.links[0].context.span_id == created.context.span_id
    statuses = [e.attributes["mcp.task.status"] for e in work.events]
    assert statuses[0] == "working" and "input_required" in statuses
    assert statuses[-1] == "completed"
    updates = otel.named("tasks/update", SpanKind.SERVER)
    assert updates and updates[0].attributes["mcp.task.id"] == handle.task_id
    for span in [*rounds, *served, work, created, *updates]:
        assert span.context.trace_id == trace_id, span.name
    assert served[0].attributes["mcp.protocol.version"] == "2026-07-28"


async def test_telemetry_cancelled_request_ends_both_spans_as_cancelled(
    otel: Otel, autojump_clock: Any
) -> None:
    """A request its caller gives up on: the client span ends with ``error.type``
    ``cancelled``, and so does the server span of the request the peer stopped
    (it is never answered)."""
    import trio

    async with connect("memory") as client:
        with trio.move_on_after(1):
            await client.call_tool("sleep", {"seconds": 60})
        await client.call_tool("echo", {"text": "after"})  # the cancel has been read
        await trio.sleep(1)
    for kind in (SpanKind.CLIENT, SpanKind.SERVER):
        span = otel.one("tools/call sleep", kind)
        assert span.attributes["error.type"] == "cancelled"
        assert span.status.status_code is StatusCode.ERROR


class _BrokenTracerProvider(trace.TracerProvider):
    """A provider whose tracer fails to start any span (a misconfigured SDK)."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        class Broken(trace.NoOpTracer):
            def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
                raise RuntimeError("broken tracer")

        return Broken()


async def test_telemetry_a_broken_tracer_costs_no_answer(caplog: pytest.LogCaptureFixture) -> None:
    """Tracing never stands between a request and its answer: a tracer that raises is
    logged, and the calls (plain, and a task with its elicitation) are served."""
    trio_mcp.configure_tracing(enabled=True, tracer_provider=_BrokenTracerProvider())
    try:
        async with connect("memory", client_app(elicit_content={"approve": True})) as client:
            assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"
            handle = await client.call_tool_task("approve", {"question": "q"})
            assert (await handle.result()).text == "approved: q"
    finally:
        trio_mcp.configure_tracing()
    assert "could not start" in caplog.text


async def test_telemetry_prompts_and_resources_and_the_settings_that_name_them(
    otel: Otel, wire: list[tuple[str, dict[str, Any]]]
) -> None:
    """``prompts/get {name}`` with ``gen_ai.prompt.name``; ``resources/read`` with
    ``mcp.resource.uri`` and, by default, no URI in its name (the conventions: "SHOULD
    NOT include it by default"); ``resource_uri_in_span_name=True`` names it;
    ``propagate=False`` writes no trace context and reads none."""
    from tests.helpers import load_example

    server = load_example("everything_server").build_app()
    async with trio_mcp.open_memory_pair(server, trio_mcp.App("c")) as (client, _):
        await client.get_prompt("test_simple_prompt")
        await client.read_resource("test://static-text")
        trio_mcp.configure_tracing(
            enabled=True, tracer_provider=otel.tracer_provider,
            meter_provider=otel.meter_provider, resource_uri_in_span_name=True,
            propagate=False,
        )
    async with trio_mcp.open_memory_pair(server, trio_mcp.App("c")) as (client, _):
        await client.read_resource("test://static-text")
    for kind in (SpanKind.CLIENT, SpanKind.SERVER):
        prompt = otel.one("prompts/get test_simple_prompt", kind)
        assert prompt.attributes["gen_ai.prompt.name"] == "test_simple_prompt"
        assert "gen_ai.tool.name" not in prompt.attributes
        plain = otel.one("resources/read", kind)
        assert plain.attributes["mcp.resource.uri"] == "test://static-text"
        named = otel.one("resources/read test://static-text", kind)
        assert named.attributes["mcp.resource.uri"] == "test://static-text"
    # Not propagated: the server span of the second read starts a trace of its own.
    named_out = otel.one("resources/read test://static-text", SpanKind.CLIENT)
    named_in = otel.one("resources/read test://static-text", SpanKind.SERVER)
    assert named_in.context.trace_id != named_out.context.trace_id
    reads = [msg for direction, msg in wire
             if direction == "sent" and msg.get("method") == "resources/read"]
    assert len(reads) == 2
    assert "traceparent" in reads[0]["params"]["_meta"]
    assert "_meta" not in reads[1]["params"]


def _task_tracing_app() -> trio_mcp.App:
    import trio

    app = trio_mcp.App("traced-tasks", limits=trio_mcp.TaskLimits(poll_interval=50))

    @app.tool(task_support="required")
    async def confirm(ctx: trio_mcp.RequestContext) -> str:
        """Ask, then run until cancelled."""
        await ctx.elicit("go?", {"type": "object", "properties": {"go": {"type": "boolean"}}})
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    return app


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_telemetry_a_task_handles_requests_are_one_trace_with_its_call(
    otel: Otel, era: str
) -> None:
    """With no span of the caller's current, every ``tasks/get``, ``tasks/update``
    (2026-07-28: the answer to the task's question), ``tasks/result`` (2025-11-25: the
    side channel) and ``tasks/cancel`` of a handle is a child of the ``tools/call`` that
    created the task: one trace per task handle, not one per poll."""
    from functools import partial

    import trio

    server = _task_tracing_app()
    async with trio.open_nursery() as nursery:
        address = await nursery.start(partial(trio_mcp.serve_http, server, "127.0.0.1", 0))
        async with trio_mcp.open_http_client(
            address.url, client_app(elicit_content={"go": True}), era=era
        ) as client:
            handle = await client.call_tool_task("confirm")
            asked = False
            async for task in handle:
                asked = asked or task.status is trio_mcp.TaskStatus.INPUT_REQUIRED
                if asked and task.status is trio_mcp.TaskStatus.WORKING:
                    await handle.cancel()  # answered: the task runs on; stop it
            assert handle.task.status is trio_mcp.TaskStatus.CANCELLED
            if era == "2025-11-25":
                with pytest.raises(trio_mcp.TaskCancelled):
                    await handle.result()
        nursery.cancel_scope.cancel()

    call = otel.one("tools/call confirm", SpanKind.CLIENT)
    about_it = [s for s in otel.spans() if s.kind is SpanKind.CLIENT
                and s.attributes["mcp.method.name"].startswith("tasks/")]
    methods = {s.attributes["mcp.method.name"] for s in about_it}
    side = "tasks/result" if era == "2025-11-25" else "tasks/update"
    assert {"tasks/get", "tasks/cancel", side} <= methods, methods
    assert len(about_it) > 3
    for span in about_it:
        assert span.context.trace_id == call.context.trace_id, span.name
        assert _parent(span) == call.context.span_id, span.name
        assert span.attributes["mcp.task.id"] == handle.task_id
    served = [s for s in otel.spans() if s.kind is SpanKind.SERVER
              and s.attributes["mcp.method.name"].startswith("tasks/")]
    assert served and {s.context.trace_id for s in served} == {call.context.trace_id}


async def test_telemetry_a_callers_span_stays_the_parent_of_task_requests(otel: Otel) -> None:
    """A caller who polls under a span of its own keeps it as the parent; the creating
    call becomes a link (``mcp.task.link: created_by``)."""
    async with connect("memory") as client:
        handle = await client.call_tool_task("sleep", {"seconds": 0})
        with otel.tracer.start_as_current_span("poller") as poller:
            await handle.wait()
    call = otel.one("tools/call sleep", SpanKind.CLIENT)
    polls = otel.named("tasks/get", SpanKind.CLIENT)
    assert polls
    for span in polls:
        assert _parent(span) == poller.get_span_context().span_id
        assert [(link.context.span_id, dict(link.attributes)) for link in span.links] == [
            (call.context.span_id, {"mcp.task.link": "created_by"})]
