"""Types of the tools feature: ``tools/list`` and ``tools/call``."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import attrs

from ._base import Meta, _extra, _meta
from ._content import ContentBlock, TextContent
from ._convert import KEEP, converter, from_wire
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




# --- hand-written fast paths for the hottest messages -------------------------------
#
# ``tools/call`` params in and its result out are structured/unstructured on
# every call. The generated cattrs hooks are kept for anything unusual; these
# take only the common shapes, whose output is exactly the generated hooks'
# (tests/peer/messages/test_fastpaths.py compares them).

_CALL_KEYS: Final = frozenset(("name", "arguments", "task", "_meta"))
_generic_call_params = converter.get_structure_hook(CallToolParams)
_generic_call_result = converter.get_unstructure_hook(CallToolResult)


#: ``tools/call`` params as ``(name, arguments, task, _meta)``.
_CallFields: TypeAlias = tuple[
    str, dict[str, Any] | None, TaskMetadata | None, dict[str, Any] | None
]


def _common_call_fields(data: Any) -> _CallFields | None:
    """``(name, arguments, task, _meta)`` of params in a common shape, else ``None``."""
    if type(data) is dict and _CALL_KEYS.issuperset(data):
        name = data.get("name")
        arguments = data.get("arguments")
        task = data.get("task")
        meta = data.get("_meta")
        if (
            type(name) is str
            and (arguments is None or type(arguments) is dict)
            and (meta is None or type(meta) is dict)
        ):
            if task is None:
                return name, arguments, None, meta
            if type(task) is dict and len(task) <= 1:
                ttl = task.get("ttl")
                if (ttl is None or type(ttl) is int) and (ttl is not None or not task):
                    return name, arguments, TaskMetadata(ttl), meta
    return None


def _structure_call_params(data: Any, cls: Any) -> CallToolParams:
    fields = _common_call_fields(data)
    if fields is not None:
        name, arguments, task, meta = fields
        return CallToolParams(name, arguments, task, meta=meta)
    result: CallToolParams = _generic_call_params(data, cls)
    return result


def call_params_fields(data: Any) -> _CallFields:
    """``tools/call`` params as ``(name, arguments, task, _meta)``, without a ``CallToolParams``.

    Raises:
        McpError: -32602 (Invalid params) when ``data`` does not fit.
    """
    fields = _common_call_fields(data)
    if fields is not None:
        return fields
    params = from_wire(data if data is not None else {}, CallToolParams)
    return params.name, params.arguments, params.task, params.meta


def text_result_wire(text: str) -> dict[str, Any]:
    """The wire JSON of a ``CallToolResult`` holding one plain text block.

    Exactly what the converter writes for ``CallToolResult([TextContent(text)])``.
    """
    return {"content": [{"text": text, "type": "text"}], "isError": False}


def _unstructure_call_result(obj: CallToolResult) -> dict[str, Any]:
    if obj.structured_content is None and obj.meta is None and not obj.extra:
        content = []
        for block in obj.content:
            if (
                type(block) is not TextContent
                or block.annotations is not None
                or block.meta is not None
                or block.extra
            ):
                break
            content.append({"text": block.text, "type": block.type})
        else:
            return {"content": content, "isError": obj.is_error}
    out: dict[str, Any] = _generic_call_result(obj)
    return out


converter.register_structure_hook(CallToolParams, _structure_call_params)
converter.register_unstructure_hook(CallToolResult, _unstructure_call_result)
