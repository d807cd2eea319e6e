"""Tool registration: the decorator, schemas from signatures, argument checks.

A tool is an ``async def`` function. Its parameters become the input schema's
properties (``str`` -> string, ``int`` -> integer, ``float`` -> number,
``bool`` -> boolean, ``list`` -> array, ``dict`` -> object; a default makes a
property optional). A parameter annotated with :class:`~._context.ToolContext`
receives the call's context instead of an argument.

What a tool returns becomes a ``CallToolResult``: a ``str`` is one text block,
a ``dict`` is ``structuredContent`` (plus its JSON as text), a list of content
blocks is the content, and a ``CallToolResult`` is sent as it is.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any, Final, final

import attrs

from .._messages import (
    CallToolResult,
    ContentBlock,
    OtherContent,
    TextContent,
    Tool,
    ToolExecution,
)

ToolFunction = Callable[..., Awaitable[Any]]

_JSON_TYPES: Final[dict[Any, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}
_TASK_SUPPORT: Final = ("forbidden", "optional", "required")


def _json_type(annotation: Any) -> str | None:
    origin = typing.get_origin(annotation) or annotation
    if origin in _JSON_TYPES:
        return _JSON_TYPES[origin]
    if origin in (typing.Union, types.UnionType):
        names = {_json_type(a) for a in typing.get_args(annotation) if a is not type(None)}
        if len(names) == 1:
            return names.pop()
    return None


@final
@attrs.frozen
class ToolSpec:
    """A registered tool: its listing and the function that runs it."""

    tool: Tool
    fn: ToolFunction
    context_param: str | None
    params: tuple[str, ...]


def _schema_from_signature(
    fn: ToolFunction, context_type: type[Any]
) -> tuple[dict[str, Any], str | None, tuple[str, ...]]:
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    context_param: str | None = None
    params: list[str] = []
    for name, param in sig.parameters.items():
        annotation = hints.get(name, Any)
        if annotation is context_type:
            context_param = name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        params.append(name)
        prop: dict[str, Any] = {}
        json_type = _json_type(annotation)
        if json_type is not None:
            prop["type"] = json_type
        properties[name] = prop
        if param.default is inspect.Parameter.empty:
            required.append(name)
        elif param.default is not None and isinstance(param.default, str | int | float | bool):
            prop["default"] = param.default
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema, context_param, tuple(params)


def make_tool_spec(
    fn: ToolFunction,
    *,
    context_type: type[Any],
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
    task_support: str = "forbidden",
) -> ToolSpec:
    """Build the :class:`ToolSpec` of ``fn`` (see :meth:`trio_mcp.App.tool`).

    Raises:
        TypeError: ``fn`` is not a coroutine function.
        ValueError: ``task_support`` is not forbidden/optional/required.
    """
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"tool {fn!r} must be an async function")
    if task_support not in _TASK_SUPPORT:
        raise ValueError(f"task_support must be one of {_TASK_SUPPORT}, not {task_support!r}")
    schema, context_param, params = _schema_from_signature(fn, context_type)
    if input_schema is not None:
        schema = input_schema
    doc = inspect.getdoc(fn)
    tool = Tool(
        name=name or fn.__name__,
        input_schema=schema,
        title=title,
        description=description if description is not None else doc,
        output_schema=output_schema,
        annotations=annotations,
        # Absent means "forbidden"; say it explicitly only when it is not.
        execution=None if task_support == "forbidden" else ToolExecution(task_support),
    )
    return ToolSpec(tool, fn, context_param, params)


_CHECKS: Final[dict[str, Callable[[Any], bool]]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def check_arguments(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Check arguments against the top level of an input schema.

    Checks ``required``, each property's ``type`` (a name or a list of
    names) and ``enum``, and ``additionalProperties: false``. Nested schemas
    are the tool's to check.

    Returns:
        ``None`` when the arguments fit, else a one-line reason.
    """
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    for name in schema.get("required", ()):
        if name not in arguments:
            return f"missing required argument {name!r}"
    for name, value in arguments.items():
        prop = properties.get(name)
        if prop is None:
            if schema.get("additionalProperties") is False:
                return f"unexpected argument {name!r}"
            continue
        if not isinstance(prop, dict):
            continue
        wanted = prop.get("type")
        names = [wanted] if isinstance(wanted, str) else wanted if isinstance(wanted, list) else []
        if names and not any(_CHECKS.get(n, lambda _: True)(value) for n in names):
            return f"argument {name!r} must be of type {' or '.join(map(str, names))}"
        enum = prop.get("enum")
        if isinstance(enum, list) and value not in enum:
            return f"argument {name!r} must be one of {enum}"
    return None


def to_call_tool_result(value: Any) -> CallToolResult:
    """Turn what a tool function returned into a ``CallToolResult``."""
    if isinstance(value, CallToolResult):
        return value
    if value is None:
        return CallToolResult(content=[])
    if isinstance(value, str):
        return CallToolResult(content=[TextContent(value)])
    if isinstance(value, dict):
        return CallToolResult(
            content=[TextContent(json.dumps(value, ensure_ascii=False))],
            structured_content=value,
        )
    if isinstance(value, TextContent | OtherContent) or attrs.has(type(value)):
        return CallToolResult(content=[value])
    if isinstance(value, list):
        blocks: list[ContentBlock] = []
        for item in value:
            blocks.append(TextContent(item) if isinstance(item, str) else item)
        return CallToolResult(content=blocks)
    return CallToolResult(content=[TextContent(str(value))])
