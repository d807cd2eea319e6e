"""What ends a span: a request's answer (:class:`Call`), a task's statuses (:class:`TaskTrace`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final

from opentelemetry.trace import Status, StatusCode

log = logging.getLogger("trio_mcp.telemetry")

#: The attribute naming a task (the conventions have none yet).
TASK_ID: Final = "mcp.task.id"
#: The event a task's work span records at each status, with :data:`TASK_STATUS`.
TASK_STATUS_EVENT: Final = "mcp.task.status"
TASK_STATUS: Final = "mcp.task.status"
TASK_STATUS_MESSAGE: Final = "mcp.task.status_message"

#: Attributes the histograms keep (low cardinality only).
_METRIC_KEYS: Final = (
    "mcp.method.name", "gen_ai.tool.name", "gen_ai.prompt.name", "gen_ai.operation.name",
    "mcp.protocol.version", "network.transport", "network.protocol.name",
)


def quietly(end: Callable[[Any], None], outcome: Any) -> None:
    """End a span; a tracer that fails is logged, never raised into the request."""
    try:
        end(outcome)
    except Exception:
        log.exception("tracing: a span could not end")


class Call:
    """One request's span, from its start to its answer.

    Args:
        tracing: The tracer (told the protocol version an ``initialize`` answer names).
        session: The connection.
        span: The span.
        histogram: Where the duration goes.
        method: The request's method.
        attributes: The span's attributes (the histogram keeps the low-cardinality ones).
        request_id: The request's id (server side), else ``None``.
    """

    __slots__ = (
        "attributes", "done", "histogram", "method", "request_id", "session", "span",
        "start", "target", "tracing",
    )

    def __init__(
        self, tracing: Any, session: Any, span: Any, histogram: Any, method: str,
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
        try:
            self.span.add_event(TASK_STATUS_EVENT, event)
        except Exception:  # a broken tracer must not fail the task
            log.exception("tracing: a task status event could not be recorded")

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
