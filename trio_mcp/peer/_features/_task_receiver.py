"""The task receiver feature: task-augmented requests and ``tasks/get|result|list|cancel``.

A feature whose request can run as a task (tools, sampling, elicitation)
calls :func:`create_task` with the work to run; the registry starts an actor
and the ``CreateTaskResult`` is answered at once. Every ``tasks/*`` request
is checked against the requestor's context and rate limit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from ..._errors import METHOD_NOT_FOUND, McpError
from .._messages import (
    ListTasksResult,
    PaginatedParams,
    Request,
    TaskMetadata,
    from_wire,
    task_capability,
    task_id_param,
)
from .._session import Reply
from .._tasks import TaskActor, followed, parent_of, tree_of, watch_orphan
from .._tasks._rerun import ADOPTING, RerunTicket, attempt_meta
from ._base import AppView, PeerCore
from ._scopes import check_task_scopes

T = TypeVar("T")


async def create_task(
    peer: PeerCore,
    req: Request,
    task: TaskMetadata,
    request_meta: dict[str, Any] | None,
    work: Callable[[TaskActor], Awaitable[dict[str, Any]]],
    result_meta: dict[str, Any] | None = None,
    *,
    rerun: RerunTicket | None = None,
) -> Reply:
    """Accept ``req`` as a task running ``work``; answer ``CreateTaskResult`` at once.

    The work starts once the answer is on the wire (the reply's ``after_send``).
    Completes without waiting when the store needs no wait (memory): started
    inline by the session (``tools/call`` is an inline method), it is answered there.

    ``rerun``: a re-runnable task's ticket, kept by the store.

    Raises:
        McpError: -32000 when a cap or the rate limit is reached.
    """
    registry = peer.app.registry
    owner = peer.context_of(req)
    if ADOPTING.get() is None:  # (a claimed task served again was counted once)
        registry.check_rate(owner)
    token = (request_meta or {}).get("progressToken")
    actor = await registry.create(
        owner,
        req.method,
        work,
        requested_ttl=task.ttl,
        origin=peer,
        progress_token=token if isinstance(token, str | int) else None,
        rerun=rerun,
    )
    dialect = peer.dialect_of(req)
    actor.questions = dialect.task_questions(actor)
    parent = parent_of(request_meta)
    if parent is not None:  # a child of another peer's task (``ctx.children()``)
        tree_of(actor).parent = parent
        after = registry.limits.orphan_after
        if after is not None:
            task_id = actor.task_id

            async def orphaned() -> None:
                with contextlib.suppress(McpError):  # ended meanwhile
                    await registry.cancel(owner, task_id)

            actor.wrap_work(watch_orphan(after / 1000, orphaned))
    # The era's CreateTaskResult; the work starts once it is sent (= actor.announced.set).
    return Reply(dialect.task_created(actor.record, result_meta), actor.launch)


def hosts(peer: PeerCore, method: str) -> bool:
    """True when this side declared task augmentation for ``method``.

    Remembered per connection once the handshake fixed the capabilities.
    """
    known = peer.hosted.get(method)
    if known is None:
        known = task_capability(peer.local_capabilities, method)
        if peer.declared_capabilities is not None:
            peer.hosted[method] = known
    return known


class TaskReceiver(PeerCore):
    """Answers ``tasks/*`` for the tasks this side hosts."""

    def install(self) -> None:
        self.session.request_handlers["tasks/list"] = self._on_tasks_list
        # Started in the reader's task: answered there unless the store must be waited on.
        handlers = {
            "tasks/get": self._on_tasks_get,
            "tasks/result": self._on_tasks_result,
            "tasks/cancel": self._on_tasks_cancel,
        }
        self.session.request_handlers.update(handlers)
        self.session.inline.update(handlers)

    @classmethod
    def _declare(cls, app: AppView, declared: Mapping[str, Any]) -> Mapping[str, Any]:
        tasks = declared.get("tasks")
        if isinstance(tasks, dict) and tasks.get("requests"):
            return {"tasks": {"list": {}, "cancel": {}}}
        return {}

    declare_server = _declare
    declare_client = _declare

    def _require_tasks(self, feature: str | None = None) -> None:
        tasks = self.local_capabilities.tasks
        if tasks is None or (feature is not None and feature not in tasks):
            raise McpError(METHOD_NOT_FOUND, "Method not found: this side does not host tasks")

    async def _on_tasks_get(self, req: Request) -> dict[str, Any]:
        self._require_tasks()
        check_task_scopes(self, req, req.method)
        task_id = task_id_param(req.params)  # the source of truth, not related-task _meta
        registry = self.app.registry
        owner = self.context_of(req)
        registry.check_rate(owner)
        record = await registry.record(owner, task_id)
        answer = record.wire()
        meta = attempt_meta(record)  # a re-runnable task: its attempt
        tree = followed(registry, task_id, (req.params or {}).get("_meta"))
        if tree is not None:  # its place in a task tree, under our own _meta namespace
            meta = {**(meta or {}), **tree}
        if meta is not None:
            answer["_meta"] = meta
        return answer

    def _on_tasks_result(self, req: Request) -> Coroutine[Any, Any, dict[str, Any]]:
        self._require_tasks()
        check_task_scopes(self, req, req.method)
        task_id = task_id_param(req.params)  # the source of truth, not related-task _meta
        registry = self.app.registry
        owner = self.context_of(req)
        registry.check_rate(owner)
        return registry.result(owner, task_id, self)  # the session awaits it

    async def _on_tasks_list(self, req: Request) -> ListTasksResult:
        self._require_tasks("list")
        check_task_scopes(self, req, req.method)
        params = from_wire(req.params or {}, PaginatedParams)
        owner = self.context_of(req)
        self.app.registry.check_rate(owner)
        tasks, cursor = await self.app.registry.list(owner, params.cursor)
        return ListTasksResult(tasks, cursor)

    async def _on_tasks_cancel(self, req: Request) -> dict[str, Any]:
        self._require_tasks("cancel")
        check_task_scopes(self, req, req.method)
        task_id = task_id_param(req.params)  # the source of truth, not related-task _meta
        registry = self.app.registry
        owner = self.context_of(req)
        registry.check_rate(owner)
        return (await registry.cancel_record(owner, task_id, self)).wire()
