"""OpenTelemetry traces and metrics for MCP messages and tasks, optional and free when off.

The JSON-RPC session and the task actor read one module-level value,
:data:`active`: ``None`` when tracing is off (the OpenTelemetry API is not
installed, no tracer or meter provider is configured, or
:func:`configure_tracing` turned it off), else the :class:`~._otel.Tracing`
that makes the spans. Off, a message costs one attribute read and a
comparison; nothing is allocated and no ``_meta`` key is written (the wire
stays byte for byte what it is without tracing).

On, every request is a span on each side, per the OpenTelemetry semantic
conventions for MCP (``{mcp.method.name} {target}``, ``CLIENT`` on the sender,
``SERVER`` on the receiver), the trace context travels in ``params._meta``
(``traceparent``, ``tracestate``, ``baggage``: SEP-414) both ways, and a task's
work runs under a span of its own (see :mod:`._otel`).

This module knows no other part of trio-mcp (it sits beside ``_errors``): the
session and the actor hand it what it needs.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ._context import client_span as client_span
from ._context import server_call as server_call

if TYPE_CHECKING:
    from ._otel import Tracing

T = TypeVar("T")

#: The tracer in use, or ``None`` when tracing is off. Read once per message.
active: Tracing | None = None

#: ``TRIO_MCP_TRACING=off`` (or ``0``, ``false``, ``no``) turns automatic
#: tracing off, as ``configure_tracing(enabled=False)`` does.
ENV_SWITCH: Final = "TRIO_MCP_TRACING"

_forced: bool | None = None
_options: dict[str, Any] = {}
_api: bool | None = None  # None: not looked for yet
_checked_at = -math.inf  # when automatic mode last looked at the global providers
_switched_off = os.environ.get(ENV_SWITCH, "").lower() in (
    "off", "0", "false", "no"
)
#: The API loads a provider named in these by itself (an agent's set-up).
_env_providers = any(
    name in os.environ for name in ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")
)
_OTEL_TRACE: Final = "opentelemetry.trace"
_OTEL_METRICS: Final = "opentelemetry.metrics"


def configure_tracing(
    *,
    enabled: bool | None = None,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    trace_task_polling: bool = True,
    propagate: bool = True,
    resource_uri_in_span_name: bool = False,
) -> None:
    """Set how trio-mcp traces; connections opened afterwards use the new settings.

    Without a call, tracing is automatic: it is on when ``opentelemetry-api``
    is installed and a tracer or meter provider was set globally
    (``trace.set_tracer_provider``, or an auto-instrumentation agent), unless
    ``TRIO_MCP_TRACING=off``.

    Args:
        enabled: ``None`` (automatic, as above); ``True``: on with the given
            (else the global) providers; ``False``: off, whatever is installed.
        tracer_provider: Make spans with this provider instead of the global one.
        meter_provider: Record ``mcp.server.operation.duration`` and
            ``mcp.client.operation.duration`` with this provider instead of the
            global one.
        trace_task_polling: ``False`` leaves ``tasks/get`` requests out (no
            span, no duration, no trace context sent), on both sides: a
            requestor polling a long task makes one per ``pollInterval``.
        propagate: ``False``: no trace context is written into outgoing
            ``params._meta`` nor read from incoming ones (each side's spans stay in
            its own traces).
        resource_uri_in_span_name: Name ``resources/read`` (and subscribe)
            spans ``{method} {uri}`` (the conventions leave it opt-in: URIs make
            many span names).

    Raises:
        ImportError: ``enabled=True`` and ``opentelemetry-api`` is not installed
            (install the ``otel`` extra).
    """
    global _forced, active, _checked_at, _switched_off
    if enabled and not _api_present():
        raise ImportError(
            "tracing needs opentelemetry-api: pip install 'trio-mcp[otel]'"
        )
    _forced = enabled
    _options.clear()
    _options.update(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        trace_task_polling=trace_task_polling,
        propagate=propagate,
        resource_uri_in_span_name=resource_uri_in_span_name,
    )
    active = None
    _checked_at = -math.inf
    _switched_off = _env_switched_off()
    refresh()


def refresh(*, now: bool = False) -> None:
    """Decide whether tracing is on; called as each connection is made (cheap when off).

    Automatic mode costs nothing until ``opentelemetry`` is imported (a
    provider cannot be set before), then looks at the global providers at
    most once a second while none is set: a provider set after trio-mcp was
    imported is noticed by the connections made from a second later on
    (``now``: look at once). Once on, it stays on (a global provider is
    set once).
    """
    global active, _checked_at
    if _forced is not None:
        if not _forced:
            active = None
        elif active is None or not active.uses(_options):
            from . import _otel

            active = _otel.Tracing(**_options)
        return
    if active is not None or _switched_off:
        return
    if not (_OTEL_TRACE in sys.modules or _OTEL_METRICS in sys.modules or _env_providers):
        return  # nothing imported opentelemetry: no provider can be set
    clock = time.monotonic()
    if not now and clock - _checked_at < 1.0:
        return
    _checked_at = clock
    if not _api_present():
        return
    from . import _otel

    if _otel.provider_configured(_options):
        active = _otel.Tracing(**_options)


def _env_switched_off() -> bool:
    return os.environ.get(ENV_SWITCH, "").lower() in ("off", "0", "false", "no")


def _api_present() -> bool:
    global _api
    if _api is None:
        try:
            import opentelemetry.trace  # noqa: F401
        except ImportError:
            _api = False
        else:
            _api = True
    return _api


def serve(session: Any, req: Any, on_request: Callable[[Any], None]) -> None:
    """Handle an incoming request (``on_request(req)``) under its server span."""
    if active is None:  # turned off since the caller looked
        on_request(req)
    else:
        active.serve(session, req, on_request)


def answered(request_id: Any, reply: Any) -> None:
    """The answer to an incoming request is known: end its server span.

    Args:
        request_id: The request's id.
        reply: The ``Response`` / ``ErrorResponse`` to be sent, or ``None``
            when nothing will be (the peer cancelled the request).
    """
    call = server_call.get()
    if call is not None and call.request_id == request_id:
        try:
            call.finish(reply)
        except Exception:  # a broken tracer must not cost the request its answer
            logging.getLogger("trio_mcp.telemetry").exception("tracing: a span could not end")


async def within(context: Any, call: Awaitable[T]) -> T:
    """Await ``call`` with ``context`` (an OpenTelemetry context) current.

    What a task's input request uses when another Trio task delivers it: its
    span is then a child of the task's work span.
    """
    from opentelemetry import context as otel_context

    token = otel_context.attach(context)
    try:
        return await call
    finally:
        otel_context.detach(token)


def tracing_enabled() -> bool:
    """True when connections made now would be traced."""
    refresh(now=True)
    return active is not None


def sending(request_id: Any) -> None:
    """The id of the request being sent under :data:`client_span` is known: record it."""
    span = client_span.get()
    if span is not None:
        span.set_attribute("jsonrpc.request.id", str(request_id))
