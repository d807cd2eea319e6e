"""Tool registration: the decorator, schemas from signatures, argument checks.

A tool is an ``async def`` or a plain ``def`` function. Its parameters become
the input schema's properties, with full JSON Schemas derived from the type
hints and descriptions from the docstring's ``Args:`` section (see
:mod:`._toolsig`); a default makes a property optional. A parameter annotated
with :class:`~trio_mcp.peer._features.RequestContext` receives the call's context instead of
an argument. Arguments arrive structured into the annotated types (an attrs
class, dataclass, ``TypedDict`` or ``Enum`` parameter gets that type, not a
dict).

A plain ``def`` tool runs in a worker thread (:func:`trio.to_thread.run_sync`
with ``abandon_on_cancel=True``, at most :data:`SYNC_TOOL_THREADS` at once).
Python cannot interrupt a thread: when the call is cancelled (the client's
``notifications/cancelled``, ``tasks/cancel``, the connection closing) the
call ends at once, as an async tool's would, but the function keeps running in
its thread to its end and what it returns or raises is dropped. A sync tool
can stop early by calling :func:`trio.from_thread.check_cancelled`, and can
reach Trio (e.g. ``ctx.report_progress``) with :func:`trio.from_thread.run`.
A plain ``def`` tool registered with ``inline=True`` runs on the event loop
instead, in the task that read the request: no thread and no Trio task, the
cheapest call there is, for quick functions that never block (while it runs,
nothing else in the process does).

What a tool returns becomes a ``CallToolResult``. A structured return type
(an attrs class, dataclass, ``TypedDict``, ``dict``, ``int``, ``list[X]``, ...)
gives the tool an ``outputSchema`` and its value is sent as
``structuredContent`` (wrapped as ``{"result": value}`` when not an object),
plus its JSON as text. Otherwise a ``str`` is one text block, a ``dict`` is
``structuredContent`` (plus its JSON as text), a list of content blocks is the
content, and a ``CallToolResult`` is sent as it is (always, whatever the
annotation).
"""

from __future__ import annotations

import functools
import inspect
import json
import types
import typing
from collections.abc import Callable
from typing import Any, Final, final

import attrs
import trio

from .._messages import (
    CallToolResult,
    ContentBlock,
    OtherContent,
    TextContent,
    Tool,
    ToolExecution,
    text_result_wire,
    wire_object,
)
from ._arguments import ArgumentError as ArgumentError
from ._toolsig import ArgumentBinder, OutputShape, analyze_signature

ToolFunction = Callable[..., Any]
#: How many sync tools may run in worker threads at once (per Trio run).
SYNC_TOOL_THREADS: Final = 40
_SYNC_LIMITER: Final = trio.lowlevel.RunVar[trio.CapacityLimiter]("trio_mcp_sync_tools")

_TASK_SUPPORT: Final = ("forbidden", "optional", "required")


def _is_content_annotation(annotation: Any) -> bool:
    """True for return annotations that are MCP content, not structured output.

    ``CallToolResult``, content blocks (any trio-mcp attrs class), lists or
    unions holding one, and a bare ``list`` / ``list[Any]`` (which may hold
    content blocks: such a tool's return is sent as content, as it always was,
    with no ``outputSchema`` it might not keep).
    """
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = annotation.__origin__
    if annotation is list:
        return True
    origin = typing.get_origin(annotation)
    if origin is list and typing.get_args(annotation) in ((), (Any,)):
        return True
    if origin in (typing.Union, types.UnionType, list):
        return any(_is_content_annotation(a) for a in typing.get_args(annotation))
    cls = origin or annotation
    return attrs.has(cls) and getattr(cls, "__module__", "").startswith("trio_mcp.")


def _sync_limiter() -> trio.CapacityLimiter:
    try:
        return _SYNC_LIMITER.get()
    except LookupError:
        limiter = trio.CapacityLimiter(SYNC_TOOL_THREADS)
        _SYNC_LIMITER.set(limiter)
        return limiter


