"""The strict cattrs converter that structures tool arguments into their annotated types."""

from __future__ import annotations

import collections.abc as cabc
import enum
import functools
import json
import operator
import sys
import typing
from collections.abc import Callable, Iterator
from typing import Any, Final, Literal

import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn

from ._hints import (
    _ARTICLES,
    _MAPPINGS,
    _NONE,
    _PRIMITIVES,
    _SEQUENCES,
    _SETS,
    _TRANSPARENT,
    _UNIONS,
    Hook,
    _fields,
    _is_record,
    _is_typeddict,
    _json_kind,
    _literal_value,
    _pydantic_model,
    _strip,
)

# --- the argument converter ----------------------------------------------------------------


class ArgumentError(ValueError):
    """Arguments do not fit a tool's parameters; ``str()`` names the path and the problem."""


class _Mismatch(TypeError):
    """A value of the wrong JSON kind; ``subpath`` is relative to where it was raised."""

    def __init__(self, message: str, subpath: str = "") -> None:
        super().__init__(message)
        self.subpath = subpath


def _expected(kind: str, value: Any) -> _Mismatch:
    return _Mismatch(f"expected {_ARTICLES.get(kind, kind)}, got {_json_kind(value)}")


def _show(value: Any) -> str:
    """A value as JSON for an error message, cut short."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 80 else text[:77] + "..."


def _passthrough(value: Any, _: Any) -> Any:
    return value


def _structure_none(value: Any, _: Any) -> None:
    if value is not None:
        raise _expected("null", value)


def _strict(kind: str, *accepted: type[Any], cast: type[Any] | None = None) -> Hook:
    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and bool not in accepted:
            raise _expected(kind, value)
        if not isinstance(value, accepted):
            raise _expected(kind, value)
        return cast(value) if cast is not None else value

    return structure


def _note_index(exc: Exception, index: int | str, tp: Any) -> Exception:
    exc.__notes__ = [
        *getattr(exc, "__notes__", ()),
        IterableValidationNote(f"@ {index!r}", index, tp),
    ]
    return exc


def _items_hook(conv: cattrs.Converter, tp: Any, build: Callable[[list[Any]], Any]) -> Hook:
    args = typing.get_args(tp)
    item = args[0] if args else Any
    structure_item = conv.get_structure_hook(item)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, list):
            raise _expected("array", value)
        out: list[Any] = []
        errors: list[Exception] = []
        for i, v in enumerate(value):
            try:
                out.append(structure_item(v, item))
            except Exception as exc:
                errors.append(_note_index(exc, i, item))
        if errors:
            raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
        return build(out)

    return structure


def _tuple_hook(conv: cattrs.Converter, tp: Any) -> Hook:
    args = typing.get_args(tp)
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        return _items_hook(conv, tp, tuple)
    if args == ((),):
        args = ()
    hooks = [conv.get_structure_hook(a) for a in args]

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, list):
            raise _expected("array", value)
        if len(value) != len(args):
            raise _Mismatch(f"expected {len(args)} items, got {len(value)}")
        errors: list[Exception] = []
        out: list[Any] = []
        for i, (hook, item, v) in enumerate(zip(hooks, args, value, strict=True)):
            try:
                out.append(hook(v, item))
            except Exception as exc:
                errors.append(_note_index(exc, i, item))
        if errors:
            raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
        return tuple(out)

    return structure


def _mapping_hook(conv: cattrs.Converter, tp: Any) -> Hook:
    args = typing.get_args(tp)
    key_type, item = args if len(args) == 2 else (str, Any)
    structure_key = conv.get_structure_hook(key_type)
    structure_item = conv.get_structure_hook(item)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise _expected("object", value)
        out: dict[Any, Any] = {}
        errors: list[Exception] = []
        for k, v in value.items():
            try:
                out[structure_key(k, key_type)] = structure_item(v, item)
            except Exception as exc:
                errors.append(_note_index(exc, str(k), item))
        if errors:
            raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
        return out

    return structure


def _literal_hook(tp: Any) -> Hook:
    allowed = [(type(v), _literal_value(v), v) for v in typing.get_args(tp)]
    shown = [a for _, a, _ in allowed]

    def structure(value: Any, _: Any) -> Any:
        for cls, wire, python in allowed:
            wire_cls = type(wire)
            if value == wire and (
                type(value) is wire_cls or (wire_cls is float and type(value) is int)
            ):
                return python if cls is not wire_cls else value
        raise _Mismatch(f"expected one of {_show(shown)}, got {_show(value)}")

    return structure


def _enum_hook(cls: type[enum.Enum]) -> Hook:
    by_value = [(m.value, m) for m in cls]
    shown = [v for v, _ in by_value]

    def structure(value: Any, _: Any) -> Any:
        for wire, member in by_value:
            if value == wire and type(value) is type(wire):
                return member
        raise _Mismatch(f"expected one of {_show(shown)}, got {_show(value)}")

    return structure


def _kinds(tp: Any) -> frozenset[str] | None:
    """The JSON kinds a value of ``tp`` can arrive as (``None``: any)."""
    tp, _ = _strip(tp)
    origin = typing.get_origin(tp)
    if tp in _PRIMITIVES:
        return frozenset({"number", "integer"}) if tp is float else frozenset({_PRIMITIVES[tp]})
    if tp is None or tp is _NONE:
        return frozenset({"null"})
    if origin is Literal:
        return frozenset(_json_kind(_literal_value(v)) for v in typing.get_args(tp))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return frozenset(_json_kind(m.value) for m in tp)
    if origin in _UNIONS:
        out: set[str] = set()
        for member in typing.get_args(tp):
            kinds = _kinds(member)
            if kinds is None:
                return None
            out |= kinds
        return frozenset(out)
    container = origin or tp
    if container in _SEQUENCES or container in _SETS or container is tuple:
        return frozenset({"array"})
    if container in _MAPPINGS or _is_record(tp) or _is_typeddict(tp) or _pydantic_model(tp):
        return frozenset({"object"})
    return None


def _record_keys(tp: Any) -> frozenset[str] | None:
    tp, _ = _strip(tp)
    if _is_record(tp) or _is_typeddict(tp):
        return frozenset(f.name for f in _fields(tp))
    return None


def _union_hook(conv: cattrs.Converter, tp: Any) -> Hook:
    members = [m for m in typing.get_args(tp)]
    plan = [(m, conv.get_structure_hook(m), _kinds(m), _record_keys(m)) for m in members]
    names = " or ".join(_type_name(m) for m in members)

    def structure(value: Any, _: Any) -> Any:
        kind = _json_kind(value)
        candidates = [
            p
            for p in plan
            if p[2] is None or kind in p[2] or (kind == "integer" and "number" in p[2])
        ]
        if not candidates:
            raise _Mismatch(f"expected {names}, got {kind}")
        if len(candidates) == 1:
            member, hook, _, _ = candidates[0]
            return hook(value, member)
        fallback: list[Any] = []
        first_error: Exception | None = None
        for member, hook, _, keys in candidates:
            try:
                out = hook(value, member)
            except Exception as exc:
                first_error = first_error or exc
                continue
            if keys is None or not isinstance(value, dict) or keys.issuperset(value):
                return out
            fallback.append(out)
        if fallback:
            return fallback[0]
        raise _Mismatch(f"does not match {names}") from first_error

    return structure


def _type_name(tp: Any) -> str:
    tp, _ = _strip(tp)
    if tp is None or tp is _NONE:
        return "null"
    if tp in _PRIMITIVES:
        return _PRIMITIVES[tp]
    name = getattr(typing.get_origin(tp) or tp, "__name__", None)
    return name if isinstance(name, str) else repr(tp)


def _typeddict_hook(conv: cattrs.Converter, tp: Any) -> Hook:
    # Our own, not cattrs': the required keys must come from the resolved hints.
    fields = [(f, _strip(f.type)[0]) for f in _fields(tp)]
    plan = [(f.name, t, conv.get_structure_hook(t), f.required) for f, t in fields]
    known = frozenset(f[0] for f in plan)

    def structure(value: Any, _: Any) -> Any:
        out = {k: v for k, v in value.items() if k not in known}  # extra keys are kept
        errors: list[Exception] = []
        for name, field_type, hook, required in plan:
            try:
                if name in value:
                    out[name] = hook(value[name], field_type)
                elif required:
                    raise KeyError(name)
            except Exception as exc:
                note = AttributeValidationNote(f"@ {name}", name, field_type)
                exc.__notes__ = [*getattr(exc, "__notes__", ()), note]
                errors.append(exc)
        if errors:
            raise ClassValidationError(f"While structuring {_type_name(tp)}", errors, tp)
        return out

    return structure


def _record_hook(conv: cattrs.Converter, tp: Any) -> Hook:
    cls = typing.get_origin(tp) or tp
    inner = _typeddict_hook(conv, tp) if _is_typeddict(cls) else make_dict_structure_fn(tp, conv)

    def structure(value: Any, typ: Any) -> Any:
        if not isinstance(value, dict):
            raise _expected("object", value)
        return inner(value, typ)

    return structure


def _pydantic_hook(model: Any) -> Hook:
    def structure(value: Any, _: Any) -> Any:
        pydantic = sys.modules["pydantic"]
        try:
            return model.model_validate(value)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            subpath = "".join(_path_part(p) for p in first.get("loc", ()))
            raise _Mismatch(str(first.get("msg", "invalid value")), subpath) from None

    return structure


_SCALAR_HOOKS: Final[dict[Any, Hook]] = {
    str: _strict("string", str),
    int: _strict("integer", int),
    float: _strict("number", int, float, cast=float),
    bool: _strict("boolean", bool),
}


def _scalar_hook(tp: Any) -> Hook:
    if not isinstance(tp, type):  # e.g. NotRequired[int], which cattrs sends here
        base = _strip(tp)[0]
        return lambda value, _: _structure_scalar(value, base)
    if issubclass(tp, enum.Enum):
        return _enum_hook(tp)
    for base, check in _SCALAR_HOOKS.items():
        if issubclass(tp, base):  # a subclass of str/int/float: check, then convert

            def structure(value: Any, typ: Any, check: Hook = check) -> Any:
                return typ(check(value, typ))

            return structure
    raise TypeError(f"no structure hook for {tp!r}")  # pragma: no cover


def _structure_scalar(value: Any, tp: Any) -> Any:
    hook = _SCALAR_HOOKS.get(tp)
    if hook is None:
        hook = _SCALAR_HOOKS[tp] = _scalar_hook(tp)
    return hook(value, tp)


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is Literal


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in _UNIONS


def _is_structured_class(tp: Any) -> bool:
    return _is_record(tp) or _is_typeddict(tp)


def _is_wrapper(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin is typing.Annotated or origin in _TRANSPARENT


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(detailed_validation=True, prefer_attrib_converters=False)
    conv.register_structure_hook_func(functools.partial(operator.is_, Any), _passthrough)
    conv.register_structure_hook_func(functools.partial(operator.is_, object), _passthrough)
    conv.register_structure_hook_func(functools.partial(operator.is_, _NONE), _structure_none)
    # cattrs looks class hooks up by MRO before anything else, and has its own
    # (lenient) ones for these bases: replace them with one that is strict,
    # and tells an IntEnum or a ``str`` subclass from the plain type.
    for base in (str, int, float, bool, enum.Enum):
        conv.register_structure_hook(base, _structure_scalar)

    def origin_in(*choices: Any) -> Callable[[Any], bool]:
        def predicate(tp: Any) -> bool:
            return (typing.get_origin(tp) or tp) in choices

        return predicate

    conv.register_structure_hook_factory(
        origin_in(*_SEQUENCES), lambda tp: _items_hook(conv, tp, list)
    )
    conv.register_structure_hook_factory(
        origin_in(set, cabc.Set, cabc.MutableSet), lambda tp: _items_hook(conv, tp, set)
    )
    conv.register_structure_hook_factory(
        origin_in(frozenset), lambda tp: _items_hook(conv, tp, frozenset)
    )
    conv.register_structure_hook_factory(origin_in(tuple), lambda tp: _tuple_hook(conv, tp))
    conv.register_structure_hook_factory(origin_in(*_MAPPINGS), lambda tp: _mapping_hook(conv, tp))
    conv.register_structure_hook_factory(_is_literal, _literal_hook)
    conv.register_structure_hook_factory(_is_enum, _enum_hook)
    conv.register_structure_hook_factory(_is_union, lambda tp: _union_hook(conv, tp))
    conv.register_structure_hook_factory(_is_structured_class, lambda tp: _record_hook(conv, tp))
    conv.register_structure_hook_factory(_pydantic_model, _pydantic_hook)
    conv.register_structure_hook_factory(
        _is_wrapper, lambda tp: conv.get_structure_hook(_strip(tp)[0])
    )

    # Back to JSON (results): sets and tuples as arrays, pydantic models as they say.
    conv.register_unstructure_hook_factory(
        origin_in(set, frozenset, tuple),
        lambda tp: lambda value: [conv.unstructure(v) for v in value],
    )
    conv.register_unstructure_hook_factory(
        _pydantic_model, lambda tp: lambda value: value.model_dump(mode="json")
    )
    return conv


#: Structures plain JSON arguments into parameter types, and results back to JSON.
#: Strict: JSON kinds are never coerced ("1" is not 1), except an integer for a float.
converter: Final = _make_converter()


def _path_part(part: int | str) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    if part.isidentifier():
        return f".{part}"
    return f"[{json.dumps(part)}]"


def _leaves(exc: BaseException, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            sub_path = path
            for note in getattr(sub, "__notes__", ()):
                if isinstance(note, AttributeValidationNote):
                    sub_path += _path_part(note.name)
                elif isinstance(note, IterableValidationNote):
                    sub_path += _path_part(note.index)
            yield from _leaves(sub, sub_path)
    elif isinstance(exc, _Mismatch):
        yield path + exc.subpath, str(exc)
    elif isinstance(exc, KeyError):
        yield path, "is required"
    else:
        yield path, f"{type(exc).__name__}: {exc}"[:200]


def describe_error(exc: BaseException, name: str) -> str:
    """One line naming each offending argument path (up to three) and its problem.

    Args:
        exc: What a structure hook raised.
        name: The argument (parameter) name the path starts from.
    """
    leaves = list(_leaves(exc, name))
    text = "; ".join(
        f"argument {path!r} {problem}"
        if problem == "is required"
        else f"argument {path!r}: {problem}"
        for path, problem in leaves[:3]
    )
    if len(leaves) > 3:
        text += f" (and {len(leaves) - 3} more)"
    return text

