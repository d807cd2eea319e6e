"""What the features ask of the era a request arrived in: the :class:`Dialect` protocol.

The features are written once. Where the eras differ for a feature (which
capabilities and log level count, how a question is asked, how a task's
questions travel), the feature asks the request's :class:`Dialect`; a
2025-11-25 request has none (``None``: the connection's handshake holds what
the request means). The 2026-07-28 dialect (``trio_mcp.peer._dialects``)
implements the protocol and hands its value to the feature's handler on the
request (``Request.dialect``, never on the wire); the handler passes it on to
the :class:`~._context.RequestContext` and to a task's work. No feature
imports the dialect.

:data:`current_dialect` is only for what has no request in hand: a log
message sent through Python ``logging`` or ``Peer.send_log_message`` while a
2026-07-28 request's handler runs is weighed against that request's level.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from .._messages import ClientCapabilities, TaskMetadata
from .._tasks import PulledInputs, TaskActor, TaskRecord

T = TypeVar("T")


class Dialect(Protocol):
    """The per-request era of a request whose era is not its connection's handshake.

    Attributes:
        protocol_version: The request's protocol version.
        client_capabilities: The capabilities the request declared.
        log_level: The log level the request asked for (``None``: no log messages).
        task: The task a ``tools/call`` runs as when the era has the server decide
            (2026-07-28: the tool's task support and the request's declared
            extension); ``None``: a plain call.
    """

    protocol_version: str
    client_capabilities: ClientCapabilities
    log_level: str | None
    task: TaskMetadata | None

    def task_created(self, record: TaskRecord, meta: dict[str, Any] | None) -> dict[str, Any]:
        """The answer to a request that became the task ``record``, in this era's shape."""
        ...

    def ask(self, method: str, params: dict[str, Any], result_type: type[T], key: str | None) -> T:
        """Answer one question from what the request carries, or stop the handler.

        Raises:
            InputRequired: Not answered yet (the request ends asking for it).
            McpError: The client cannot be asked that, or answered malformed.
        """
        ...

    def ask_many(
        self, questions: Mapping[str, tuple[str, dict[str, Any], type[Any]]]
    ) -> dict[str, Any]:
        """Answer several questions at once; all unanswered ones are asked together."""
        ...

    def start_task(self, actor: TaskActor) -> None:
        """End the prelude of the task ``actor`` runs, if it has one (``ctx.start_task()``)."""
        ...

    def task_questions(self) -> PulledInputs:
        """How the questions of a task this request creates travel (pulled by the requestor)."""
        ...

    def check_question(self, method: str, params: dict[str, Any]) -> None:
        """Refuse a question the requestor cannot be asked (its declared capabilities).

        Raises:
            McpError: -32021 naming the missing capability.
        """
        ...

    def structure_answer(self, key: str, found: Any, result_type: type[T]) -> T:
        """An answer as ``result_type``.

        Raises:
            McpError: -32602 naming the malformed answer.
        """
        ...


#: The dialect of the request being handled in this context (``None``: 2025-11-25),
#: read only for log messages sent without a request context (see the module).
current_dialect: contextvars.ContextVar[Dialect | None] = contextvars.ContextVar(
    "trio_mcp_dialect", default=None
)


def dialect_of(pulled: PulledInputs) -> Dialect:
    """The dialect that made a task's :class:`PulledInputs` (:meth:`Dialect.task_questions`)."""
    dialect: Dialect = pulled.capabilities
    return dialect