@final
@attrs.frozen
class ToolSpec:
    """A registered tool: its listing and the function that runs it.

    Attributes:
        tool: The ``Tool`` listed by ``tools/list``.
        fn: The function.
        context_param: The parameter that receives the call's context.
        params: The names of the argument parameters.
        binder: Structures arguments into keyword arguments.
        output: How a structured return value becomes ``structuredContent``.
        is_async: ``fn`` is a coroutine function (else it runs in a thread).
        inline: ``fn`` is a plain function that runs on the event loop, in
            the task that read the request (no thread, no task of its own).
    """

    tool: Tool
    fn: ToolFunction
    context_param: str | None
    params: tuple[str, ...]
    binder: ArgumentBinder = attrs.field(
        default=attrs.Factory(lambda self: ArgumentBinder(frozenset(self.params)), takes_self=True)
    )
    output: OutputShape | None = None
    is_async: bool = True
    _check: Callable[[dict[str, Any]], str | None] | None = None
    inline: bool = False

    def bind(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check ``arguments`` and turn them into the function's keyword arguments.

        Raises:
            ArgumentError: The arguments do not fit (a missing or unexpected
                argument, a value of the wrong type, at any depth).
        """
        check = self._check
        if check is None:
            problem = check_arguments(self.tool.input_schema, arguments)
        else:
            problem = check(arguments)
        if problem is not None:
            raise ArgumentError(problem)
        return self.binder(arguments)

    async def call(self, kwargs: dict[str, Any]) -> Any:
        """Run the function with ``kwargs`` (a sync one in a worker thread, unless inline).

        Cancellation: an async tool is cancelled like any Trio code. A sync
        tool's call returns at once (raising ``Cancelled``) while its thread
        runs on to its end; what it then returns or raises is dropped.
        """
        if self.is_async:
            return await self.fn(**kwargs)
        if self.inline:
            return self.fn(**kwargs)
        return await trio.to_thread.run_sync(
            functools.partial(self.fn, **kwargs),
            abandon_on_cancel=True,
            limiter=_sync_limiter(),
        )

    def to_wire(self, value: Any) -> dict[str, Any]:
        """:meth:`to_result` as wire JSON (a returned ``str`` without the objects).

        Raises:
            Exception: The value does not serialize as the return type says.
        """
        if type(value) is str and self.output is None:
            return text_result_wire(value)
        return wire_object(self.to_result(value))

    def to_result(self, value: Any) -> CallToolResult:
        """Turn what the function returned into a ``CallToolResult``.

        Raises:
            Exception: The value does not serialize as the return type says.
        """
        if self.output is None or isinstance(value, CallToolResult):
            return to_call_tool_result(value)
        data, structured = self.output.structured(value)
        return CallToolResult(
            content=[TextContent(json.dumps(data, ensure_ascii=False))],
            structured_content=structured,
        )


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
    inline: bool = False,
) -> ToolSpec:
    """Build the :class:`ToolSpec` of ``fn`` (see :meth:`trio_mcp.App.tool`).

    Everything a call needs (schemas, structure hooks, the argument check) is
    computed here, once.

    Raises:
        TypeError: ``fn`` is not callable, or is an async generator function.
        ValueError: ``task_support`` is not forbidden/optional/required, or
            ``inline`` is asked of an async function.
    """
    if not callable(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"tool {fn!r} must be a function (async or not)")
    if task_support not in _TASK_SUPPORT:
        raise ValueError(f"task_support must be one of {_TASK_SUPPORT}, not {task_support!r}")
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    )
    if inline and is_async:
        raise ValueError(f"inline=True is for plain def tools; {fn!r} is async")
    sig = analyze_signature(
        fn, context_type=context_type, unstructured_return=_is_content_annotation
    )
    schema = sig.input_schema if input_schema is None else input_schema
    output = sig.output
    if output_schema is None and output is not None:
        output_schema = output.schema
    elif output_schema is not None and output is not None and output.wrap:
        # The caller's schema describes the value itself: send it unwrapped.
        output = OutputShape(output_schema, False, output.serialize)
    doc = inspect.getdoc(fn)
    tool = Tool(
        name=name or str(getattr(fn, "__name__", type(fn).__name__)),
        input_schema=schema,
        title=title,
        description=description if description is not None else doc,
        output_schema=output_schema,
        annotations=annotations,
        # Absent means "forbidden"; say it explicitly only when it is not.
        execution=None if task_support == "forbidden" else ToolExecution(task_support),
    )
    params = tuple(p for p in inspect.signature(fn).parameters if p in sig.binder.params)
    return ToolSpec(
        tool,
        fn,
        sig.context_param,
        params,
        sig.binder,
        output,
        is_async,
        compile_check(schema),
        inline,
    )


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
                return _unexpected(name, properties)
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


_EXACT: Final[dict[str, frozenset[type[Any]]]] = {
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
    "array": frozenset({list}),
    "object": frozenset({dict}),
    "null": frozenset({type(None)}),
}
_UNCHECKED: Final = object()


def compile_check(schema: dict[str, Any]) -> Callable[[dict[str, Any]], str | None]:
    """Precompute :func:`check_arguments` for one schema.

    The returned function gives exactly the answers ``check_arguments(schema,
    arguments)`` gives, doing per call only what depends on the arguments.
    """
    required = schema.get("required", ())
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    if not isinstance(required, list | tuple) or not all(isinstance(r, str) for r in required):
        return functools.partial(check_arguments, schema)
    required = tuple(required)
    closed = schema.get("additionalProperties") is False
    plan: dict[str, Any] = {}
    for name, prop in properties.items():
        if not isinstance(prop, dict):
            plan[name] = _UNCHECKED
            continue
        wanted = prop.get("type")
        names = [wanted] if isinstance(wanted, str) else wanted if isinstance(wanted, list) else []
        if any(n not in _CHECKS for n in names):
            names = []  # an unknown type name accepts anything
        exact = frozenset().union(*(_EXACT[n] for n in names)) if names else frozenset()
        checks = tuple(_CHECKS[n] for n in names)
        message = f"argument {name!r} must be of type {' or '.join(map(str, names))}"
        enum = prop.get("enum")
        enum = enum if isinstance(enum, list) else None
        plan[name] = (exact, checks, message, enum, f"argument {name!r} must be one of {enum}")

    def check(arguments: dict[str, Any]) -> str | None:
        for name in required:
            if name not in arguments:
                return f"missing required argument {name!r}"
        for name, value in arguments.items():
            entry = plan.get(name)
            if entry is None:
                if closed:
                    return _unexpected(name, properties)
                continue
            if entry is _UNCHECKED:
                continue
            exact, checks, message, enum, enum_message = entry
            if checks and type(value) not in exact and not any(c(value) for c in checks):
                return str(message)
            if enum is not None and value not in enum:
                return str(enum_message)
        return None

    return check


def _unexpected(name: str, properties: dict[str, Any]) -> str:
    """The reason for an argument the schema does not allow, naming those it does."""
    takes = ", ".join(repr(p) for p in properties) if properties else "no arguments"
    return f"unexpected argument {name!r} (it takes {takes})"


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
