"""A tool's signature, analysed once: the argument binder, the output shape, the schemas."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, Final, final

import attrs

from ._arguments import (
    ArgumentError,
    describe_error,
)
from ._hints import (
    _NO_DEFAULT,
    _NONE,
    _UNIONS,
    Hook,
    JsonSchema,
    _annotated_description,
    _json_kind,
    _strip,
    docstring_args,
)
from ._schema import (
    SchemaBuilder,
    json_default,
)
from ._serialize import _identity, serializer, structure_hook

_CHEAP_KEYWORDS: Final = frozenset({"type", "enum", "description", "title", "examples"})


def needs_structuring(tp: Any) -> bool:
    """False when the cheap top-level check (type names, ``enum``) already does it all.

    That holds for ``Any``, ``str``/``int``/``float``/``bool``, ``None`` and
    their unions (a ``type`` list), ``Literal`` with several values (an
    ``enum``), bare ``list``/``dict``, ``list[Any]``/``dict[str, Any]``, and
    types with no schema (passed through as JSON). Anything else is
    structured by the converter.
    """
    if not _identity(tp):
        return True
    schema = SchemaBuilder().schema(tp)
    return not _CHEAP_KEYWORDS.issuperset(schema)



# --- tool signatures -----------------------------------------------------------------------


@final
@attrs.frozen
class ArgumentBinder:
    """Turns a ``tools/call``'s arguments into the keyword arguments of the function.

    Everything is computed at registration. Per call: keep the known names
    (all of them for a function with ``**kwargs``; without one, the schema's
    ``additionalProperties: false`` has already refused the others), then
    structure only the parameters whose type needs it (never the primitives,
    which the schema check has already validated).

    Attributes:
        params: The names of the function's argument parameters.
        structured: ``(name, type, hook)`` of the parameters to structure.
        open_ended: The function takes ``**kwargs``: every argument is passed on.
    """

    params: frozenset[str]
    structured: tuple[tuple[str, Any, Hook], ...] = ()
    #: The function takes ``**kwargs``: every argument is passed on.
    open_ended: bool = False

    def __call__(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Select and structure ``arguments``.

        Raises:
            ArgumentError: A value does not fit its parameter's type; the
                message names the path of the value (``point.x``,
                ``items[2].name``).
        """
        params = self.params
        kwargs = dict(arguments) if self.open_ended else {
            k: v for k, v in arguments.items() if k in params
        }
        for name, tp, hook in self.structured:
            if name in kwargs:
                try:
                    kwargs[name] = hook(kwargs[name], tp)
                except Exception as exc:
                    raise ArgumentError(describe_error(exc, name)) from None
        return kwargs


@final
@attrs.frozen
class OutputShape:
    """How a tool's return value becomes ``structuredContent``.

    Attributes:
        schema: The ``outputSchema`` (always ``type: object``).
        wrap: The return type is not an object: the value is sent as
            ``{"result": value}``.
        serialize: Turns the returned value into JSON.
    """

    schema: JsonSchema
    wrap: bool
    serialize: Callable[[Any], Any]

    def structured(self, value: Any) -> tuple[Any, dict[str, Any]]:
        """The value as JSON, and the ``structuredContent`` holding it."""
        data = self.serialize(value)
        if self.wrap:
            return data, {"result": data}
        if not isinstance(data, dict):
            raise TypeError(f"structured result must be a JSON object, not {_json_kind(data)}")
        return data, data


@final
@attrs.frozen
class ToolSignature:
    """What a tool function's signature and docstring say, computed once.

    Attributes:
        input_schema: The ``inputSchema`` (``type: object``, one property per parameter).
        binder: Turns arguments into keyword arguments.
        context_param: The parameter that receives the call's context, if any.
        output: The structured-output shape, or ``None`` when the return
            type is not structured (``str``, ``None``, content blocks, ...).
    """

    input_schema: JsonSchema
    binder: ArgumentBinder
    context_param: str | None
    output: OutputShape | None


