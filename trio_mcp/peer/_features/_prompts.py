"""The prompts feature: ``prompts/list`` and ``prompts/get``.

As a server it lists the App's prompts and renders one with the given
arguments (a missing required argument is -32602); as a client it calls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._errors import INVALID_PARAMS, METHOD_NOT_FOUND, McpError
from .._messages import (
    GetPromptParams,
    GetPromptResult,
    ListPromptsResult,
    PaginatedParams,
    Prompt,
    Request,
    from_wire,
)
from .._signatures._signature import call_with
from ._base import AppView, PeerCore, Role
from ._context import RequestContext
from ._pages import page
from ._promptspec import PromptSpec, missing_arguments, to_prompt_result
from ._scopes import check_scopes, rule, visible


def _name(spec: PromptSpec) -> str:
    return spec.prompt.name


class Prompts(PeerCore):
    """Serve the App's prompts and get the other side's."""

    def install(self) -> None:
        self.session.request_handlers["prompts/list"] = self._on_prompts_list
        self.session.request_handlers["prompts/get"] = self._on_prompts_get

    @classmethod
    def declare_server(cls, app: AppView, declared: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"prompts": {"listChanged": True}} if app.prompts else {}

    # --- server side -------------------------------------------------------------------

    def _serving_prompts(self, req: Request) -> None:
        if self.role is not Role.SERVER or not self.app.prompts:
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {req.method}")

    async def _on_prompts_list(self, req: Request) -> ListPromptsResult:
        self._serving_prompts(req)
        specs: list[PromptSpec] = visible(self, req, "prompt", self.app.prompts.values(), _name)
        items, cursor = page(req, specs)
        return ListPromptsResult(prompts=[s.prompt for s in items], next_cursor=cursor)

    async def _on_prompts_get(self, req: Request) -> GetPromptResult:
        self._serving_prompts(req)
        params = from_wire(req.params or {}, GetPromptParams)
        spec: PromptSpec | None = self.app.prompts.get(params.name)
        if spec is None:
            raise McpError(INVALID_PARAMS, f"Unknown prompt: {params.name[:100]}")
        if self.app.scope_rules:
            check_scopes(self, req, rule(self.app, "prompt", params.name),
                         f"prompt {params.name[:100]!r}")
        arguments = params.arguments or {}
        bad = [k for k, v in arguments.items() if not isinstance(v, str)]
        if bad:
            raise McpError(INVALID_PARAMS, f"Prompt arguments must be strings: {bad[:5]}")
        missing = missing_arguments(spec, arguments)
        if missing:
            raise McpError(
                INVALID_PARAMS, f"Missing required arguments for prompt {spec.prompt.name}: "
                + ", ".join(missing)
            )
        ctx = RequestContext(
            self, req.id, params.meta, dialect=self.dialect_of(req), caller=req.caller
        )
        value = await call_with(spec.fn, spec.sig, arguments, ctx)
        return to_prompt_result(value, spec.prompt.description)

    # --- client side -------------------------------------------------------------------

    async def list_prompts(self, cursor: str | None = None) -> ListPromptsResult:
        """One page of the server's prompts (``prompts/list``).

        Raises:
            RemoteError: The server refused (-32601 without prompts, -32602
                for a bad cursor).
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled``; nothing else changes.
        """
        params = PaginatedParams(cursor) if cursor else None
        return await self.request("prompts/list", params, ListPromptsResult)

    async def list_all_prompts(self) -> list[Prompt]:
        """Every prompt of the server, following ``nextCursor`` to the end.

        Cancellation: as for :meth:`list_prompts`.
        """
        out: list[Prompt] = []
        cursor: str | None = None
        while True:
            result = await self.list_prompts(cursor)
            out.extend(result.prompts)
            if not result.next_cursor:
                return out
            cursor = result.next_cursor

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> GetPromptResult:
        """Render one of the server's prompts (``prompts/get``).

        Args:
            name: The prompt.
            arguments: Its arguments (strings).

        Raises:
            RemoteError: -32602 for an unknown prompt or a missing required
                argument.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled``; nothing else changes.
        """
        params = GetPromptParams(name=name, arguments=dict(arguments) if arguments else None)
        return await self.request("prompts/get", params, GetPromptResult)
