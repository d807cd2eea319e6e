"""The completion utility: ``completion/complete``.

As a server it asks the App's completer registered for the prompt argument
or resource-template variable (:meth:`trio_mcp.App.completion`), passing the
partial value and the arguments already resolved (``context.arguments``),
and answers at most 100 values with ``total`` and ``hasMore``. As a client
it calls it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._errors import INVALID_PARAMS, METHOD_NOT_FOUND, McpError
from .._messages import (
    MAX_COMPLETION_VALUES,
    CompleteParams,
    CompleteResult,
    Completion,
    CompletionArgument,
    CompletionContext,
    CompletionReference,
    PromptReference,
    Request,
    from_wire,
)
from ._base import AppView, PeerCore, Role


def to_completion(value: Any) -> Completion:
    """Turn what a completer returned (a list of strings or a ``Completion``) into the
    answer: the first 100 values, ``total``, and ``hasMore`` when some were cut.

    Raises:
        TypeError: The value is neither.
    """
    if isinstance(value, Completion):
        values = list(value.values)
        if len(values) <= MAX_COMPLETION_VALUES:
            return value
        total = value.total if value.total is not None else len(values)
        return Completion(values=values[:MAX_COMPLETION_VALUES], total=total, has_more=True)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise TypeError("a completer returns a list of strings or a Completion")
    values = list(value)
    return Completion(
        values=values[:MAX_COMPLETION_VALUES],
        total=len(values),
        has_more=len(values) > MAX_COMPLETION_VALUES,
    )


class Completions(PeerCore):
    """Complete prompt arguments and template variables for the other side."""

    def install(self) -> None:
        self.session.request_handlers["completion/complete"] = self._on_completion_complete

    @classmethod
    def declare_server(cls, app: AppView, declared: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"completions": {}} if app.completers else {}

    async def _on_completion_complete(self, req: Request) -> CompleteResult:
        if self.role is not Role.SERVER or not self.app.completers:
            raise McpError(METHOD_NOT_FOUND, "Method not found: completion/complete")
        params = from_wire(req.params or {}, CompleteParams)
        ref = params.ref
        if isinstance(ref, PromptReference):
            if ref.name not in self.app.prompts:
                raise McpError(INVALID_PARAMS, f"Unknown prompt: {ref.name[:100]}")
            key = ("ref/prompt", ref.name, params.argument.name)
        else:
            if ref.uri not in self.app.resource_templates:
                raise McpError(INVALID_PARAMS, f"Unknown resource template: {ref.uri[:200]}")
            key = ("ref/resource", ref.uri, params.argument.name)
        completer = self.app.completers.get(key)
        if completer is None:
            return CompleteResult(Completion(values=[], total=0, has_more=False))
        context = dict((params.context.arguments if params.context else None) or {})
        value = await completer(params.argument.value, context)
        return CompleteResult(to_completion(value))

    async def complete(
        self,
        ref: CompletionReference,
        argument: str,
        value: str,
        *,
        context: Mapping[str, str] | None = None,
    ) -> Completion:
        """Ask the server for completions of an argument (``completion/complete``).

        Args:
            ref: A :class:`~trio_mcp.PromptReference` (prompt argument) or
                :class:`~trio_mcp.ResourceTemplateReference` (template variable).
            argument: The argument's name.
            value: Its partial value.
            context: Arguments already resolved.

        Returns:
            The values (at most 100), ``total`` and ``has_more``.

        Raises:
            RemoteError: -32602 for an unknown prompt or template, -32601 if
                the server does not complete.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled``; nothing else changes.
        """
        params = CompleteParams(
            ref=ref,
            argument=CompletionArgument(argument, value),
            context=CompletionContext(dict(context)) if context is not None else None,
        )
        return (await self.request("completion/complete", params, CompleteResult)).completion

