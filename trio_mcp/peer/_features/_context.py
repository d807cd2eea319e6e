"""What a handler sees: :class:`RequestContext`."""

from __future__ import annotations

import contextlib
import logging
import secrets
from typing import Any, TypeVar, final

from ..._errors import ConnectionClosed, LocalUsageError
from .._messages import (
    CreateMessageParams,
    CreateMessageResult,
    ElicitationCompleteParams,
    ElicitParams,
    ElicitResult,
    ListRootsResult,
    LoggingMessageParams,
    ProgressParams,
    Root,
    SamplingMessage,
    check_form_schema,
    converter,
    related_task_meta,
    task_capability,
    to_wire,
)
from .._tasks import TaskActor, TaskConnection, TaskHandle
from ._base import PeerCore
from ._logging import Logging

log = logging.getLogger("trio_mcp.peer")
T = TypeVar("T")


@final
class RequestContext:
    """The context of one incoming request, passed to tools and handlers.

    A tool gets it by declaring a parameter annotated ``RequestContext``.
    When the request runs as a task, :attr:`task_id` is set, progress keeps
    flowing for the task's lifetime, and :meth:`elicit` / :meth:`sample` put
    the task in ``input_required`` and travel with the related-task ``_meta``.

    Attributes:
        peer: The connection the request arrived on.
        request_id: The JSON-RPC id of the request.
        meta: The request's ``_meta`` (``None`` if absent).
    """

    def __init__(
        self,
        peer: PeerCore,
        request_id: str | int,
        meta: dict[str, Any] | None,
        task: TaskActor | None = None,
    ) -> None:
        self.peer = peer
        self.request_id = request_id
        self.meta = meta
        self._task = task
        self._progress_count = 0.0

    @property
    def task_id(self) -> str | None:
        """The id of the task this request runs as, or ``None``."""
        return self._task.task_id if self._task is not None else None

    @property
    def progress_token(self) -> str | int | None:
        """The request's ``progressToken``, if the requestor asked for progress."""
        token = (self.meta or {}).get("progressToken")
        return token if isinstance(token, str | int) and not isinstance(token, bool) else None

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the requestor gave a progress token.

        Does nothing otherwise. For a task, the notification goes to the
        requestor's open connection (the task may outlive the request's).
        Progress values should increase; this is the caller's duty.

        Cancellation: safe to cancel; the notification may or may not go.
        """
        token = self.progress_token
        if token is None:
            return
        params = to_wire(ProgressParams(token, progress, total, message))
        if self._task is None:
            # Sent in line, so it always precedes the request's response.
            with contextlib.suppress(ConnectionClosed):
                await self.peer.notify("notifications/progress", params)
            return
        params["_meta"] = related_task_meta(self._task.task_id)
        peer = self._task.registry.live_peer(self._task.record.owner, prefer=self.peer)
        if peer is not None:
            peer.notify_soon("notifications/progress", params)

    async def _ask(
        self, method: str, params: dict[str, Any]
    ) -> tuple[dict[str, Any], TaskConnection | None]:
        if self._task is not None:
            return await self._task.ask(method, params)
        return await self.peer.request_raw(method, params), self.peer

    async def elicit(
        self,
        message: str,
        requested_schema: dict[str, Any],
        *,
        as_task: bool = False,
        ttl: int | None = None,
    ) -> ElicitResult:
        """Ask the user, through the client, to fill a form (``elicitation/create``).

        Args:
            message: What to show the user.
            requested_schema: A flat JSON Schema object of primitive properties.
            as_task: Ask the client to host the elicitation as a task (when it
                declared ``tasks.requests.elicitation.create``), then poll it.
            ttl: Requested TTL (ms) of that task.

        Returns:
            The client's answer (``accept``/``decline``/``cancel``).

        Raises:
            LocalUsageError: The client did not declare elicitation.
            RemoteError: The client answered with a JSON-RPC error.
            ConnectionClosed: No connection to the requestor remained.

        Cancellation: stops waiting for the answer. Outside a task the
            request is withdrawn with ``notifications/cancelled``; inside a
            task a question already delivered may still be answered, and the
            answer is dropped. A task in ``input_required`` goes back to
            ``working`` when its last open question ends.
        """
        caps = self.peer.remote_client_capabilities
        if caps is None or caps.elicitation is None:
            raise LocalUsageError("the client did not declare the elicitation capability")
        if caps.elicitation and "form" not in caps.elicitation:
            raise LocalUsageError("the client did not declare form-mode elicitation")
        problem = check_form_schema(requested_schema)
        if problem is not None:
            raise LocalUsageError(f"not a form-mode schema: {problem}")
        params = ElicitParams(message=message, requested_schema=requested_schema, mode="form")
        return await self._request_maybe_task(
            "elicitation/create", to_wire(params), ElicitResult, as_task, ttl
        )

    async def elicit_url(
        self, message: str, url: str, *, elicitation_id: str | None = None
    ) -> tuple[str, ElicitResult]:
        """Ask the user, through the client, to open ``url`` (URL-mode ``elicitation/create``).

        ``accept`` means the user agreed to go; the interaction itself happens
        out of band. When it is done, tell the client with
        :meth:`complete_elicitation`.

        Args:
            message: Why the user should open the URL.
            url: The URL (no credentials or personal data in it).
            elicitation_id: The id to use; a random one by default.

        Returns:
            The elicitation id and the client's answer.

        Raises:
            LocalUsageError: The client did not declare URL-mode elicitation.
            RemoteError: The client answered with a JSON-RPC error.

        Cancellation: sends ``notifications/cancelled`` for the request.
        """
        caps = self.peer.remote_client_capabilities
        if caps is None or not isinstance(caps.elicitation, dict) or "url" not in caps.elicitation:
            raise LocalUsageError("the client did not declare URL-mode elicitation")
        elicitation_id = elicitation_id or secrets.token_urlsafe(16)
        params = ElicitParams(message=message, mode="url", url=url, elicitation_id=elicitation_id)
        raw, _ = await self._ask("elicitation/create", to_wire(params))
        return elicitation_id, converter.structure(raw, ElicitResult)

    async def complete_elicitation(self, elicitation_id: str) -> None:
        """Send ``notifications/elicitation/complete`` to the client this request came from.

        Cancellation: the notification may or may not have been sent.
        """
        with contextlib.suppress(ConnectionClosed):
            await self.peer.notify(
                "notifications/elicitation/complete", ElicitationCompleteParams(elicitation_id)
            )

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> None:
        """Send ``notifications/message`` to the client if its level lets ``level`` through.

        Args:
            level: An RFC 5424 level: debug, info, notice, warning, error,
                critical, alert, emergency.
            data: Any JSON value.
            logger: The logger's name, if any.

        Raises:
            ValueError: ``level`` is not a level name.

        Cancellation: safe to cancel; the message may or may not go.
        """
        peer: object = self.peer
        if self._task is not None:
            peer = self._task.registry.live_peer(self._task.record.owner, prefer=self.peer)
        if not isinstance(peer, Logging) or not peer.wants_log(level):
            return
        params = LoggingMessageParams(level=level, data=data, logger=logger)
        if self._task is not None:
            peer.notify_soon("notifications/message", params)
            return
        # Sent in line, so it precedes the request's response.
        with contextlib.suppress(ConnectionClosed):
            await peer.notify("notifications/message", params)

    async def list_roots(self) -> list[Root]:
        """Ask the client for its roots (``roots/list``).

        Raises:
            LocalUsageError: The client did not declare the roots capability.
            RemoteError: The client refused.

        Cancellation: sends ``notifications/cancelled`` for the request.
        """
        caps = self.peer.remote_client_capabilities
        if caps is None or caps.roots is None:
            raise LocalUsageError("the client did not declare the roots capability")
        raw, _ = await self._ask("roots/list", {})
        result: ListRootsResult = converter.structure(raw, ListRootsResult)
        return result.roots

    async def sample(
        self,
        messages: list[SamplingMessage] | str,
        *,
        max_tokens: int = 256,
        system_prompt: str | None = None,
        as_task: bool = True,
        ttl: int | None = None,
        **extra: Any,
    ) -> CreateMessageResult:
        """Ask the client's model for a message (``sampling/createMessage``).

        Args:
            messages: The conversation, or one user prompt as a string.
            max_tokens: The most tokens to sample.
            system_prompt: Optional system prompt.
            as_task: Host the sampling as a task on the client when it
                declared ``tasks.requests.sampling.createMessage`` (default),
                then poll that task for the outcome.
            ttl: Requested TTL (ms) of that task.
            **extra: Further ``CreateMessageParams`` fields.

        Raises:
            LocalUsageError: The client did not declare sampling.
            RemoteError: The client answered with a JSON-RPC error.
            ConnectionClosed: No connection to the requestor remained.

        Cancellation: as for :meth:`elicit`.
        """
        caps = self.peer.remote_client_capabilities
        if caps is None or caps.sampling is None:
            raise LocalUsageError("the client did not declare the sampling capability")
        if isinstance(messages, str):
            messages = [SamplingMessage("user", {"type": "text", "text": messages})]
        params = CreateMessageParams(
            messages=messages, max_tokens=max_tokens, system_prompt=system_prompt, **extra
        )
        return await self._request_maybe_task(
            "sampling/createMessage", to_wire(params), CreateMessageResult, as_task, ttl
        )

    async def _request_maybe_task(
        self,
        method: str,
        params: dict[str, Any],
        result_type: type[T],
        as_task: bool,
        ttl: int | None,
    ) -> T:
        use_task = as_task and task_capability(self.peer.remote_client_capabilities, method)
        if use_task:
            params["task"] = {} if ttl is None else {"ttl": ttl}
        raw, via = await self._ask(method, params)
        if use_task and isinstance(raw.get("task"), dict):
            # The answer came over a connection of ours (a peer), maybe not
            # the one the request arrived on: follow the task there.
            conn = via if isinstance(via, PeerCore) else self.peer
            handle = TaskHandle.from_create_result(conn, raw, result_type)
            log.debug("%s hosted by the client as task %s", method, handle.task_id)
            await handle.wait()
            return await handle.result()
        result: T = converter.structure(raw, result_type)
        return result

