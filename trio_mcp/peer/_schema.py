"""JSON Schema 2020-12 from type hints, and the converter that structures arguments to match.

Pure functions and classes (no I/O, no Trio). Everything here runs once, when a
tool is registered; what runs per call is a precomputed :class:`ArgumentBinder`
and, for a structured return type, a precomputed serializer.

Types understood (anything else is an open schema ``{}`` and passes through as
the JSON it arrived as):

* ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``;
* ``list[X]``, ``Sequence[X]``, ``set[X]``/``frozenset[X]`` (``uniqueItems``),
  ``tuple[X, ...]`` and fixed ``tuple[A, B]`` (``prefixItems``);
* ``dict[str, X]`` / ``Mapping[str, X]`` (``additionalProperties``);
* attrs classes, dataclasses and ``TypedDict`` (required and optional keys),
  generic ones included, nested to any depth; a recursive type is put in
  ``$defs`` and referred to with ``$ref``;
* ``Literal`` (``const``/``enum``), ``Enum`` (``enum`` of the values),
  ``Optional``/unions (a ``type`` list when every member is a plain JSON type,
  else ``anyOf``);
* ``Annotated[X, "description"]`` and ``Annotated[X, field]`` where ``field``
  has a ``description`` (pydantic's ``Field``), ``title`` or ``examples``
  attribute, or a ``documentation`` attribute (``typing_extensions.Doc``);
* pydantic models, through their own ``model_json_schema()`` and
  ``model_validate()``, when pydantic is in use. pydantic is never imported
  here: a model can only exist once its user has imported pydantic.

Descriptions also come from Google-style docstrings: a function's ``Args:``
section describes its parameters, a class's ``Attributes:`` section its fields.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import enum
import functools
import inspect
import json
import operator
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any, Final, Literal, final

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn

JsonSchema = dict[str, Any]
Hook = Callable[[Any, Any], Any]

_PRIMITIVES: Final[dict[Any, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
}
_NONE: Final = type(None)
_TRANSPARENT: Final = (typing.Required, typing.NotRequired, typing.ClassVar, typing.Final)
_UNIONS: Final = (typing.Union, types.UnionType)
_SEQUENCES: Final = (list, cabc.Sequence, cabc.MutableSequence, cabc.Iterable, cabc.Collection)
_SETS: Final = (set, frozenset, cabc.Set, cabc.MutableSet)
_MAPPINGS: Final = (dict, cabc.Mapping, cabc.MutableMapping)
_JSON_NAMES: Final[dict[type[Any], str]] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    _NONE: "null",
}
_ARTICLES: Final[dict[str, str]] = {
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


# --- docstrings ----------------------------------------------------------------------------

_SECTION_RE: Final = re.compile(r"^([A-Z][A-Za-z ]*):\s*$")
_ENTRY_RE: Final = re.compile(r"^\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_ARGS_SECTIONS: Final = frozenset({"Args", "Arguments", "Parameters", "Params"})
_ATTR_SECTIONS: Final = frozenset({"Attributes", "Attrs", "Fields"})


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def docstring_sections(doc: str | None) -> tuple[str, dict[str, dict[str, str]]]:
    """Split a Google-style docstring into its summary and its named entries.

    Args:
        doc: The docstring (raw or cleaned); ``None`` gives nothing.

    Returns:
        The text before the first section, and for each section (``"Args"``,
        ``"Attributes"``, ...) a map from entry name to its description, the
        continuation lines joined with spaces.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    sections: dict[str, dict[str, str]] = {}
    i = 0
    while i < len(lines) and not _SECTION_RE.match(lines[i]):
        summary.append(lines[i])
        i += 1
    while i < len(lines):
        header = _SECTION_RE.match(lines[i])
        if header is None:
            i += 1
            continue
        base = _indent(lines[i])
        entries = sections.setdefault(header.group(1), {})
        i += 1
        entry_indent: int | None = None
        current: str | None = None
        while i < len(lines):
            line = lines[i]
            if line.strip() and _indent(line) <= base:
                break
            i += 1
            if not line.strip():
                continue
            if entry_indent is None:
                entry_indent = _indent(line)
            match = _ENTRY_RE.match(line.strip()) if _indent(line) <= entry_indent else None
            if match is not None:
                current = match.group(1)
                entries[current] = match.group(2).strip()
            elif current is not None:
                entries[current] = f"{entries[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), sections


