"""The spans and histograms, on the OpenTelemetry API (imported only when tracing is on).

Per the OpenTelemetry semantic conventions for MCP (``docs/gen-ai/mcp.md``):

* a request sent is a ``CLIENT`` span, a request received a ``SERVER`` span,
  named ``{mcp.method.name} {target}`` (the tool or prompt name), with
  ``mcp.method.name``, ``jsonrpc.request.id``, ``gen_ai.tool.name`` and
  ``gen_ai.operation.name`` (``execute_tool``), ``gen_ai.prompt.name``,
  ``mcp.resource.uri``, ``mcp.protocol.version``, ``mcp.session.id``,
  ``network.transport`` / ``network.protocol.name``; an error answer sets
  ``error.type`` and ``rpc.response.status_code`` to its code, a
  ``CallToolResult`` with ``isError`` sets ``error.type`` to ``tool_error``;
* their durations go to the histograms ``mcp.client.operation.duration`` and
  ``mcp.server.operation.duration`` (seconds, the advised buckets);
* the sender's context is injected into ``params._meta`` with the global
  propagator (W3C ``traceparent``/``tracestate`` and ``baggage`` by default:
  SEP-414), and the receiver's span is its child (the ambient context, e.g.
  an HTTP server span, becomes a link).

Beyond the conventions (which have no task attributes yet): ``mcp.task.id``
on every span about a task, and the task's work span (``INTERNAL``, named
``task {method} {target}``), a child of the request that created the task
with a link to it, whose events ``mcp.task.status`` record each status.
"""

from __future__ import annotations

import importlib.metadata
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from ._context import client_span, server_call

#: Bucket boundaries the conventions advise for both duration histograms.
DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
#: The attribute naming a task (the conventions have none yet).
TASK_ID: Final = "mcp.task.id"
#: The event a task's work span records at each status, with :data:`TASK_STATUS`.
TASK_STATUS_EVENT: Final = "mcp.task.status"
TASK_STATUS: Final = "mcp.task.status"
TASK_STATUS_MESSAGE: Final = "mcp.task.status_message"

_PROTOCOL_META: Final = "io.modelcontextprotocol/protocolVersion"
_RELATED_TASK_META: Final = "io.modelcontextprotocol/related-task"
_URI_METHODS: Final = frozenset(
    {"resources/read", "resources/subscribe", "resources/unsubscribe"}
)
_TASK_METHODS: Final = frozenset(
    {"tasks/get", "tasks/result", "tasks/cancel", "tasks/update"}
)
#: Attributes the histograms keep (low cardinality only).
_METRIC_KEYS: Final = (
    "mcp.method.name", "gen_ai.tool.name", "gen_ai.prompt.name", "gen_ai.operation.name",
    "mcp.protocol.version", "network.transport", "network.protocol.name",
)
_TRANSPORTS: Final[dict[Any, tuple[str | None, str | None]]] = {
    "stdio": ("pipe", None), "http": ("tcp", "http"), "websocket": ("tcp", "websocket"),
}


