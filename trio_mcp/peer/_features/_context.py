"""What a handler sees: :class:`RequestContext`."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar, final

import trio

from ..._errors import ConnectionClosed, LocalUsageError
from ...auth import Identity
from .._messages import (
    ClientCapabilities,
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
    to_wire,
)
from .._tasks import TaskActor, TaskConnection
from ._base import Caller, Dialect, PeerCore
from ._children import DEFAULT_CANCEL_TIMEOUT, TaskChildren
from ._logging import Logging
from ._questions import ask_all, ask_one
from ._scopes import IDENTITY_INFO

log = logging.getLogger("trio_mcp.peer")
T = TypeVar("T")


@final
class RequestContext:
    """The context of one incoming request, passed to tools and handlers.

    A tool gets it by declaring a parameter annotated ``RequestContext``.
    When the request runs as a task, :attr:`task_id` is set, progress keeps
    flowing for the task's lifetime, and :meth:`elicit` / :meth:`sample` put
    the task in ``input_required`` and travel with the related-task ``_meta``.

    The same handler serves both eras. In a 2025-11-25 session, :meth:`elicit`,
    :meth:`sample`, :meth:`list_roots` and :meth:`ask_all` send requests to
    the client and wait. In a 2026-07-28 request they are multi round-trip
    questions: answered from the request's ``inputResponses`` (and the
    answers its ``requestState`` recorded), or the handler stops and the
    request ends with ``input_required``; the client's retry runs the handler
    again from the start. Ask the same questions in the same order (name
    them with ``key=`` when the order may vary) and keep side effects after
    the last question.

    Attributes:
        peer: The connection the request arrived on.
        request_id: The JSON-RPC id of the request.
        meta: The request's ``_meta`` (``None`` if absent).
        dialect: The request's era (:class:`~._base.Dialect`): a 2026-07-28 request's
            own (its per-request ``_meta`` and how it asks), else the connection's
            (2025-11-25: what its handshake fixed; the default).
        caller: Who sent the request when it came without a connection of its own
            (a 2026-07-28 Streamable HTTP POST); ``None``: :attr:`peer`'s connection.
    """

    def __init__(
        self,
        peer: PeerCore,
        request_id: str | int,
        meta: dict[str, Any] | None,
        task: TaskActor | None = None,
        *,
        dialect: Dialect | None = None,
        caller: Caller | None = None,
    ) -> None:
        self.peer = peer
        self.request_id = request_id
        self.meta = meta
        self.dialect: Dialect = peer.dialect if dialect is None else dialect
        self.caller = caller
        self._task = task
        self._progress_count = 0.0

    @property
    def identity(self) -> Identity | None:
        """The caller's verified identity (subject, client id, scopes, claims), if any.

        Set by a transport that verified a bearer token (Streamable HTTP: the
        token of this request, or of the session's latest request; WebSocket:
        of the handshake); ``None`` on stdio and without a verifier. In a
        task's work: the identity of the connection that created the task.
        """
        caller = self.caller
        found = self.peer.info_of(None) if caller is None else caller.info
        value = found.get(IDENTITY_INFO)
        return value if isinstance(value, Identity) else None

    @property
    def info(self) -> Mapping[str, Any]:
        """What the transport knows of the request's sender (its ``bus.info``, or the
        POST's): ``transport``, ``remote``, ``path``, ``session_id``, ``identity``..."""
        return self.peer.info_of(None) if self.caller is None else self.caller.info

    @property
    def task_id(self) -> str | None:
        """The id of the task this request runs as, or ``None``."""
        return self._task.task_id if self._task is not None else None

    @property
    def attempt(self) -> int:
        """Which run of its task this is: 1, then 2, 3... when a re-runnable task
        (``@app.tool(rerun=Rerun(...))``) runs again after its process stopped. With
        :attr:`task_id`, stable across attempts, the key to deduplicate side effects on.
        1 for a request that is not a task."""
        return self._task.record.attempt if self._task is not None else 1

    @property
    def era(self) -> str:
        """The protocol version of this request: ``"2026-07-28"`` or the session's 2025 one."""
        return self.dialect.protocol_version

    @property
    def client_capabilities(self) -> ClientCapabilities | None:
        """The capabilities the client declared: the request's own in 2026-07-28."""
        return self.dialect.client_capabilities

    @property
    def progress_token(self) -> str | int | None:
        """The request's ``progressToken``, if the requestor asked for progress."""
        token = (self.meta or {}).get("progressToken")
        return token if isinstance(token, str | int) and not isinstance(token, bool) else None

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the requestor gave a progress token (a task's
        to its requestor's open connection); values should increase. A 2026-07-28 task (no
        progress notifications there) shows it as its ``statusMessage`` instead: ``message``,
        else ``"progress/total"``. Cancellation: safe; the progress may or may not go.
        """
        if self._task is not None and not self._task.questions.notifies:
            return self._task.show_progress(progress_text(progress, total, message))
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
        key: str | None = None,
    ) -> ElicitResult:
        """Ask the user, through the client, to fill a form (``elicitation/create``).

        Args:
            message: What to show the user.
            requested_schema: A flat JSON Schema object of primitive properties.
            as_task: Ask the client to host the elicitation as a task (when it
                declared ``tasks.requests.elicitation.create``), then poll it.
            ttl: Requested TTL (ms) of that task.
            key: The question's key in a 2026-07-28 ``inputRequests``
                (``elicitation-<n>`` by default: the n-th question asked).

        Returns:
            The client's answer (``accept``/``decline``/``cancel``).

        Raises:
            InputRequired: (2026-07-28) Not answered yet: let it propagate.
            McpError: (2026-07-28) -32021 when the request did not declare
                elicitation; -32602 when its answer is malformed.
            LocalUsageError: The client did not declare elicitation.
            RemoteError: The client answered with a JSON-RPC error.
            ConnectionClosed: No connection to the requestor remained.

        Cancellation: stops waiting for the answer. Outside a task the
            request is withdrawn with ``notifications/cancelled``; inside a
            task a question already delivered may still be answered, and the
            answer is dropped. A task in ``input_required`` goes back to
            ``working`` when its last open question ends.
        """
        problem = check_form_schema(requested_schema)
        if problem is not None:
            raise LocalUsageError(f"not a form-mode schema: {problem}")
        params = {"mode": "form", "message": message, "requestedSchema": requested_schema}
        result: ElicitResult = await ask_one(
            self, "elicitation/create", params, ElicitResult, key, as_task=as_task, ttl=ttl
        )
        return result

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
        if self._task is not None and not self._task.questions.notifies:
            return  # the tasks extension has no log messages on tasks
        if self._task is not None:
            peer = self._task.registry.live_peer(self._task.record.owner, prefer=self.peer)
        if not isinstance(peer, Logging) or not peer.wants_log_for(level, self.dialect):
            return
        params = LoggingMessageParams(level=level, data=data, logger=logger)
        if self._task is not None:
            peer.notify_soon("notifications/message", params)
            return
        # Sent in line, so it precedes the request's response.
        with contextlib.suppress(ConnectionClosed):
            await peer.notify("notifications/message", params)

    async def list_roots(self, *, key: str | None = None) -> list[Root]:
        """Ask the client for its roots (``roots/list``).

        Args:
            key: The question's key in a 2026-07-28 ``inputRequests``.

        Raises:
            InputRequired, McpError: (2026-07-28) as for :meth:`elicit`.
            LocalUsageError: The client did not declare the roots capability.
            RemoteError: The client refused.

        Cancellation: sends ``notifications/cancelled`` for the request.
        """
        answer: ListRootsResult = await ask_one(self, "roots/list", {}, ListRootsResult, key)
        return answer.roots

    async def sample(
        self,
        messages: list[SamplingMessage] | str,
        *,
        max_tokens: int = 256,
        system_prompt: str | None = None,
        as_task: bool = True,
        ttl: int | None = None,
        key: str | None = None,
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
            key: The question's key in a 2026-07-28 ``inputRequests``.
            **extra: Further ``CreateMessageParams`` fields.

        Raises:
            InputRequired, McpError: (2026-07-28) as for :meth:`elicit`.
            LocalUsageError: The client did not declare sampling.
            RemoteError: The client answered with a JSON-RPC error.
            ConnectionClosed: No connection to the requestor remained.

        Cancellation: as for :meth:`elicit`.
        """
        if isinstance(messages, str):
            messages = [SamplingMessage("user", {"type": "text", "text": messages})]
        params = CreateMessageParams(
            messages=messages, max_tokens=max_tokens, system_prompt=system_prompt, **extra
        )
        sampled: CreateMessageResult = await ask_one(
            self, "sampling/createMessage", to_wire(params), CreateMessageResult, key,
            as_task=as_task, ttl=ttl,
        )
        return sampled

    async def start_task(self) -> None:
        """End a ``task_prelude`` tool's prelude: the ``CreateTaskResult`` goes now.

        From here its questions are the task's (``tasks/get`` shows them,
        ``tasks/update`` answers). Does nothing in any other case (2025-11-25,
        a task without a prelude, a plain call). Cancellation: safe.
        """
        if self._task is not None:
            self.dialect.start_task(self._task)
        await trio.lowlevel.checkpoint()

    def children(
        self,
        *,
        forward_questions: bool = True,
        cancel_timeout: float = DEFAULT_CANCEL_TIMEOUT,
        url: str | None = None,
    ) -> AbstractAsyncContextManager[TaskChildren]:
        """Open a scope for this task's children on other peers.

        ``async with ctx.children() as kids: handle = await kids.call_tool_task(peer,
        name, args)``: the tasks started through ``kids`` belong to this task. Leaving
        the scope by an exception (this task cancelled, its tool raising) sends
        ``tasks/cancel`` to every child still running and waits, at most
        ``cancel_timeout`` seconds (shielded), until each is seen terminal; leaving
        it normally waits for the children to end. A child's failure raises where
        its result is awaited. Tasks started outside such a scope stay detached.

        Args:
            forward_questions: Ask the children's questions (elicitation,
                sampling, roots) of this task's own requestor, in this task's era
                (the task goes ``input_required``), and send the answers down.
            cancel_timeout: Seconds to wait for the children's cancelled state.
            url: This side's endpoint URL, named to the children as their parent's
                (shown by their ``tasks/get`` and ``trio-mcp tasks tree``).

        Raises:
            LocalUsageError: The request is not running as a task.

        Cancellation: see above; the children are cancelled, the wait shielded.
        """
        if self._task is None:
            raise LocalUsageError("ctx.children() needs a tool running as a task")
        return TaskChildren.open(
            self, self._task, forward_questions=forward_questions,
            cancel_timeout=cancel_timeout, url=url,
        )

    async def ask_all(
        self, questions: dict[str, ElicitParams | CreateMessageParams | None]
    ) -> dict[str, ElicitResult | CreateMessageResult | list[Root]]:
        """Ask several questions at once (``None``: the roots); see :func:`~._questions.ask_all`."""
        return await ask_all(self, questions)


def progress_text(progress: float, total: float | None, message: str | None) -> str:
    """A progress report as a task's ``statusMessage`` (2026-07-28)."""
    if message:
        return message
    return f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
