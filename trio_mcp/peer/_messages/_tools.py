"""Types of the tools feature: ``tools/list`` and ``tools/call``."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import attrs

from ._base import Meta, _extra, _meta
from ._content import ContentBlock, TextContent
from ._convert import KEEP
from ._tasks import TaskMetadata

TaskSupport: TypeAlias = Literal["forbidden", "optional", "required"]


@attrs.frozen
class ToolExecution:
    """Execution properties of a tool (``execution`` in ``tools/list``)."""

    task_support: str | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class Tool:
    """A tool as listed by ``tools/list``."""

    name: str
    input_schema: dict[str, Any]
    title: str | None = None
    description: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    execution: ToolExecution | None = None
    icons: list[dict[str, Any]] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()

    @property
    def task_support(self) -> str:
        """The tool's ``execution.taskSupport``, ``"forbidden"`` when absent."""
        if self.execution is None or self.execution.task_support is None:
            return "forbidden"
        return self.execution.task_support


@attrs.frozen
class ListToolsResult:
    """Result of ``tools/list``."""

    tools: list[Tool]
    next_cursor: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CallToolParams:
    """Parameters of ``tools/call``."""

    name: str
    arguments: dict[str, Any] | None = None
    task: TaskMetadata | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CallToolResult:
    """Result of ``tools/call`` (and of ``tasks/result`` for a tool task)."""

    content: list[ContentBlock] = attrs.field(factory=list, metadata={KEEP: True})
    structured_content: dict[str, Any] | None = None
    is_error: bool = attrs.field(default=False, metadata={KEEP: True})
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()

    @property
    def text(self) -> str:
        """All text blocks of ``content`` joined by newlines (a convenience)."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextContent))


