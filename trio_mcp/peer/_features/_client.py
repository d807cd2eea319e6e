"""The client features: ``sampling/createMessage`` and ``elicitation/create``.

As a client, answers them with the App's handlers (as a task when the server
asks for one and this side declared it); as a server, sends them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from ..._errors import METHOD_NOT_FOUND, McpError
from .._messages import (
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
from ._base import AppView, PeerCore, Role
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
            caps["elicitation"] = {"form": {}}
            requests["elicitation"] = {"create": {}}
        if app.host_tasks and requests:
            caps["tasks"] = {"requests": requests}
        return caps

    async def _on_sampling(self, req: Request) -> Any:
        return await self._on_client_request(req, self.app.sampling_handler, CreateMessageParams)

    async def _on_elicitation(self, req: Request) -> Any:
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
        params = from_wire(req.params or {}, params_type)
        task: TaskMetadata | None = getattr(params, "task", None)
        meta: dict[str, Any] | None = getattr(params, "meta", None)
        if task is not None and hosts(self, req.method):

            async def work(actor: TaskActor) -> dict[str, Any]:
                return wire_object(await handler(RequestContext(self, req.id, meta, actor), params))

            return await create_task(self, req, task, meta, work)
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
