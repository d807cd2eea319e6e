"""The 2025-11-25 dialect: a connection's requests, read as its handshake says.

A 2025-11-25 request carries no era of its own: what it means (protocol
version, the client's capabilities, the log level) is what the connection's
``initialize`` handshake and ``logging/setLevel`` fixed. :class:`LegacyDialect`
is that era as a value, one per connection (``PeerCore.dialect``, set by
``Peer``), the :class:`~trio_mcp.peer._features._base.Dialect` of every request
that came without one: a ``tools/call`` runs as the task its ``params.task``
asks for, its answer is ``{"task": ...}``, a question is a request to the client
(hosted by the client as a task when asked and declared), and a task's
questions are pushed to its requestor.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar, final

from ..._errors import LocalUsageError
from .._features._base import Asker, PeerCore, Question
from .._features._logging import Logging
from .._features._questions import ask_each
from .._messages import (
    CAPABILITY_OF,
    ClientCapabilities,
    TaskMetadata,
    converter,
    level_rank,
    task_capability,
    to_wire,
)
from .._tasks import PUSHED, TaskActor, TaskHandle, TaskQuestions, TaskRecord

log = logging.getLogger("trio_mcp.peer")
T = TypeVar("T")


@final
class LegacyDialect:
    """The 2025-11-25 era of one connection (a ``Dialect``): its handshake's.

    Args:
        peer: The connection; read as it is when asked (the handshake may come later).
    """

    __slots__ = ("_peer",)

    def __init__(self, peer: Logging) -> None:
        self._peer = peer

    @property
    def protocol_version(self) -> str:
        """The negotiated version (``2025-11-25`` before the handshake)."""
        return self._peer.protocol_version or "2025-11-25"

    @property
    def client_capabilities(self) -> ClientCapabilities | None:
        """What the client declared in ``initialize`` (``None`` before it)."""
        return self._peer.remote_client_capabilities

    def lets_log(self, level_rank_: int) -> bool:
        """The connection's ``logging/setLevel`` (none set: every message)."""
        level = self._peer.log_level
        return level is None or level_rank_ >= level_rank(level)

    def call_task(self, requested: TaskMetadata | None) -> TaskMetadata | None:
        """What the request's ``params.task`` asked for."""
        return requested

    def task_created(self, record: TaskRecord, meta: dict[str, Any] | None) -> dict[str, Any]:
        """``CreateTaskResult``: ``{"task": ..., "_meta": ...}``."""
        # = to_wire(CreateTaskResult(record.snapshot(), meta=meta))
        result: dict[str, Any] = {"task": record.wire()}
        if meta is not None:
            result["_meta"] = meta
        return result

    def task_questions(self, actor: TaskActor) -> TaskQuestions:
        """Pushed: requests to the requestor, with the related-task ``_meta``."""
        return PUSHED

    def start_task(self, actor: TaskActor) -> None:
        """A 2025-11-25 task has no prelude: nothing to do."""

    def stored_capabilities(self) -> dict[str, Any] | None:
        """The handshake's client capabilities (a re-run is served as if handshaken)."""
        caps = self._peer.remote_capabilities
        return None if caps is None else to_wire(caps)

    async def ask(
        self, ctx: Asker, method: str, params: dict[str, Any], result_type: type[T],
        key: str | None, *, as_task: bool = False, ttl: int | None = None,
    ) -> T:
        """A request to the client (as a task it hosts, if asked and declared).

        Raises:
            LocalUsageError: The client did not declare the capability.
            RemoteError, ConnectionClosed: As the request failed.
        """
        caps = ctx.peer.remote_client_capabilities
        capability = CAPABILITY_OF[method]
        if caps is None or getattr(caps, capability) is None:
            raise LocalUsageError(f"the client did not declare the {capability} capability")
        if method == "elicitation/create" and caps.elicitation and "form" not in caps.elicitation:
            raise LocalUsageError("the client did not declare form-mode elicitation")
        if method == "roots/list":
            raw, _ = await ctx._ask(method, params)
            roots: T = converter.structure(raw, result_type)
            return roots
        use_task = as_task and task_capability(ctx.peer.remote_client_capabilities, method)
        if use_task:
            params["task"] = {} if ttl is None else {"ttl": ttl}
        raw, via = await ctx._ask(method, params)
        if use_task and isinstance(raw.get("task"), dict):
            # The answer came over a connection of ours (a peer), maybe not
            # the one the request arrived on: follow the task there.
            conn = via if isinstance(via, PeerCore) else ctx.peer
            handle = TaskHandle.from_create_result(conn, raw, result_type)
            log.debug("%s hosted by the client as task %s", method, handle.task_id)
            await handle.wait()
            return await handle.result()
        result: T = converter.structure(raw, result_type)
        return result

    async def ask_many(self, ctx: Asker, questions: dict[str, Question]) -> dict[str, Any]:
        """The requests sent concurrently."""
        return await ask_each(ctx, questions)
