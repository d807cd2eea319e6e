"""JSON Schema 2020-12 from type hints (see :mod:`._hints` for what is understood)."""

from __future__ import annotations

import enum
import inspect
import json
import re
import typing
from collections.abc import Callable
from typing import Any, Literal, final

from ._arguments import converter
from ._hints import (
    _ARTICLES,
    _MAPPINGS,
    _NO_DEFAULT,
    _NONE,
    _PRIMITIVES,
    _SEQUENCES,
    _SETS,
    _UNIONS,
    JsonSchema,
    _annotated_description,
    _annotation_keywords,
    _class_doc,
    _fields,
    _is_record,
    _is_typeddict,
    _json_kind,
    _literal_value,
    _pydantic_model,
    _strip,
)
from ._serialize import serializer

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

