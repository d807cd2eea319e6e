"""Types of the roots feature (``roots/list``) and the URL-mode elicitation notice."""

from __future__ import annotations

from typing import Any

import attrs

from ._base import Meta, _extra, _meta


@attrs.frozen
class Root:
    """A root the client exposes to the server (a ``file://`` URI for now)."""

    uri: str
    name: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ListRootsResult:
    """Result of ``roots/list``."""

    roots: list[Root]
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()
