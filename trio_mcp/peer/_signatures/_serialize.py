"""Turning values into JSON by their annotated types, and what needs structuring at all."""

from __future__ import annotations

import enum
import inspect
import typing
from collections.abc import Callable
from typing import Any, Literal

from ._arguments import (
    _is_enum,
    _is_structured_class,
    converter,
)
from ._hints import (
    _MAPPINGS,
    _NONE,
    _PRIMITIVES,
    _SEQUENCES,
    _SETS,
    _UNIONS,
    Hook,
    _pydantic_model,
    _strip,
)


def _identity(tp: Any) -> bool:
    """Structuring a valid JSON value of ``tp`` gives the value back unchanged."""
    tp, _ = _strip(tp)
    if tp is Any or tp is object or tp is None or tp is _NONE or tp in _PRIMITIVES:
        return True
    if tp is inspect.Parameter.empty or tp is list or tp is dict:
        return True
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return not any(isinstance(v, enum.Enum) for v in args)
    if origin in _UNIONS:
        return all(_identity(m) for m in args)
    if origin is list:
        return args[0] is Any
    if origin is dict:
        return args == (str, Any)
    if _is_structured_class(tp) or _is_enum(tp) or _pydantic_model(tp):
        return False
    container = origin or tp
    if container in _SEQUENCES or container in _SETS or container in _MAPPINGS:
        return False
    return container is not tuple  # else a type with no schema: passed through as JSON


def _json_container(tp: Any) -> bool:
    """``list``/``dict`` nesting of JSON scalars only: already JSON as it is."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is list:
        return _identity(args[0]) or _json_container(args[0])
    if origin is dict:
        return args[0] is str and (_identity(args[1]) or _json_container(args[1]))
    if origin in _UNIONS:
        return all(_identity(m) or _json_container(m) for m in args)
    return False


def structure_hook(tp: Any) -> Hook:
    """The converter's structure hook for ``tp`` (built once, cached by cattrs)."""
    return converter.get_structure_hook(tp)


def _same(value: Any) -> Any:
    return value


def serializer(tp: Any) -> Callable[[Any], Any]:
    """A function turning a value of type ``tp`` into JSON.

    A type whose values are JSON already (``dict[str, Any]``, ``int``,
    ``list[str]``, ...) gives the identity: nothing is copied per call.
    """
    tp, _ = _strip(tp)
    if _identity(tp) or _json_container(tp):
        return _same
    if _pydantic_model(tp):
        return lambda value: value.model_dump(mode="json")
    return converter.get_unstructure_hook(tp)