def provider_configured(options: dict[str, Any]) -> bool:
    """True when spans or metrics would go somewhere: a provider given or set globally."""
    if options.get("tracer_provider") is not None or options.get("meter_provider") is not None:
        return True
    tracer_provider = trace.get_tracer_provider()
    if not isinstance(tracer_provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return True
    meter_provider = metrics.get_meter_provider()
    return not isinstance(meter_provider, metrics.NoOpMeterProvider) and (
        type(meter_provider).__name__ != "_ProxyMeterProvider"
    )


class Tracing:
    """Makes the spans and records the durations; :data:`trio_mcp._telemetry.active`.

    Args:
        tracer_provider: The provider of spans (the global one when ``None``).
        meter_provider: The provider of the histograms (likewise).
        trace_task_polling: Whether ``tasks/get`` gets spans.
        propagate: Whether trace context goes into and comes out of ``params._meta``.
        resource_uri_in_span_name: Whether a resource URI is a span name's target.
    """

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        trace_task_polling: bool = True,
        propagate: bool = True,
        resource_uri_in_span_name: bool = False,
    ) -> None:
        self._options = {
            "tracer_provider": tracer_provider, "meter_provider": meter_provider,
            "trace_task_polling": trace_task_polling, "propagate": propagate,
            "resource_uri_in_span_name": resource_uri_in_span_name,
        }
        tracers = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        meters = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        version = _version()
        self.tracer = tracers.get_tracer("trio-mcp", version)
        meter = meters.get_meter("trio-mcp", version)
        self.server_duration = meter.create_histogram(
            "mcp.server.operation.duration", unit="s",
            description="The duration of an MCP request as the receiver handled it",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.client_duration = meter.create_histogram(
            "mcp.client.operation.duration", unit="s",
            description="The duration of an MCP request as the sender waited for its answer",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.polling = trace_task_polling
        self.propagate = propagate
        self.uri_names = resource_uri_in_span_name
        #: Per connection (session): transport, session id, protocol version.
        self._facts: weakref.WeakKeyDictionary[Any, dict[str, Any]] = (
            weakref.WeakKeyDictionary()
        )

    def uses(self, options: dict[str, Any]) -> bool:
        """True when this tracer was made with ``options``."""
        return self._options == {**self._options, **options}

    # --- requests received -------------------------------------------------------------

    def serve(self, session: Any, req: Any, on_request: Callable[[Any], None]) -> None:
        """Handle ``req`` (``on_request(req)``) under its server span.

        The span is current while the handler starts (its Trio task, if it
        gets one, inherits it) and ends when the answer is known
        (:func:`trio_mcp._telemetry.answered`).
        """
        method = req.method
        if method == "tasks/get" and not self.polling:
            on_request(req)
            return
        params = req.params
        meta = params.get("_meta") if params is not None else None
        ambient = otel_context.get_current()
        parent = self._extract(meta) if self.propagate else None
        links = None
        if parent is None:
            parent = ambient
        else:
            ambient_span = trace.get_current_span(ambient).get_span_context()
            if ambient_span.is_valid:
                links = [Link(ambient_span)]
        name, attributes = self._describe(session, method, params, meta)
        attributes["jsonrpc.request.id"] = str(req.id)
        span = self.tracer.start_span(
            name, parent, SpanKind.SERVER, attributes, links, record_exception=False,
        )
        call = _Call(self, session, span, self.server_duration, method, attributes, req.id)
        call.target = name
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        call_token = server_call.set(call)
        try:
            on_request(req)
        finally:
            server_call.reset(call_token)
            otel_context.detach(token)

    def _extract(self, meta: Any) -> Any:
        """The context carried in ``_meta``, or ``None`` if it carries no valid one."""
        if not isinstance(meta, dict) or "traceparent" not in meta:
            return None
        try:
            context = propagate.extract(
                {k: v for k, v in meta.items() if isinstance(v, str)}
            )
        except (ValueError, TypeError):
            return None
        if not trace.get_current_span(context).get_span_context().is_valid:
            return None
        return context

    # --- requests sent -----------------------------------------------------------------

    async def request(
        self,
        session: Any,
        method: str,
        params: dict[str, Any] | None,
        progress: Any,
        cancellable: bool,
    ) -> dict[str, Any]:
        """Send a request with ``session.request_raw`` under its client span, the context
        in ``_meta``.

        Cancellation: the span ends with ``error.type`` ``cancelled``.
        """

        def send(params: dict[str, Any] | None) -> Awaitable[dict[str, Any]]:
            return session.request_raw(  # type: ignore[no-any-return]
                method, params, progress=progress, cancellable=cancellable, _traced=True
            )

        if method == "tasks/get" and not self.polling:
            return await send(params)
        meta = params.get("_meta") if params is not None else None
        name, attributes = self._describe(session, method, params, meta)
        parent = otel_context.get_current()
        span = self.tracer.start_span(
            name, parent, SpanKind.CLIENT, attributes, record_exception=False,
        )
        context = trace.set_span_in_context(span, parent)
        if self.propagate:
            carrier: dict[str, str] = {}
            propagate.inject(carrier, context)
            if carrier:
                base = meta if isinstance(meta, dict) else {}
                params = {**(params or {}), "_meta": {**base, **carrier}}
        call = _Call(self, session, span, self.client_duration, method, attributes, None)
        token = otel_context.attach(context)
        span_token = client_span.set(span)
        try:
            result = await send(params)
        except BaseException as exc:
            call.failed(exc)
            raise
        finally:
            client_span.reset(span_token)
            otel_context.detach(token)
        call.finish_result(result)
        return result

    # --- tasks ---------------------------------------------------------------------------

    async def run_task(self, actor: Any, run: Callable[[], Awaitable[None]]) -> None:
        """Run a task's work (``run()``) under its own span, linked to its creator's.

        The creator is the request whose handler made the task (its server
        span is current where the actor was started). Status changes become
        events; the span ends with the task's terminal status (``error.type``
        ``tool_error`` for a tool's ``isError`` result, the code of an error
        outcome, ``cancelled``).
        """
        parent = otel_context.get_current()
        creator_call = server_call.get()
        creator = trace.get_current_span(parent).get_span_context()
        record = actor.record
        attributes: dict[str, Any] = {TASK_ID: record.task_id, "mcp.method.name": record.method}
        target = record.method
        if creator_call is not None:
            target = creator_call.target
            for key in ("gen_ai.tool.name", "gen_ai.prompt.name", "gen_ai.operation.name",
                        "mcp.session.id", "mcp.protocol.version", "network.transport"):
                if key in creator_call.attributes:
                    attributes[key] = creator_call.attributes[key]
        links = [Link(creator, {"mcp.task.link": "created_by"})] if creator.is_valid else None
        span = self.tracer.start_span(
            f"task {target}", parent, SpanKind.INTERNAL, attributes, links,
            record_exception=False,
        )
        context = trace.set_span_in_context(span, parent)
        trace_ = TaskTrace(span, context)
        actor.trace = trace_
        trace_.status_changed(record)
        token = otel_context.attach(context)
        call_token = server_call.set(None)  # the creator's answer is not this task's
        try:
            await run()
        finally:
            server_call.reset(call_token)
            otel_context.detach(token)
            trace_.end(record)

    # --- shared --------------------------------------------------------------------------

    def _describe(
        self, session: Any, method: str, params: dict[str, Any] | None, meta: Any
    ) -> tuple[str, dict[str, Any]]:
        """A span's name and attributes for ``method`` with ``params`` on ``session``."""
        attributes: dict[str, Any] = {"mcp.method.name": method}
        facts = self._facts.get(session)
        if facts is None:
            facts = self._facts[session] = _session_facts(session)
        attributes.update(facts)
        target = None
        if params is not None:
            if method == "tools/call":
                name = params.get("name")
                attributes["gen_ai.operation.name"] = "execute_tool"
                if isinstance(name, str):
                    attributes["gen_ai.tool.name"] = target = name
            elif method == "prompts/get":
                name = params.get("name")
                if isinstance(name, str):
                    attributes["gen_ai.prompt.name"] = target = name
            elif method in _URI_METHODS:
                uri = params.get("uri")
                if isinstance(uri, str):
                    attributes["mcp.resource.uri"] = uri
                    if self.uri_names:
                        target = uri
            elif method in _TASK_METHODS:
                task_id = params.get("taskId")
                if isinstance(task_id, str):
                    attributes[TASK_ID] = task_id
            if isinstance(meta, dict):
                version = meta.get(_PROTOCOL_META)
                if isinstance(version, str):
                    attributes["mcp.protocol.version"] = version
                related = meta.get(_RELATED_TASK_META)
                if isinstance(related, dict) and isinstance(related.get("taskId"), str):
                    attributes[TASK_ID] = related["taskId"]
        return (method if target is None else f"{method} {target}"), attributes

    def learned_version(self, session: Any, version: str) -> None:
        """The connection's protocol version became known (``initialize`` answered)."""
        facts = self._facts.get(session)
        if facts is not None:
            facts["mcp.protocol.version"] = version


def _version() -> str | None:
    try:
        return importlib.metadata.version("trio-mcp")
    except importlib.metadata.PackageNotFoundError:
        return None


def _session_facts(session: Any) -> dict[str, Any]:
    """What a connection's bus says of it, as span attributes."""
    facts: dict[str, Any] = {}
    info = getattr(getattr(session, "bus", None), "info", None)
    if isinstance(info, dict):
        transport, protocol = _TRANSPORTS.get(info.get("transport"), (None, None))
        if transport is not None:
            facts["network.transport"] = transport
        if protocol is not None:
            facts["network.protocol.name"] = protocol
        session_id = info.get("session_id")
        if isinstance(session_id, str):
            facts["mcp.session.id"] = session_id
    return facts


class _Call:
    """One request's span, from its start to its answer."""

    __slots__ = (
        "attributes", "done", "histogram", "method", "request_id", "session", "span",
        "start", "target", "tracing",
    )

    def __init__(
        self, tracing: Tracing, session: Any, span: Any, histogram: Any, method: str,
        attributes: dict[str, Any], request_id: Any,
    ) -> None:
        self.tracing = tracing
        self.session = session
        self.span = span
        self.histogram = histogram
        self.method = method
        self.attributes = attributes
        self.request_id = request_id
        self.target = method
        self.done = False
        self.start = time.perf_counter()

    def finish(self, reply: Any) -> None:
        """End with a reply: a ``Response``, an ``ErrorResponse``, or ``None`` (cancelled)."""
        if reply is None:
            self._end("cancelled", None)
            return
        error = getattr(reply, "error", None)
        if error is not None:
            self._end(str(error.code), error.message, code=True)
        else:
            self.finish_result(reply.result)

    def finish_result(self, result: Any) -> None:
        """End with a result object (wire JSON)."""
        error_type = None
        if isinstance(result, dict):
            if result.get("isError") is True:
                error_type = "tool_error"
            task = result.get("task")
            task_id = task.get("taskId") if isinstance(task, dict) else (
                result.get("taskId") if result.get("resultType") == "task" else None
            )
            if isinstance(task_id, str):
                self.span.set_attribute(TASK_ID, task_id)
            version = result.get("protocolVersion")
            if self.method == "initialize" and isinstance(version, str):
                self.tracing.learned_version(self.session, version)
                self.span.set_attribute("mcp.protocol.version", version)
                self.attributes["mcp.protocol.version"] = version
        self._end(error_type, None)

    def failed(self, exc: BaseException) -> None:
        """End with the exception the sender got instead of a result."""
        code = getattr(exc, "code", None)
        if isinstance(code, int):
            self._end(str(code), getattr(exc, "message", None), code=True)
        elif type(exc).__name__ == "Cancelled":
            self._end("cancelled", None)
        else:
            self._end(type(exc).__qualname__, str(exc))

    def _end(self, error_type: str | None, message: str | None, *, code: bool = False) -> None:
        if self.done:
            return
        self.done = True
        span = self.span
        metric = {k: v for k in _METRIC_KEYS if (v := self.attributes.get(k)) is not None}
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            metric["error.type"] = error_type
            if code:
                span.set_attribute("rpc.response.status_code", error_type)
                metric["rpc.response.status_code"] = error_type
            span.set_status(Status(StatusCode.ERROR, message))
        span.end()
        self.histogram.record(time.perf_counter() - self.start, metric)


class TaskTrace:
    """A task's work span: the status events and the end.

    Attributes:
        span: The work span.
        context: The OpenTelemetry context with the span current (what the
            task's input requests are sent under).
    """

    __slots__ = ("context", "last", "span")

    def __init__(self, span: Any, context: Any) -> None:
        self.span = span
        self.context = context
        self.last: Any = None

    def status_changed(self, record: Any) -> None:
        """Record the task's status as an event, if it changed since the last one."""
        status = record.status
        if status == self.last:
            return
        self.last = status
        event: dict[str, Any] = {TASK_STATUS: str(status.value)}
        if record.status_message is not None:
            event[TASK_STATUS_MESSAGE] = record.status_message
        self.span.add_event(TASK_STATUS_EVENT, event)

    def end(self, record: Any) -> None:
        """The work has ended: the last status, the outcome, the end of the span."""
        self.status_changed(record)
        status = str(record.status.value)
        outcome = record.outcome
        error_type = None
        if status == "failed":
            if isinstance(outcome, dict):
                error_type = "tool_error" if outcome.get("isError") is True else "_OTHER"
            else:
                code = getattr(outcome, "code", None)
                error_type = str(code) if code is not None else "_OTHER"
        elif status == "cancelled":
            error_type = "cancelled"
        if error_type is not None:
            self.span.set_attribute("error.type", error_type)
            self.span.set_status(Status(StatusCode.ERROR, record.status_message))
        self.span.end()
