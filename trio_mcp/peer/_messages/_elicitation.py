"""Elicitation beyond the basic request: form schemas, URL mode, completion notices.

Form mode asks for a flat object of primitive properties; the helpers here
build each kind the 2025-11-25 schema allows (string, number, boolean, and
the SEP-1330 enums: untitled, titled, multi-select), each with an optional
``default`` (SEP-1034). :func:`check_form_schema` tells whether a requested
schema keeps to that subset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from ._base import Meta, _extra, _meta

#: JSON-RPC error code of ``URLElicitationRequiredError``.
URL_ELICITATION_REQUIRED: Final = -32042
_PRIMITIVES: Final = frozenset({"string", "number", "integer", "boolean"})
_STRING_FORMATS: Final = frozenset({"email", "uri", "date", "date-time"})


@attrs.frozen
class ElicitationCompleteParams:
    """Parameters of ``notifications/elicitation/complete`` (URL mode)."""

    elicitation_id: str
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


def _field(kind: str, title: str | None, description: str | None, **rest: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind}
    if title is not None:
        out["title"] = title
    if description is not None:
        out["description"] = description
    out.update({k: v for k, v in rest.items() if v is not None})
    return out


def string_field(
    *,
    title: str | None = None,
    description: str | None = None,
    default: str | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    pattern: str | None = None,
    format: str | None = None,
) -> dict[str, Any]:
    """A string property of a form.

    Args:
        title: Display title.
        description: Description.
        default: Prefilled value (SEP-1034).
        min_length: Shortest length.
        max_length: Longest length.
        pattern: A regular expression the value matches.
        format: ``email``, ``uri``, ``date`` or ``date-time``.

    Raises:
        ValueError: Another ``format``.
    """
    if format is not None and format not in _STRING_FORMATS:
        raise ValueError(f"format must be one of {sorted(_STRING_FORMATS)}")
    return _field("string", title, description, default=default, minLength=min_length,
                  maxLength=max_length, pattern=pattern, format=format)


def number_field(
    *,
    integer: bool = False,
    title: str | None = None,
    description: str | None = None,
    default: float | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
) -> dict[str, Any]:
    """A number (or, with ``integer``, an integer) property of a form.

    Args:
        integer: Ask for an integer.
        title: Display title.
        description: Description.
        default: Prefilled value (SEP-1034).
        minimum: Smallest value.
        maximum: Largest value.
    """
    kind = "integer" if integer else "number"
    return _field(kind, title, description, default=default, minimum=minimum, maximum=maximum)


def boolean_field(
    *, title: str | None = None, description: str | None = None, default: bool | None = None
) -> dict[str, Any]:
    """A boolean property of a form.

    Args:
        title: Display title.
        description: Description.
        default: Prefilled value (SEP-1034).
    """
    return _field("boolean", title, description, default=default)


def enum_field(
    choices: Sequence[str] | Mapping[str, str],
    *,
    multiple: bool = False,
    title: str | None = None,
    description: str | None = None,
    default: str | Sequence[str] | None = None,
    min_items: int | None = None,
    max_items: int | None = None,
) -> dict[str, Any]:
    """A choice among strings (SEP-1330).

    Args:
        choices: The values; a mapping ``value -> display title`` makes a
            titled enum (``oneOf`` / ``anyOf`` of ``const`` + ``title``).
        multiple: A multi-select (an array of the values).
        title: The property's display title.
        description: Its description.
        default: The preselected value (a list of values when ``multiple``).
        min_items: The fewest values of a multi-select.
        max_items: The most values of a multi-select.
    """
    titled = isinstance(choices, Mapping)
    options: list[dict[str, str]] = []
    if isinstance(choices, Mapping):
        options = [{"const": v, "title": t} for v, t in choices.items()]
    values = list(choices)
    if multiple:
        items: dict[str, Any] = {"anyOf": options} if titled else {"type": "string", "enum": values}
        default_list = list(default) if default is not None else None
        return _field("array", title, description, minItems=min_items, maxItems=max_items,
                      items=items, default=default_list)
    if titled:
        return _field("string", title, description, oneOf=options, default=default)
    return _field("string", title, description, enum=values, default=default)


def form_schema(
    properties: Mapping[str, dict[str, Any]], required: Sequence[str] = ()
) -> dict[str, Any]:
    """The ``requestedSchema`` object of a form.

    Args:
        properties: The fields, by name (made with the ``*_field`` helpers).
        required: The names of the fields the user must fill.
    """
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        schema["required"] = list(required)
    return schema


def check_form_schema(schema: Mapping[str, Any]) -> str | None:
    """Tell whether ``schema`` is a flat object of primitive properties.

    Returns:
        ``None`` when it is, else a one-line reason.
    """
    if schema.get("type") != "object":
        return 'a requested schema has "type": "object"'
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return "a requested schema has an object of properties"
    for name, prop in properties.items():
        if not isinstance(prop, Mapping):
            return f"property {name!r} is not a schema object"
        kind = prop.get("type")
        if kind == "array":
            items = prop.get("items")
            if not isinstance(items, Mapping) or not ("enum" in items or "anyOf" in items):
                return f"property {name!r}: an array must be a multi-select enum"
        elif kind not in _PRIMITIVES:
            return f"property {name!r} must be a string, number, integer or boolean"
    return None