def _is_object_schema(schema: JsonSchema, defs: dict[str, JsonSchema]) -> bool:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _is_object_schema(defs.get(ref[len("#/$defs/") :], {}), defs)
    return schema.get("type") == "object"


def output_shape(tp: Any) -> OutputShape | None:
    """The structured-output shape of a return type (``None`` when it has no schema).

    Callers decide beforehand which return types are unstructured (text,
    content blocks); here only ``None``, ``Any`` and types without a schema
    give ``None``.
    """
    base, _ = _strip(tp)
    if base is None or base is _NONE or base is Any or base is inspect.Parameter.empty:
        return None
    builder = SchemaBuilder(mode="serialization")
    schema = builder.schema(tp)
    if not schema:
        return None
    if _is_object_schema(schema, builder.defs):
        root = schema if schema.get("type") == "object" else {"type": "object", **schema}
        return OutputShape(builder.document(root), False, serializer(tp))
    wrapped = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    return OutputShape(builder.document(wrapped), True, serializer(tp))


def _is_text(tp: Any) -> bool:
    """``str`` or ``str | None``: a text result, never structured output."""
    tp, _ = _strip(tp)
    if typing.get_origin(tp) in _UNIONS:
        members = [_strip(m)[0] for m in typing.get_args(tp)]
        return str in members and all(m is str or m is _NONE for m in members)
    return tp is str


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Type hints of a function, a ``functools.partial`` or an object with ``__call__``."""
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - the method, not callable()
    for target in (fn, getattr(fn, "func", None), call):
        if target is not None:
            try:
                return typing.get_type_hints(target, include_extras=True)
            except TypeError:
                continue
    return {}


def analyze_signature(
    fn: Callable[..., Any],
    *,
    context_type: type[Any],
    unstructured_return: Callable[[Any], bool] = lambda _: False,
) -> ToolSignature:
    """Derive the schemas, the argument binder and the output shape of ``fn``.

    Args:
        fn: The tool function (sync or async).
        context_type: The annotation that marks the context parameter.
        unstructured_return: Says which return annotations are not
            structured output (e.g. content blocks); ``str``, ``str | None``,
            ``None`` and ``Any`` never are.

    Returns:
        The :class:`ToolSignature`.
    """
    sig = inspect.signature(fn)
    hints = _hints(fn)
    docs = docstring_args(inspect.getdoc(fn))
    builder = SchemaBuilder()
    properties: JsonSchema = {}
    required: list[str] = []
    params: list[str] = []
    structured: list[tuple[str, Any, Hook]] = []
    context_param: str | None = None
    open_ended = False  # **kwargs: arguments beyond the named ones are the function's
    for name, param in sig.parameters.items():
        annotation = hints.get(name, Any)
        if annotation is context_type:
            context_param = name
            continue
        if param.kind is param.VAR_KEYWORD:
            open_ended = True
            continue
        if param.kind is param.VAR_POSITIONAL:
            continue
        params.append(name)
        prop = builder.schema(annotation)
        if name in docs and not _annotated_description(annotation):
            prop = {**prop, "description": docs[name]}
        if param.default is param.empty:
            required.append(name)
        else:
            default = json_default(param.default, annotation)
            if default is not _NO_DEFAULT:
                prop = {**prop, "default": default}
        properties[name] = prop
        if needs_structuring(annotation):
            structured.append((name, annotation, structure_hook(annotation)))
    schema: JsonSchema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if not open_ended:
        # An argument the function has no parameter for is refused (a tool execution
        # error naming it), not dropped: a misspelt name must not run with a default.
        schema["additionalProperties"] = False
    returns = hints.get("return", Any)
    output = None
    if not _is_text(returns) and not unstructured_return(returns):
        output = output_shape(returns)
    binder = ArgumentBinder(frozenset(params), tuple(structured), open_ended)
    return ToolSignature(builder.document(schema), binder, context_param, output)
