"""Types of the prompts feature: ``prompts/list`` and ``prompts/get``."""

from __future__ import annotations

from typing import Any

import attrs

from ._base import Meta, _extra, _meta
from ._content import ContentBlock, TextContent


@attrs.frozen
class PromptArgument:
    """One argument a prompt template accepts."""

    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class Prompt:
    """A prompt as listed by ``prompts/list``."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgument] | None = None
    icons: list[dict[str, Any]] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ListPromptsResult:
    """Result of ``prompts/list``."""

    prompts: list[Prompt]
    next_cursor: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class GetPromptParams:
    """Parameters of ``prompts/get``: argument values are strings."""

    name: str
    arguments: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class PromptMessage:
    """One message of a prompt: a role and one content block."""

    role: str
    content: ContentBlock
    extra: dict[str, Any] = _extra()


@attrs.frozen
class GetPromptResult:
    """Result of ``prompts/get``."""

    messages: list[PromptMessage]
    description: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()

    @property
    def text(self) -> str:
        """The text blocks of every message, joined by newlines (a convenience)."""
        return "\n".join(
            m.content.text for m in self.messages if isinstance(m.content, TextContent)
        )
