"""A task's remote children: :class:`TaskChildren`, the scope ``ctx.children()`` opens.

Trio's nursery rule across the wire: a task started on another peer through
the scope of a tool running as a task belongs to that task. When the scope
is left by an exception (the parent task cancelled by ``tasks/cancel`` or its
TTL, its tool raising), every child still running gets ``tasks/cancel`` on
its peer and the scope waits, bounded, until each is seen ``cancelled``
(or otherwise terminal). Left normally, the scope waits for its children to
end, as a nursery waits for its tasks. A child's failure raises where the
parent awaits its result (:meth:`TaskHandle.result`: ``TaskFailed``,
``TaskCancelled``).

Questions travel up: while a child asks (2025-11-25: its peer sends
``elicitation/create`` or ``sampling/createMessage`` with the related-task
``_meta`` to this side's connection; 2026-07-28: ``tasks/get`` shows its
``inputRequests``), the question is asked of the parent task's own requestor
through the parent's context, in the parent's era (the parent goes
``input_required``), and the answer goes back down. On by default, opt-out
per scope or per child.

Each child is followed with ``tasks/get`` at its ``pollInterval``: that is
the parent's sign of life on the child's peer (see
``TaskLimits.orphan_after``) and what the parent's own snapshot shows of
it (``io.github.trio-mcp/children``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final, Protocol, final

import attrs
import trio

from ..._errors import INVALID_REQUEST, METHOD_NOT_FOUND, LocalUsageError, McpError, TrioMcpError
from ..._util import unwrap_group
from .._messages import (
    CallToolResult,
    CreateMessageResult,
    ElicitResult,
    ListRootsResult,
    Task,
    wire_object,
)
from .._session import ProgressCallback
from .._tasks import META_PARENT, ChildLink, TaskActor, TaskHandle, tree_of
from .._tasks._handle import MIN_POLL_INTERVAL
from ._base import Asker, QuestionForwarder
from ._questions import ask_one

log = logging.getLogger("trio_mcp.peer")

#: Seconds a scope left by an exception waits for its children's cancelled state.
DEFAULT_CANCEL_TIMEOUT: Final = 5.0
#: Seconds the (shielded) call that creates a child may take.
CREATE_TIMEOUT: Final = 30.0
#: The answer type of each question a child may ask.
_ANSWERS: Final[dict[str, type[Any]]] = {
    "elicitation/create": ElicitResult,
    "sampling/createMessage": CreateMessageResult,
    "roots/list": ListRootsResult,
}


class ChildPeer(Protocol):
    """What a children scope needs of the connection a child is started on (a client
    :class:`~trio_mcp.Peer`)."""

    task_questions: dict[str, QuestionForwarder]

    def info_of(self, req: Any) -> Mapping[str, Any]:
        """What the transport knows of the connection (``None``: its ``url``...)."""
        ...

    async def call_tool_task(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl: int | None = None,
        progress: ProgressCallback | None = None,
        meta: dict[str, Any] | None = None,
    ) -> TaskHandle[CallToolResult]:
        """Call a tool as a task."""
        ...

    async def get_task(self, task_id: str, *, meta: dict[str, Any] | None = None) -> Task:
        """``tasks/get``."""
        ...


@final
@attrs.define(eq=False)
class _Child:
    peer: ChildPeer
    handle: TaskHandle[CallToolResult]
    link: ChildLink
    forwarded: bool
    #: Set when the follower stopped: the child was seen terminal, or it could no
    #: longer be followed (:attr:`terminal` tells which).
    ended: trio.Event = attrs.field(factory=trio.Event)
    terminal: bool = False
    wake: trio.Event = attrs.field(factory=trio.Event)
    #: The follower's own scope, shielded from the parent's cancellation (which must
    #: still see the child cancelled): cancelled by the scope when it closes.
    scope: trio.CancelScope = attrs.field(factory=lambda: trio.CancelScope(shield=True))

    @property
    def task_id(self) -> str:
        return self.handle.task_id


@final
class TaskChildren:
    """The remote children of one task, opened with ``async with ctx.children() as kids``.

    Attributes:
        cancel_timeout: Seconds the scope, left by an exception, waits for its
            children's cancelled state (settable while the scope is open).
        forward_questions: The default for :meth:`call_tool_task`: ask the
            children's questions of this task's requestor.
        url: This side's own endpoint URL, sent to the children as their parent's.
    """

    def __init__(
        self,
        ctx: Asker,
        task: TaskActor,
        nursery: trio.Nursery,
        *,
        forward_questions: bool,
        cancel_timeout: float,
        url: str | None,
    ) -> None:
        self._ctx = ctx
        self._task = task
        self._nursery = nursery
        self.forward_questions = forward_questions
        self.cancel_timeout = cancel_timeout
        self.url = url
        self._children: list[_Child] = []
        self._cancelling = False
        self._closed = False
        self._asking: set[trio.CancelScope] = set()

    @property
    def _parent_meta(self) -> dict[str, Any]:
        """What names this task as the parent, in its children's requests' ``_meta``."""
        parent: dict[str, Any] = {"taskId": self._task.task_id}
        if self.url is not None:
            parent["url"] = self.url
        return {META_PARENT: parent}

    @property
    def handles(self) -> list[TaskHandle[CallToolResult]]:
        """The children started so far, oldest first."""
        return [child.handle for child in self._children]

    async def call_tool_task(
        self,
        peer: ChildPeer,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl: int | None = None,
        progress: ProgressCallback | None = None,
        forward_questions: bool | None = None,
    ) -> TaskHandle[CallToolResult]:
        """Call ``name`` on ``peer`` as a task that is a child of this task.

        The request names this task as the child's parent (``_meta``
        ``io.github.trio-mcp/parent``). In 2026-07-28, if the server answers at
        once (it made no task), the handle is already completed and nothing is
        followed.

        Args:
            peer: A client connection to the child's server.
            name: The tool.
            arguments: Its arguments.
            ttl: The requested TTL (ms; 2025-11-25 only).
            progress: As for :meth:`Peer.call_tool_task`.
            forward_questions: Ask this child's questions of this task's
                requestor (default: the scope's :attr:`forward_questions`); when
                off, ``peer``'s own App handlers answer them.

        Returns:
            The child's handle: :meth:`TaskHandle.result` raises ``TaskFailed``
            or ``TaskCancelled`` when the child failed or was cancelled.

        Raises:
            LocalUsageError: The scope has ended.
            RemoteError, ConnectionClosed: As for :meth:`Peer.call_tool_task`.
            trio.TooSlowError: No answer within :data:`CREATE_TIMEOUT` seconds.

        Cancellation: the call itself is shielded (at most :data:`CREATE_TIMEOUT`
            seconds), so a task the server makes is always the scope's: the
            cancellation is raised once the child is registered, and leaving the
            scope by it cancels the child.
        """
        if self._closed:
            raise LocalUsageError("this children scope has ended: start children inside it")
        # Shielded: a task the server makes must be known to the scope, or a cancel that
        # came while the answer was on its way would leave it running unowned.
        with trio.fail_after(CREATE_TIMEOUT, shield=True):
            handle = await peer.call_tool_task(
                name, arguments, ttl=ttl, progress=progress, meta=self._parent_meta
            )
        if not handle.task_id:  # 2026-07-28: answered at once, no task to follow
            await trio.lowlevel.checkpoint()
            return handle
        url = peer.info_of(None).get("url")
        link = tree_of(self._task).add_child(handle.task_id, url if isinstance(url, str) else None)
        link.observe(handle.task.status.value, handle.task.status_message, handle.task.meta)
        forward = self.forward_questions if forward_questions is None else forward_questions
        child = _Child(peer, handle, link, forward)
        self._children.append(child)
        if forward:
            peer.task_questions[handle.task_id] = self._forward
        self._nursery.start_soon(self._follow, child)
        await trio.lowlevel.checkpoint()  # a cancel that came meanwhile: raised now, owned
        return handle

    async def _forward(
        self, method: str, params: dict[str, Any], key: str | None
    ) -> dict[str, Any]:
        """Ask a child's question of this task's requestor (under the child's ``key``
        when it is free); its raw answer."""
        answer_type = _ANSWERS.get(method)
        if answer_type is None:
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {method[:64]}")
        if self._closed:
            raise McpError(INVALID_REQUEST, "the parent task no longer follows this task")
        question = {k: v for k, v in params.items() if k not in ("task", "_meta")}
        # Asked in the forwarding request's own task: ended with the scope.
        with trio.CancelScope() as scope:
            self._asking.add(scope)
            try:
                answer = await ask_one(self._ctx, method, question, answer_type, key)
            finally:
                self._asking.discard(scope)
        if scope.cancelled_caught:
            raise McpError(INVALID_REQUEST, "the parent task no longer follows this task")
        raw: dict[str, Any] = wire_object(answer)
        return raw

    async def _follow(self, child: _Child) -> None:
        """``tasks/get`` on the child at its ``pollInterval`` until it ends."""
        interval = max(child.handle.task.poll_interval or 1_000, MIN_POLL_INTERVAL) / 1000
        try:
            with child.scope:
                await self._poll(child, interval)
        finally:
            child.ended.set()
            if child.forwarded and child.peer.task_questions.get(child.task_id) == self._forward:
                del child.peer.task_questions[child.task_id]

    async def _poll(self, child: _Child, interval: float) -> None:
        while True:
            try:
                task = await child.peer.get_task(child.task_id, meta=self._parent_meta)
            except TrioMcpError as exc:
                log.info("child task %s no longer followed: %s", child.task_id[:64], exc)
                return
            child.link.observe(task.status.value, task.status_message, task.meta)
            if task.status.is_terminal:
                child.terminal = True
                return
            if task.poll_interval:
                interval = max(task.poll_interval, MIN_POLL_INTERVAL) / 1000
            wait = MIN_POLL_INTERVAL / 1000 if self._cancelling else interval
            with trio.move_on_after(wait):
                await child.wake.wait()
            child.wake = trio.Event()

    async def _cancel_all(self) -> None:
        """``tasks/cancel`` every child still running; wait (bounded) until each ended."""
        self._cancelling = True
        with trio.CancelScope(shield=True), trio.move_on_after(self.cancel_timeout):
            running = [c for c in self._children if not c.terminal]
            async with trio.open_nursery() as nursery:
                for child in running:
                    nursery.start_soon(self._cancel_one, child)

    async def _cancel_one(self, child: _Child) -> None:
        try:
            await child.handle.cancel()
        except Exception as exc:  # already terminal (-32602), the peer gone, a failed answer
            log.info("tasks/cancel of child %s: %s", child.task_id[:64], exc)
        child.wake.set()
        await child.ended.wait()

    async def _wait_all(self) -> None:
        """Wait until every child ended (the scope left normally): one ``tasks/get`` now
        for a child whose result was awaited already."""
        for child in self._children:
            if not child.ended.is_set():
                child.wake.set()  # poll now rather than at the next interval
                await child.ended.wait()

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        ctx: Asker,
        task: TaskActor,
        *,
        forward_questions: bool = True,
        cancel_timeout: float = DEFAULT_CANCEL_TIMEOUT,
        url: str | None = None,
    ) -> AsyncIterator[TaskChildren]:
        """The scope behind ``ctx.children()`` (see :meth:`RequestContext.children`)."""
        with unwrap_group():
            async with trio.open_nursery() as nursery:
                kids = cls(
                    ctx, task, nursery, forward_questions=forward_questions,
                    cancel_timeout=cancel_timeout, url=url,
                )
                try:
                    yield kids
                except BaseException:
                    await kids._cancel_all()
                    raise
                else:
                    await kids._wait_all()
                finally:
                    kids._close()
                    nursery.cancel_scope.cancel()

    def _close(self) -> None:
        self._closed = True
        for scope in self._asking:
            scope.cancel()
        for child in self._children:
            child.scope.cancel()
            if child.forwarded and child.peer.task_questions.get(child.task_id) == self._forward:
                del child.peer.task_questions[child.task_id]


