"""Typed metadata shared by listings and content: icons and annotations.

They travel as JSON objects; these classes are a typed way to write them
(``App.resource(..., icons=[Icon(...)])``). Anything a peer sends is kept
as it came (a ``dict``), with unknown members.
"""

from __future__ import annotations

from typing import Any

import attrs

from ._base import _extra


@attrs.frozen
class Icon:
    """An icon a client may show: ``src`` is an https or ``data:`` URI."""

    src: str
    mime_type: str | None = None
    sizes: list[str] | None = None
    theme: str | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class Annotations:
    """Hints on content and resources: who it is for, how important, when modified."""

    audience: list[str] | None = None
    priority: float | None = None
    last_modified: str | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ToolAnnotations:
    """Hints about a tool's behaviour (never to be trusted from an unknown server)."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None
    extra: dict[str, Any] = _extra()
