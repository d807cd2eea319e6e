"""Questions a handler asks the client, written once for both eras (used by ``RequestContext``).

The request's :class:`~._base.Dialect` decides how a question travels: in
2025-11-25 a real server-to-client request (``elicitation/create``,
``sampling/createMessage``, ``roots/list``), hosted by the client as a task when
it declared so; in 2026-07-28 a multi round-trip question of the request, or,
in a task, one its requestor pulls.
"""

from __future__ import annotations

from typing import Any, TypeVar

import trio

from .._messages import (
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    ListRootsResult,
    Root,
    to_wire,
)
from ._base import Asker, Question

T = TypeVar("T")


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
    """Ask one question (``elicitation/create``, ``sampling/createMessage``, ``roots/list``)
    as the request's era does (:meth:`Dialect.ask <._base.Dialect.ask>`).

    Raises:
        InputRequired: (2026-07-28 request) not answered yet.
        McpError: (2026-07-28) -32021 for an undeclared capability; -32602
            for a malformed answer.
        LocalUsageError: (2025-11-25) the client did not declare the capability.
        RemoteError, ConnectionClosed: (2025-11-25) as the request failed.
    """
    return await ctx.dialect.ask(ctx, method, params, result_type, key, as_task=as_task, ttl=ttl)


async def ask_all(
    ctx: Asker, questions: dict[str, Question]
) -> dict[str, ElicitResult | CreateMessageResult | list[Root]]:
    """Ask several questions at once: ``{key: ElicitParams | CreateMessageParams | None}``.

    ``None`` asks for the client's roots. In a 2026-07-28 request every
    unanswered question goes out in one ``input_required`` round; in a
    2025-11-25 session (and a task) they are asked concurrently.

    Returns:
        Key -> ``ElicitResult``, ``CreateMessageResult`` or a list of roots.

    Raises:
        InputRequired, McpError: (2026-07-28) as for ``RequestContext.elicit``.
        LocalUsageError, RemoteError: (2025-11-25) as for the single questions.

    Cancellation: (2025-11-25) withdraws the questions still open.
    """
    return await ctx.dialect.ask_many(ctx, questions)


async def ask_each(
    ctx: Asker, questions: dict[str, Question]
) -> dict[str, ElicitResult | CreateMessageResult | list[Root]]:
    """Ask several questions concurrently, each as a single question (:func:`ask_one`).

    Cancellation: withdraws the questions still open.
    """
    results: dict[str, ElicitResult | CreateMessageResult | list[Root]] = {}

    async def one(key: str, question: Question) -> None:
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


def wire_questions(
    questions: dict[str, Question],
) -> dict[str, tuple[str, dict[str, Any], type[Any]]]:
    """Several questions as ``key -> (method, params, result type)`` (one round of them)."""
    wanted: dict[str, tuple[str, dict[str, Any], type[Any]]] = {}
    for key, question in questions.items():
        if question is None:
            wanted[key] = ("roots/list", {}, ListRootsResult)
        elif isinstance(question, ElicitParams):
            wanted[key] = ("elicitation/create", to_wire(question), ElicitResult)
        else:
            wanted[key] = ("sampling/createMessage", to_wire(question), CreateMessageResult)
    return wanted
