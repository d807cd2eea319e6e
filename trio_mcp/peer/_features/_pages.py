"""Cursor pagination of the ``*/list`` requests (the cursor is an opaque offset)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypeVar

from ..._errors import INVALID_PARAMS, McpError
from .._messages import PaginatedParams, Request, from_wire

T = TypeVar("T")

#: Items per page of ``resources/list``, ``resources/templates/list`` and ``prompts/list``.
PAGE_SIZE: Final = 100


def page(req: Request, items: Sequence[T], size: int = PAGE_SIZE) -> tuple[list[T], str | None]:
    """The page of ``items`` the request's cursor asks for, and the next cursor.

    Raises:
        McpError: -32602 for a cursor this side did not hand out.
    """
    params = from_wire(req.params, PaginatedParams) if req.params else PaginatedParams()
    start = 0
    if params.cursor is not None:
        if not params.cursor.isdigit() or int(params.cursor) > len(items):
            raise McpError(INVALID_PARAMS, "Invalid cursor")
        start = int(params.cursor)
    end = start + size
    return list(items[start:end]), (str(end) if end < len(items) else None)
