"""Type hints and docstrings, read for tool schemas: the first of five modules.

JSON Schema 2020-12 from type hints, and the converter that structures
arguments to match, are split by stage: this module reads hints and
docstrings; :mod:`._arguments` is the strict argument converter;
:mod:`._serialize` turns typed values back into JSON; :mod:`._schema` builds
schemas; :mod:`._toolsig` analyses a tool's signature with all of them.

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
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, Final

import attrs

#: A JSON Schema document or subschema (shared by the schema modules).
JsonSchema = dict[str, Any]
#: A cattrs structure hook.
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

