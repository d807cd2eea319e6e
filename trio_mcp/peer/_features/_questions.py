"""Questions a handler asks the client, written once for both eras (used by ``RequestContext``).

2025-11-25: real server-to-client requests (``elicitation/create``,
``sampling/createMessage``, ``roots/list``), hosted by the client as tasks
when it declared so. 2026-07-28: what the request's :class:`~._dialect.Dialect`
asks (multi round-trip questions; a task's are pulled by its requestor).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, TypeVar

import trio

from ..._errors import LocalUsageError
from .._messages import (
    CAPABILITY_OF,
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    ListRootsResult,
    Root,
    converter,
    task_capability,
    to_wire,
)
from .._tasks import TaskActor, TaskHandle
from ._base import PeerCore
from ._dialect import Dialect, dialect_of

log = logging.getLogger("trio_mcp.peer")
T = TypeVar("T")


class Asker(Protocol):
    """What these functions need of a ``RequestContext``."""

    _task: TaskActor | None
    dialect: Dialect | None

    @property
    def peer(self) -> PeerCore:
        """The connection the request came on."""
        ...

    async def _ask(
        self, method: str, params: dict[str, Any]
    ) -> tuple[dict[str, Any], Any]: ...

    async def list_roots(self, *, key: str | None = None) -> list[Root]:
        """Ask for the roots."""
        ...

    async def elicit(
        self, message: str, requested_schema: dict[str, Any], *, as_task: bool = False,
        ttl: int | None = None, key: str | None = None,
    ) -> ElicitResult:
        """Ask the user a form question."""
        ...


async def ask_all(
    ctx: Asker, questions: dict[str, ElicitParams | CreateMessageParams | None]
) -> dict[str, ElicitResult | CreateMessageResult | list[Root]]:
    """Ask several questions at once: ``{key: ElicitParams | CreateMessageParams | None}``.

    ``None`` asks for the client's roots. In 2026-07-28 every unanswered
    question goes out in one ``input_required`` round; in a 2025-11-25
    session the requests are sent concurrently.

    Returns:
        Key -> ``ElicitResult``, ``CreateMessageResult`` or a list of roots.

    Raises:
        InputRequired, McpError: (2026-07-28) as for ``RequestContext.elicit``.
        LocalUsageError, RemoteError: (2025-11-25) as for the single questions.

    Cancellation: (2025-11-25) withdraws the questions still open.
    """
    pulled = ctx._task.pulled if ctx._task is not None else None
    dialect = ctx.dialect
    if pulled is None and dialect is not None:
        wanted: dict[str, tuple[str, dict[str, Any], type[Any]]] = {}
        for key, question in questions.items():
            if question is None:
                wanted[key] = ("roots/list", {}, ListRootsResult)
            elif isinstance(question, ElicitParams):
                wanted[key] = ("elicitation/create", to_wire(question), ElicitResult)
            else:
                wanted[key] = ("sampling/createMessage", to_wire(question), CreateMessageResult)
        answers = dialect.ask_many(wanted)
        return {
            k: v.roots if isinstance(v, ListRootsResult) else v for k, v in answers.items()
        }
    results: dict[str, ElicitResult | CreateMessageResult | list[Root]] = {}

    async def one(key: str, question: ElicitParams | CreateMessageParams | None) -> None:
        # Each as a single question (a task's are posted for tasks/get together).
        if question is None:
            roots = await ask_one(ctx, "roots/list", {}, ListRootsResult, key)
            results[key] = roots.roots
        elif isinstance(question, ElicitParams):
            params = {"mode": "form", "message": question.message,
                      "requestedSchema": question.requested_schema or {}}
            results[key] = await ask_one(ctx, "elicitation/create", params, ElicitResult, key)
        else:
            results[key] = await ask_one(
                ctx, "sampling/createMessage", to_wire(question), CreateMessageResult, key
            )

    async with trio.open_nursery() as nursery:
        for key, question in questions.items():
            nursery.start_soon(one, key, question)
    return {key: results[key] for key in questions}


async def ask_one(
    ctx: Asker,
    method: str,
    params: dict[str, Any],
    result_type: type[T],
    key: str | None,
    *,
    as_task: bool = False,
    ttl: int | None = None,
) -> T:
    """Ask one question (``elicitation/create``, ``sampling/createMessage``, ``roots/list``).

    * In a 2026-07-28 task: posted for ``tasks/get`` and answered by
      ``tasks/update`` (its requestor pulls it);
    * in a 2026-07-28 request: a multi round-trip question (the request's
      :class:`~._dialect.Dialect` answers it or stops the handler);
    * in 2025-11-25: a request to the client (as a task it hosts, if asked).

    Raises:
        InputRequired: (2026-07-28 request) not answered yet.
        McpError: (2026-07-28) -32021 for an undeclared capability; -32602
            for a malformed answer.
        LocalUsageError: (2025-11-25) the client did not declare the capability.
        RemoteError, ConnectionClosed: (2025-11-25) as the request failed.
    """
    task = ctx._task
    pulled = task.pulled if task is not None else None
    if task is not None and pulled is not None:
        asked_by = dialect_of(pulled)
        asked_by.check_question(method, params)
        raw, _ = await task.ask(method, params, key)
        return asked_by.structure_answer(key or method, raw, result_type)
    dialect = ctx.dialect
    if dialect is not None:
        return dialect.ask(method, params, result_type, key)
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
    return await request_maybe_task(ctx, method, params, result_type, as_task, ttl)


async def request_maybe_task(
    ctx: Asker,
    method: str,
    params: dict[str, Any],
    result_type: type[T],
    as_task: bool,
    ttl: int | None,
) -> T:
    """Send a question to the client, as a task it hosts when asked and declared."""
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
