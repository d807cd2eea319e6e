"""The client features: ``sampling/createMessage`` and ``elicitation/create``.

As a client, answers them with the App's handlers (as a task when the server
asks for one and this side declared it); as a server, sends them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from ..._errors import INVALID_PARAMS, METHOD_NOT_FOUND, McpError
from .._messages import (
    RELATED_TASK_META,
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    Request,
    TaskMetadata,
    from_wire,
    wire_object,
)
from .._tasks import TaskActor
from ._base import AppView, PeerCore, QuestionForwarder, Role
from ._context import RequestContext
from ._task_receiver import create_task, hosts

P = TypeVar("P")


class ClientFeatures(PeerCore):
    """Sampling and elicitation, answered as a client and sent as a server."""

    def install(self) -> None:
        self.session.request_handlers["sampling/createMessage"] = self._on_sampling
        self.session.request_handlers["elicitation/create"] = self._on_elicitation

    @classmethod
    def declare_client(cls, app: AppView, declared: Mapping[str, Any]) -> Mapping[str, Any]:
        caps: dict[str, Any] = {}
        requests: dict[str, Any] = {}
        if app.sampling_handler is not None:
            caps["sampling"] = {}
            requests["sampling"] = {"createMessage": {}}
        if app.elicitation_handler is not None:
            caps["elicitation"] = {mode: {} for mode in app.elicitation_modes}
            requests["elicitation"] = {"create": {}}
        if app.host_tasks and requests:
            caps["tasks"] = {"requests": requests}
        return caps

    def _forwarder(self, req: Request) -> QuestionForwarder | None:
        """Who answers ``req`` instead of the App's handler: the children scope of the
        task it relates to (its related-task ``_meta``), if one forwards its questions."""
        if not self.task_questions:
            return None
        meta = (req.params or {}).get("_meta")
        related = meta.get(RELATED_TASK_META) if isinstance(meta, dict) else None
        task_id = related.get("taskId") if isinstance(related, dict) else None
        return self.task_questions.get(task_id) if isinstance(task_id, str) else None

    async def _on_sampling(self, req: Request) -> Any:
        return await self._on_client_request(req, self.app.sampling_handler, CreateMessageParams)

    async def _on_elicitation(self, req: Request) -> Any:
        if self.role is Role.CLIENT and self.app.elicitation_handler is not None:
            mode = (req.params or {}).get("mode") or "form"
            if mode not in self.app.elicitation_modes:
                # The spec: a mode the client did not declare is invalid params.
                raise McpError(INVALID_PARAMS, f"Elicitation mode not supported: {str(mode)[:20]}")
        return await self._on_client_request(req, self.app.elicitation_handler, ElicitParams)

    async def _on_client_request(
        self,
        req: Request,
        handler: Callable[[RequestContext, P], Awaitable[Any]] | None,
        params_type: type[P],
    ) -> Any:
        """Answer a server-to-client request (sampling, elicitation), as a task if asked."""
        if self.role is not Role.CLIENT or handler is None:
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {req.method}")
        # A question of a child task (``ctx.children()``): asked of its parent's requestor.
        forward = self._forwarder(req)
        params = from_wire(req.params or {}, params_type)
        task: TaskMetadata | None = getattr(params, "task", None)
        meta: dict[str, Any] | None = getattr(params, "meta", None)
        if task is not None and hosts(self, req.method):

            async def work(actor: TaskActor) -> dict[str, Any]:
                if forward is not None:
                    return await forward(req.method, dict(req.params or {}), None)
                return wire_object(await handler(RequestContext(self, req.id, meta, actor), params))

            return await create_task(self, req, task, meta, work)
        if forward is not None:
            return await forward(req.method, dict(req.params or {}), None)
        return await handler(RequestContext(self, req.id, meta), params)

    async def create_message(self, params: CreateMessageParams) -> CreateMessageResult:
        """Send ``sampling/createMessage`` to the client (no task).

        Raises:
            RemoteError: The client refused or failed.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled`` to the client.
        """
        return await self.request("sampling/createMessage", params, CreateMessageResult)

    async def elicit(self, params: ElicitParams) -> ElicitResult:
        """Send ``elicitation/create`` to the client (no task).

        Raises:
            RemoteError: The client refused or failed.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled`` to the client.
        """
        return await self.request("elicitation/create", params, ElicitResult)
