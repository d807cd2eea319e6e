"""Types of the client features: ``sampling/createMessage`` and ``elicitation/create``."""

from __future__ import annotations

from typing import Any

import attrs

from ._base import Meta, _extra, _meta
from ._convert import converter
from ._tasks import TaskMetadata


@attrs.frozen
class SamplingMessage:
    """One message of a sampling conversation; ``content`` is kept as wire JSON."""

    role: str
    content: dict[str, Any] | list[dict[str, Any]]
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


def _structure_sampling_content(value: Any, _: Any) -> Any:
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return value
    raise TypeError("sampling content must be an object or an array of objects")


converter.register_structure_hook(
    dict[str, Any] | list[dict[str, Any]], _structure_sampling_content
)


@attrs.frozen
class CreateMessageParams:
    """Parameters of ``sampling/createMessage``."""

    messages: list[SamplingMessage]
    max_tokens: int
    system_prompt: str | None = None
    model_preferences: dict[str, Any] | None = None
    include_context: str | None = None
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    metadata: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    task: TaskMetadata | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CreateMessageResult:
    """Result of ``sampling/createMessage``."""

    role: str
    content: dict[str, Any] | list[dict[str, Any]]
    model: str
    stop_reason: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()

    @property
    def text(self) -> str:
        """The text of the sampled message's text blocks."""
        blocks = self.content if isinstance(self.content, list) else [self.content]
        return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


@attrs.frozen
class ElicitParams:
    """Parameters of ``elicitation/create`` (form mode, or url mode)."""

    message: str
    requested_schema: dict[str, Any] | None = None
    mode: str | None = None
    url: str | None = None
    elicitation_id: str | None = None
    task: TaskMetadata | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ElicitResult:
    """Result of ``elicitation/create``: ``accept``, ``decline`` or ``cancel``."""

    action: str
    content: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