def _pick(sections: dict[str, dict[str, str]], names: frozenset[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, entries in sections.items():
        if name in names:
            out.update(entries)
    return out


def docstring_args(doc: str | None) -> dict[str, str]:
    """Parameter descriptions from a docstring's ``Args:`` section."""
    return _pick(docstring_sections(doc)[1], _ARGS_SECTIONS)


def _class_doc(cls: type[Any]) -> tuple[str, dict[str, str]]:
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str):
        return "", {}
    if dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}("):
        return "", {}  # the signature dataclasses writes when there is no docstring
    summary, sections = docstring_sections(doc)
    return summary, _pick(sections, _ATTR_SECTIONS | _ARGS_SECTIONS)


# --- type inspection -----------------------------------------------------------------------


def _strip(tp: Any) -> tuple[Any, list[Any]]:
    """Remove ``Annotated``, ``Required``, ``NewType`` & co; return the type and its metadata."""
    metadata: list[Any] = []
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            metadata.extend(tp.__metadata__)
            tp = tp.__origin__
        elif origin in _TRANSPARENT:
            tp = typing.get_args(tp)[0]
        elif isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        elif isinstance(tp, typing.TypeVar):
            tp = tp.__bound__ if tp.__bound__ is not None else Any
        else:
            return tp, metadata


def _annotation_keywords(metadata: list[Any]) -> JsonSchema:
    out: JsonSchema = {}
    for item in metadata:
        if isinstance(item, str):
            out["description"] = item
            continue
        for attr, key in (
            ("description", "description"),
            ("documentation", "description"),
            ("title", "title"),
            ("examples", "examples"),
        ):
            value = getattr(item, attr, None)
            if isinstance(value, str) or (key == "examples" and isinstance(value, list)):
                out[key] = value
    return out


def _annotated_description(tp: Any) -> bool:
    """``tp`` carries its own description (``Annotated``), which beats any docstring."""
    return "description" in _annotation_keywords(_strip(tp)[1])


def _pydantic_model(tp: Any) -> bool:
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def _is_typeddict(tp: Any) -> bool:
    return (
        isinstance(tp, type)
        and issubclass(tp, dict)
        and hasattr(tp, "__required_keys__")
        and hasattr(tp, "__total__")
    )


def _is_record(tp: Any) -> bool:
    """attrs class or dataclass (possibly a parametrised generic one)."""
    cls = typing.get_origin(tp) or tp
    return isinstance(cls, type) and (attrs.has(cls) or dataclasses.is_dataclass(cls))


@attrs.frozen
class _Field:
    name: str
    type: Any
    required: bool
    default: Any


_NO_DEFAULT: Final = object()


def _type_map(tp: Any) -> dict[Any, Any]:
    cls = typing.get_origin(tp)
    if cls is None:
        return {}
    return dict(zip(getattr(cls, "__parameters__", ()), typing.get_args(tp), strict=False))


def _substitute(tp: Any, mapping: dict[Any, Any]) -> Any:
    if not mapping:
        return tp
    if isinstance(tp, typing.TypeVar):
        return mapping.get(tp, tp)
    params = getattr(tp, "__parameters__", ())
    if params:
        return tp[tuple(mapping.get(p, p) for p in params)]
    return tp


def _fields(tp: Any) -> list[_Field]:
    """The fields of an attrs class, dataclass or TypedDict, in order, types resolved."""
    cls = typing.get_origin(tp) or tp
    hints = typing.get_type_hints(cls, include_extras=True)
    mapping = _type_map(tp)
    out: list[_Field] = []
    if attrs.has(cls):
        for a in attrs.fields(cls):
            if not a.init:
                continue
            default = a.default
            required = default is attrs.NOTHING
            if required or isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = _NO_DEFAULT
            out.append(
                _Field(a.name, _substitute(hints.get(a.name, Any), mapping), required, default)
            )
    elif dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            has_default = f.default is not dataclasses.MISSING
            required = not has_default and f.default_factory is dataclasses.MISSING
            default = f.default if has_default else _NO_DEFAULT
            out.append(
                _Field(f.name, _substitute(hints.get(f.name, Any), mapping), required, default)
            )
    else:  # TypedDict
        for name, hint in hints.items():
            out.append(
                _Field(name, _substitute(hint, mapping), _td_required(cls, name, hint), _NO_DEFAULT)
            )
    return out


def _td_required(cls: Any, name: str, hint: Any) -> bool:
    # ``__required_keys__`` misses ``NotRequired[...]`` written as a string
    # (``from __future__ import annotations``) before Python 3.14: ask the
    # resolved hint first.
    while typing.get_origin(hint) is typing.Annotated:
        hint = hint.__origin__
    origin = typing.get_origin(hint)
    if origin is typing.NotRequired:
        return False
    if origin is typing.Required:
        return True
    return name in cls.__required_keys__


def _json_kind(value: Any) -> str:
    for cls in type(value).__mro__:
        if cls in _JSON_NAMES:
            return _JSON_NAMES[cls]
    return type(value).__name__


def _literal_value(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


# --- schemas ------------------------------------------------------------------------------


@final
class SchemaBuilder:
    """Builds JSON Schemas (2020-12) for types, sharing one ``$defs`` table.

    A type that refers to itself, directly or not, is built once into
    ``$defs`` and referred to with ``$ref``; other types are written inline.
    Call :meth:`schema` for each type, then :meth:`document` on the root.
    """

    def __init__(self, *, mode: Literal["validation", "serialization"] = "validation") -> None:
        self.defs: dict[str, JsonSchema] = {}
        self._mode = mode
        self._refs: dict[Any, str] = {}
        self._names: dict[str, Any] = {}
        self._building: set[Any] = set()
        self._inline: dict[Any, JsonSchema] = {}

    def document(self, root: JsonSchema) -> JsonSchema:
        """Return ``root`` with this builder's ``$defs`` attached (when there are any)."""
        if not self.defs:
            return root
        return {**root, "$defs": dict(self.defs)}

    def schema(self, tp: Any) -> JsonSchema:
        """The JSON Schema of ``tp`` (``{}`` for a type it does not understand)."""
        base, metadata = _strip(tp)
        out = self._schema(base)
        extra = _annotation_keywords(metadata)
        return {**out, **extra} if extra else out

    def _schema(self, tp: Any) -> JsonSchema:
        if tp is Any or tp is object or tp is inspect.Parameter.empty:
            return {}
        if tp is None or tp is _NONE:
            return {"type": "null"}
        if tp in _PRIMITIVES:
            return {"type": _PRIMITIVES[tp]}
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is Literal:
            return _enum_schema([_literal_value(v) for v in args])
        if origin in _UNIONS:
            return self._union(args)
        if tp in _SEQUENCES or tp is tuple:
            return {"type": "array"}
        if tp in _SETS:
            return {"type": "array", "uniqueItems": True}
        if tp in _MAPPINGS:
            return {"type": "object"}
        if origin in _SEQUENCES:
            return self._array(args[0] if args else Any)
        if origin in _SETS:
            return {**self._array(args[0] if args else Any), "uniqueItems": True}
        if origin is tuple:
            return self._tuple(args)
        if origin in _MAPPINGS:
            value = self.schema(args[1]) if len(args) == 2 else {}
            return (
                {"type": "object", "additionalProperties": value} if value else {"type": "object"}
            )
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return self._named(tp, self._enum)
        if _pydantic_model(tp):
            return self._pydantic(tp)
        if _is_record(tp) or _is_typeddict(tp):
            return self._named(tp, self._object)
        return {}

    def _array(self, item: Any) -> JsonSchema:
        items = self.schema(item)
        return {"type": "array", "items": items} if items else {"type": "array"}

    def _tuple(self, args: tuple[Any, ...]) -> JsonSchema:
        if len(args) == 2 and args[1] is Ellipsis:
            return self._array(args[0])
        if args == ((),):  # tuple[()]
            args = ()
        return {
            "type": "array",
            "prefixItems": [self.schema(a) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }

    def _union(self, members: tuple[Any, ...]) -> JsonSchema:
        schemas: list[JsonSchema] = []
        for member in members:
            schema = self.schema(member)
            if not schema:
                return {}  # Any in a union: anything goes
            if schema not in schemas:
                schemas.append(schema)
        if all(set(s) == {"type"} and isinstance(s["type"], str) for s in schemas):
            names = list(dict.fromkeys(s["type"] for s in schemas))
            return {"type": names[0] if len(names) == 1 else names}
        return {"anyOf": schemas}

    def _named(self, tp: Any, build: Callable[[Any], JsonSchema]) -> JsonSchema:
        """Build a class's schema inline, or into ``$defs`` when it is recursive."""
        ref = self._refs.get(tp)
        if ref is not None:
            return {"$ref": ref}
        if tp in self._inline:
            return self._inline[tp]
        if tp in self._building:
            ref = self._refs[tp] = f"#/$defs/{self._def_name(tp)}"
            return {"$ref": ref}
        self._building.add(tp)
        try:
            schema = build(tp)
        finally:
            self._building.discard(tp)
        ref = self._refs.get(tp)
        if ref is None:
            self._inline[tp] = schema
            return schema
        self.defs[ref.rsplit("/", 1)[1]] = schema
        return {"$ref": ref}

    def _def_name(self, tp: Any, base: str | None = None) -> str:
        if base is None:
            cls = typing.get_origin(tp) or tp
            base = getattr(cls, "__name__", "Type")
            args = typing.get_args(tp)
            if args:
                base += "_" + "_".join(getattr(a, "__name__", "T") for a in args)
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", base)
        name, n = base, 1
        while name in self._names and self._names[name] != tp:
            n += 1
            name = f"{base}{n}"
        self._names[name] = tp
        return name

    def _enum(self, cls: type[enum.Enum]) -> JsonSchema:
        schema = _enum_schema([m.value for m in cls])
        summary, _ = _class_doc(cls)
        if summary:
            schema["description"] = summary
        return schema

    def _object(self, tp: Any) -> JsonSchema:
        cls = typing.get_origin(tp) or tp
        summary, field_docs = _class_doc(cls)
        properties: JsonSchema = {}
        required: list[str] = []
        for field in _fields(tp):
            prop = self.schema(field.type)
            if field.name in field_docs and not _annotated_description(field.type):
                prop = {**prop, "description": field_docs[field.name]}
            if field.default is not _NO_DEFAULT:
                default = json_default(field.default, field.type)
                if default is not _NO_DEFAULT:
                    prop = {**prop, "default": default}
            properties[field.name] = prop
            if field.required:
                required.append(field.name)
        schema: JsonSchema = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        if summary:
            schema["description"] = summary
        return schema

    def _pydantic(self, model: Any) -> JsonSchema:
        raw: JsonSchema = model.model_json_schema(mode=self._mode)
        defs: dict[str, JsonSchema] = raw.pop("$defs", {})
        renames: dict[str, str] = {}
        for name, schema in defs.items():
            owner = self._names.setdefault(name, schema)  # claim the name with the schema
            if owner is not schema and owner != schema:  # taken by something else
                renames[name] = self._def_name(schema, name)
        if renames:
            raw, defs = _rename_refs(raw, renames), _rename_refs(defs, renames)
            defs = {renames.get(k, k): v for k, v in defs.items()}
        self.defs.update(defs)
        return raw


def _enum_schema(values: list[Any]) -> JsonSchema:
    kinds = list(dict.fromkeys(_json_kind(v) for v in values))
    schema: JsonSchema = {"const": values[0]} if len(values) == 1 else {"enum": values}
    if all(k in _ARTICLES for k in kinds):
        schema["type"] = kinds[0] if len(kinds) == 1 else kinds
    return schema


def _rename_refs(node: Any, renames: dict[str, str]) -> Any:
    if isinstance(node, dict):
        out = {k: _rename_refs(v, renames) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/") :]
            out["$ref"] = f"#/$defs/{renames.get(name, name)}"
        return out
    if isinstance(node, list):
        return [_rename_refs(v, renames) for v in node]
    return node


def json_default(value: Any, tp: Any = Any) -> Any:
    """``value`` as JSON for a schema's ``default``, or a private sentinel when it has none."""
    try:
        out = serializer(tp)(value) if tp is not Any else converter.unstructure(value)
        json.dumps(out)
    except Exception:
        return _NO_DEFAULT
    return out


def type_schema(tp: Any) -> JsonSchema:
    """The JSON Schema document (with ``$defs`` when needed) of one type."""
    builder = SchemaBuilder()
    return builder.document(builder.schema(tp))


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


_CHEAP_KEYWORDS: Final = frozenset({"type", "enum", "description", "title", "examples"})


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


# --- tool signatures -----------------------------------------------------------------------


@final
@attrs.frozen
class ArgumentBinder:
    """Turns a ``tools/call``'s arguments into the keyword arguments of the function.

    Everything is computed at registration. Per call: keep the known names,
    then structure only the parameters whose type needs it (never the
    primitives, which the schema check has already validated).

    Attributes:
        params: The names of the function's argument parameters.
        structured: ``(name, type, hook)`` of the parameters to structure.
    """

    params: frozenset[str]
    structured: tuple[tuple[str, Any, Hook], ...] = ()

    def __call__(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Select and structure ``arguments``.

        Raises:
            ArgumentError: A value does not fit its parameter's type; the
                message names the path of the value (``point.x``,
                ``items[2].name``).
        """
        params = self.params
        kwargs = {k: v for k, v in arguments.items() if k in params}
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
    for name, param in sig.parameters.items():
        annotation = hints.get(name, Any)
        if annotation is context_type:
            context_param = name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
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
    returns = hints.get("return", Any)
    output = None
    if not _is_text(returns) and not unstructured_return(returns):
        output = output_shape(returns)
    binder = ArgumentBinder(frozenset(params), tuple(structured))
    return ToolSignature(builder.document(schema), binder, context_param, output)
