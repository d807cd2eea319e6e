"""The 2025-11-25 dialect: a connection's requests, read as its handshake says, and sent.

A 2025-11-25 request carries no era of its own: what it means (protocol
version, the client's capabilities, the log level) is what the connection's
``initialize`` handshake and ``logging/setLevel`` fixed. :class:`LegacyDialect`
is that era as a value, one per connection (``PeerCore.dialect``, set by
``Peer``), the :class:`~trio_mcp.peer._features._base.Dialect` of every request
that came without one: a ``tools/call`` runs as the task its ``params.task``
asks for, its answer is ``{"task": ...}``, a question is a request to the client
(hosted by the client as a task when asked and declared), and a task's
questions are pushed to its requestor. :class:`LegacyClient` is the same era
on a client connection's side (a ``ClientEra``): what its requests look like
(``ping``, ``logging/setLevel``, ``resources/subscribe``, a ``tools/call``
augmented with ``task``, ``tasks/*``) until it chose 2026-07-28.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar, final

from ..._errors import METHOD_NOT_FOUND, LocalUsageError, RemoteError, RemoteProtocolError
from .._features._base import Asker, PeerCore, Question
from .._features._logging import Logging
from .._features._questions import ask_each
from .._messages import (
    CAPABILITY_OF,
    CallToolParams,
    CallToolResult,
    ClientCapabilities,
    EmptyResult,
    ListTasksResult,
    ResourceUriParams,
    SetLevelParams,
    Task,
    TaskMetadata,
    TaskStatus,
    Tool,
    converter,
    level_rank,
    task_capability,
    to_wire,
)
from .._session import ProgressCallback
from .._tasks import PUSHED, TaskActor, TaskHandle, TaskQuestions, TaskRecord

log = logging.getLogger("trio_mcp.peer")
T = TypeVar("T")
R = TypeVar("R")


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


@final
class LegacyClient:
    """The 2025-11-25 wire of a client connection (a ``ClientEra``): plain JSON-RPC
    requests after ``initialize``, tasks followed with ``tasks/*``.

    Args:
        peer: The connection; its session carries every request.
    """

    __slots__ = ("_peer",)

    def __init__(self, peer: PeerCore) -> None:
        self._peer = peer

    @property
    def protocol_version(self) -> str | None:
        """The version the handshake agreed (``None`` before it)."""
        return self._peer.protocol_version

    async def request_raw(
        self, method: str, params: dict[str, Any] | None, *,
        progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """One request on the session."""
        return await self._peer.session.request_raw(method, params, progress=progress)

    async def ping(self) -> None:
        """``ping``."""
        await self._peer.session.request_raw("ping")

    async def set_log_level(self, level: str) -> None:
        """``logging/setLevel``."""
        await self._peer.session.request("logging/setLevel", SetLevelParams(level), EmptyResult)

    async def subscribe(self, uri: str | None = None) -> None:
        """``resources/subscribe`` (list changes need no subscription here)."""
        if uri is not None:
            await self._peer.session.request(
                "resources/subscribe", ResourceUriParams(uri), EmptyResult
            )

    async def unsubscribe(self, uri: str) -> None:
        """``resources/unsubscribe``."""
        await self._peer.session.request(
            "resources/unsubscribe", ResourceUriParams(uri), EmptyResult
        )

    async def answer(self, requests: dict[str, Any], answered: dict[str, Any]) -> dict[str, Any]:
        """Never: a 2025-11-25 task's questions are requests to this side.

        Raises:
            RemoteProtocolError: Always.
        """
        raise RemoteProtocolError("the connection no longer speaks 2026-07-28")

    def task_handle(
        self, raw: dict[str, Any], result_type: type[R], progress: ProgressCallback | None = None
    ) -> TaskHandle[R]:
        """The ``CreateTaskResult``'s task."""
        return TaskHandle.from_create_result(self._peer, raw, result_type)

    def reattach(self, task_id: str, result_type: type[R]) -> TaskHandle[R]:
        """A handle polling ``tasks/get`` (nothing is sent until it is used)."""
        placeholder = Task(task_id, TaskStatus.WORKING, "", "", None)
        return TaskHandle(self._peer, placeholder, result_type)

    async def get_task(self, task_id: str, meta: dict[str, Any] | None = None) -> Task:
        """``tasks/get``."""
        params: dict[str, Any] = {"taskId": task_id}
        if meta:
            params["_meta"] = dict(meta)
        return await self._peer.session.request("tasks/get", params, Task)

    async def task_result(self, task_id: str) -> dict[str, Any]:
        """``tasks/result`` (blocks until the task is terminal)."""
        return await self._peer.session.request_raw("tasks/result", {"taskId": task_id})

    async def cancel_task(self, task_id: str) -> Task:
        """``tasks/cancel``."""
        return await self._peer.session.request("tasks/cancel", {"taskId": task_id}, Task)

    async def list_tasks(self, cursor: str | None) -> ListTasksResult:
        """``tasks/list``."""
        return await self._peer.session.request(
            "tasks/list", {"cursor": cursor} if cursor else None, ListTasksResult
        )

    def _tool_tasks(self) -> bool:
        return task_capability(self._peer.remote_server_capabilities, "tools/call")

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, progress: ProgressCallback | None,
        known: Tool | None,
    ) -> CallToolResult:
        """A plain ``tools/call``; refused here for a tool listed as requiring a task.

        Raises:
            LocalUsageError: The tool (as last listed) requires a task.
            RemoteError: The server refused (its hint names ``call_tool_task()``
                when the refusal is for a plain call of a task-only tool).
        """
        if known is not None and known.task_support == "required" and self._tool_tasks():
            raise LocalUsageError(
                f"tool {known.name!r} requires task-augmented execution: use call_tool_task()"
            )
        try:
            return await self._peer.session.request(
                "tools/call", CallToolParams(name=name, arguments=arguments), CallToolResult,
                progress=progress,
            )
        except RemoteError as exc:
            if exc.code != METHOD_NOT_FOUND or not self._tool_tasks():
                raise
            # Not listed yet (no local check): the server refused a plain call of a
            # tool that requires a task. The same hint as the local check.
            raise RemoteError(
                exc.code, f"{exc.message}: use call_tool_task()", exc.data
            ) from exc

    async def call_tool_task(
        self, name: str, arguments: dict[str, Any] | None, *, ttl: int | None,
        meta: dict[str, Any] | None, progress: ProgressCallback | None, known: Tool | None,
    ) -> TaskHandle[CallToolResult]:
        """``tools/call`` augmented with ``task: {ttl}``; progress by a token of the call's.

        Raises:
            LocalUsageError: The server did not declare tasks for ``tools/call``,
                or the tool (as last listed) forbids them.
        """
        if not self._tool_tasks():
            raise LocalUsageError("the server did not declare tasks.requests.tools.call")
        if known is not None and known.task_support == "forbidden":
            raise LocalUsageError(
                f"tool {known.name!r} does not support task-augmented execution"
            )
        params = to_wire(CallToolParams(name=name, arguments=arguments, task=TaskMetadata(ttl)))
        params["task"] = {} if ttl is None else {"ttl": ttl}
        if meta:
            params["_meta"] = dict(meta)
        token = None
        if progress is not None:
            token = self._peer.register_progress(progress)
            params["_meta"] = {**params.get("_meta", {}), "progressToken": token}
        try:
            raw = await self._peer.session.request_raw("tools/call", params)
        except BaseException:
            if token is not None:
                self._peer.forget_progress(token)
            raise
        handle = TaskHandle.from_create_result(self._peer, raw, CallToolResult)
        handle.progress_token = token
        return handle
