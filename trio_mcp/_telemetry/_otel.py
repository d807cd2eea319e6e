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
with a link to it, whose events ``mcp.task.status`` record each status. On
the requestor's side, the ``tasks/get|update|result|cancel`` requests about a
task this process created are children of the creating request's ``CLIENT``
span (with no span of the caller's current; else children of that span,
linked to the creator): a task handle's polls make one trace with its call,
not one trace each.
"""

from __future__ import annotations

import importlib.metadata
import logging
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanKind

from ._calls import TASK_ID, Call, TaskTrace, quietly
from ._context import client_span, server_call

log = logging.getLogger("trio_mcp.telemetry")

#: Bucket boundaries the conventions advise for both duration histograms.
DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
_PROTOCOL_META: Final = "io.modelcontextprotocol/protocolVersion"
_RELATED_TASK_META: Final = "io.modelcontextprotocol/related-task"
_URI_METHODS: Final = frozenset(
    {"resources/read", "resources/subscribe", "resources/unsubscribe"}
)
#: Tasks whose creating span is kept (a few hundred KB at most).
CREATORS_KEPT: Final = 4096
_TASK_METHODS: Final = frozenset(
    {"tasks/get", "tasks/result", "tasks/cancel", "tasks/update"}
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
        self.creators = TaskCreators()
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
        if req.method == "tasks/get" and not self.polling:
            on_request(req)
            return
        try:
            call, context = self._start_server(session, req)
        except Exception:  # a broken tracer must not cost the request its answer
            log.exception("tracing: the server span of %s could not start", req.method[:100])
            on_request(req)
            return
        token = otel_context.attach(context)
        call_token = server_call.set(call)
        try:
            on_request(req)
        finally:
            server_call.reset(call_token)
            otel_context.detach(token)

    def _start_server(self, session: Any, req: Any) -> tuple[Call, Any]:
        """The server span of ``req`` and the context with it current."""
        method, params = req.method, req.params
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
        call = Call(self, session, span, self.server_duration, method, attributes, req.id)
        call.target = name
        return call, trace.set_span_in_context(span, parent)

    def _extract(self, meta: Any) -> Any:
        """The context carried in ``_meta``, or ``None`` if it carries no valid one."""
        if not isinstance(meta, dict) or "traceparent" not in meta:
            return None
        try:
            context = propagate.extract(
                {k: v for k, v in meta.items() if isinstance(v, str)}
            )
        except Exception:  # a value the propagator cannot read: no parent
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
        try:
            call, context, params = self._start_client(session, method, params)
        except Exception:  # a broken tracer must not stop the request
            log.exception("tracing: the client span of %s could not start", method[:100])
            return await send(params)
        token = otel_context.attach(context)
        span_token = client_span.set(call.span)
        try:
            result = await send(params)
        except BaseException as exc:
            quietly(call.failed, exc)
            raise
        finally:
            client_span.reset(span_token)
            otel_context.detach(token)
        quietly(call.finish_result, result)
        quietly(partial(self.creators.remember, call.span), result)
        return result

    def _start_client(
        self, session: Any, method: str, params: dict[str, Any] | None
    ) -> tuple[Call, Any, dict[str, Any] | None]:
        """The client span of a request, the context with it current, the params to send."""
        meta = params.get("_meta") if params is not None else None
        name, attributes = self._describe(session, method, params, meta)
        parent, links = self.creators.parent(method, params, otel_context.get_current())
        span = self.tracer.start_span(
            name, parent, SpanKind.CLIENT, attributes, links, record_exception=False,
        )
        context = trace.set_span_in_context(span, parent)
        if self.propagate:
            carrier: dict[str, str] = {}
            propagate.inject(carrier, context)
            if carrier:
                base = meta if isinstance(meta, dict) else {}
                params = {**(params or {}), "_meta": {**base, **carrier}}
        call = Call(self, session, span, self.client_duration, method, attributes, None)
        return call, context, params

    # --- tasks ---------------------------------------------------------------------------

    async def run_task(self, actor: Any, run: Callable[[], Awaitable[None]]) -> None:
        """Run a task's work (``run()``) under its own span, linked to its creator's.

        The creator is the request whose handler made the task (its server
        span is current where the actor was started). Status changes become
        events; the span ends with the task's terminal status (``error.type``
        ``tool_error`` for a tool's ``isError`` result, the code of an error
        outcome, ``cancelled``).
        """
        record = actor.record
        parent = otel_context.get_current()
        try:
            trace_ = self._start_task(record, parent)
        except Exception:  # a broken tracer must not stop the task
            log.exception("tracing: the work span of task %s could not start", record.task_id)
            actor.trace = TaskTrace(trace.INVALID_SPAN, None)
            await run()
            return
        actor.trace = trace_
        token = otel_context.attach(trace_.context)
        call_token = server_call.set(None)  # the creator's answer is not this task's
        try:
            await run()
        finally:
            server_call.reset(call_token)
            otel_context.detach(token)
            quietly(trace_.end, record)

    def _start_task(self, record: Any, parent: Any) -> TaskTrace:
        """The work span of the task of ``record``, its first status recorded."""
        creator_call = server_call.get()
        creator = trace.get_current_span(parent).get_span_context()
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
        trace_ = TaskTrace(span, trace.set_span_in_context(span, parent))
        trace_.status_changed(record)
        return trace_

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


class TaskCreators:
    """The requests (their ``CLIENT`` spans) that created tasks, by task id: the trace that
    a handle's ``tasks/*`` requests about one of them join (the newest :data:`CREATORS_KEPT`)."""

    def __init__(self) -> None:
        self._spans: OrderedDict[str, Any] = OrderedDict()

    def remember(self, span: Any, result: Any) -> None:
        """A request answered with a task (2025-11-25's ``CreateTaskResult``, the extension's
        ``resultType: "task"``): its span is where the task's ``tasks/*`` requests go."""
        task_id = created_task_id(result)
        if task_id is None:
            return
        self._spans[task_id] = span.get_span_context()
        self._spans.move_to_end(task_id)
        while len(self._spans) > CREATORS_KEPT:
            self._spans.popitem(last=False)

    def parent(
        self, method: str, params: dict[str, Any] | None, parent: Any
    ) -> tuple[Any, list[Link] | None]:
        """Where a ``tasks/*`` request about a task this process created goes: under the
        creating request's span (one trace per task, however many polls), or, when the
        caller has a span of its own current, under that one with a link to the creator."""
        if method not in _TASK_METHODS or not params or not self._spans:
            return parent, None
        task_id = params.get("taskId")
        creator = self._spans.get(task_id) if isinstance(task_id, str) else None
        if creator is None:
            return parent, None
        if trace.get_current_span(parent).get_span_context().is_valid:
            return parent, [Link(creator, {"mcp.task.link": "created_by"})]
        return trace.set_span_in_context(NonRecordingSpan(creator), parent), None


def created_task_id(result: Any) -> str | None:
    """The id of the task a request's answer created, or None (not a task)."""
    if not isinstance(result, dict):
        return None
    task = result.get("task") if "task" in result else (
        result if result.get("resultType") == "task" else None
    )
    task_id = task.get("taskId") if isinstance(task, dict) else None
    return task_id if isinstance(task_id, str) else None


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
