"""The one cattrs converter between MCP attrs classes and wire JSON.

Rules, registered once as hook factories (as lsprotocol does):

* Python ``snake_case`` field names map to ``camelCase`` on the wire; a field
  named ``meta`` maps to ``_meta``.
* Optional fields whose value equals their default are omitted.
* Fields without a default are always written, so ``ttl: null`` (unlimited)
  survives; a field can also be marked ``keep`` to be written even when it
  equals its default.
* A field named ``extra`` collects every wire key the class does not know,
  and is merged back on the way out, so unknown fields survive round trips.

Hooks are generated once per class (no per-message reflection).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ..._errors import INVALID_PARAMS, McpError, RemoteProtocolError

T = TypeVar("T")

#: Field metadata key: write the field even when it equals its default.
KEEP: Final = "trio_mcp_keep"
_EXTRA: Final = "extra"


def wire_name(name: str) -> str:
    """Return the wire (camelCase) name of a Python field name."""
    if name == "meta":
        return "_meta"
    if name == "schema_":
        return "$schema"
    head, *rest = name.rstrip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _is_ours(cls: Any) -> bool:
    return attrs.has(cls) and getattr(cls, "__module__", "").startswith("trio_mcp.")


converter: Final = cattrs.Converter(prefer_attrib_converters=False)


def _passthrough(value: Any, _: Any) -> Any:
    return value


# Ids and progress tokens are ``str | int``: keep them as given.
converter.register_structure_hook(str | int, _passthrough)
converter.register_structure_hook(int | str, _passthrough)
converter.register_structure_hook(Any, _passthrough)


# Strict primitives: the wire never gets silently coerced ("1" is not 1).
def _strict(*types: type[Any], name: str) -> Callable[[Any, Any], Any]:
    def check(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and bool not in types:
            raise TypeError(f"expected {name}, got a boolean")
        if not isinstance(value, types):
            raise TypeError(f"expected {name}, got {type(value).__name__}")
        return value

    return check


converter.register_structure_hook(str, _strict(str, name="a string"))
converter.register_structure_hook(int, _strict(int, name="an integer"))
converter.register_structure_hook(float, _strict(int, float, name="a number"))
converter.register_structure_hook(bool, _strict(bool, name="a boolean"))


def _is_list(typ: Any) -> bool:
    return getattr(typ, "__origin__", None) is list


def _make_list_structure(typ: Any) -> Callable[[Any, Any], Any]:
    (item,) = getattr(typ, "__args__", (Any,))
    structure_item = converter.get_structure_hook(item)

    def structure(value: Any, _: Any) -> list[Any]:
        if not isinstance(value, list):
            raise TypeError(f"expected an array, got {type(value).__name__}")
        return [structure_item(v, item) for v in value]

    return structure


def _is_dict(typ: Any) -> bool:
    return typ is dict or getattr(typ, "__origin__", None) is dict


def _structure_dict(value: Any, _: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


converter.register_structure_hook_factory(_is_list, _make_list_structure)
converter.register_structure_hook_factory(_is_dict, lambda _: _structure_dict)
# JSON objects held in ``dict[str, Any]`` fields are already wire JSON.
converter.register_unstructure_hook_factory(_is_dict, lambda _: lambda value: value)


def _make_unstructure(cls: type[Any]) -> Callable[[Any], dict[str, Any]]:
    fields = attrs.fields(cls)
    has_extra = any(a.name == _EXTRA for a in fields)
    overrides: dict[str, Any] = {
        a.name: override(
            rename=wire_name(a.name),
            omit=a.name == _EXTRA,
            omit_if_default=False if a.metadata.get(KEEP) else None,
        )
        for a in fields
    }
    base = make_dict_unstructure_fn(cls, converter, _cattrs_omit_if_default=True, **overrides)
    if not has_extra:
        return base

    def unstructure(obj: Any) -> dict[str, Any]:
        out = base(obj)
        for key, value in obj.extra.items():
            out.setdefault(key, value)
        return out

    return unstructure


def _make_structure(cls: type[Any]) -> Callable[[Any, Any], Any]:
    fields = attrs.fields(cls)
    has_extra = any(a.name == _EXTRA for a in fields)
    overrides: dict[str, Any] = {
        a.name: override(rename="\x00extra" if a.name == _EXTRA else wire_name(a.name))
        for a in fields
    }
    # Two hooks, both generated here once: a lean one for input that fits,
    # and cattrs' detailed one, run only when the lean one fails, so a bad
    # input raises exactly the ClassValidationError it always did.
    lean = make_dict_structure_fn(
        cls, converter, _cattrs_detailed_validation=False, **overrides
    )
    detailed = make_dict_structure_fn(cls, converter, **overrides)

    def base(data: Any, typ: Any) -> Any:
        try:
            return lean(data, typ)
        except Exception:
            return detailed(data, typ)

    if not has_extra:
        return base
    known = frozenset(wire_name(a.name) for a in fields if a.name != _EXTRA)

    def structure(data: Any, typ: Any) -> Any:
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {cls.__name__}")
        if not known.issuperset(data):
            extra = {k: v for k, v in data.items() if k not in known}
            data = {k: v for k, v in data.items() if k in known}
            data["\x00extra"] = extra
        return base(data, typ)

    return structure


converter.register_unstructure_hook_factory(_is_ours, _make_unstructure)
converter.register_structure_hook_factory(_is_ours, _make_structure)


def to_wire(obj: Any) -> Any:
    """Unstructure an MCP value (or a plain JSON value) into wire JSON."""
    return converter.unstructure(obj)


def wire_object(obj: Any) -> dict[str, Any]:
    """Unstructure an MCP attrs object into its wire JSON object."""
    out: dict[str, Any] = converter.unstructure(obj)
    return out


def from_wire(data: Any, cls: type[T]) -> T:
    """Structure wire JSON into ``cls``.

    Raises:
        McpError: -32602 (Invalid params) naming the problem, when ``data``
            does not fit ``cls``.
    """
    try:
        return converter.structure(data, cls)
    except Exception as exc:  # cattrs raises ClassValidationError & friends
        raise McpError(INVALID_PARAMS, f"Invalid params: {_describe(exc, cls)}") from exc


def from_answer(raw: Any, cls: type[T], what: str, subject: str) -> T:
    """Structure the other side's answer into ``cls`` (``dict``: the raw JSON as is).

    Raises:
        RemoteProtocolError: ``"<what> <subject> does not fit <cls>"``.
    """
    if cls is dict:
        return raw  # type: ignore[no-any-return]
    try:
        return converter.structure(raw, cls)
    except Exception as exc:
        raise RemoteProtocolError(f"{what} {subject} does not fit {cls.__name__}") from exc


def _describe(exc: BaseException, cls: type[Any]) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        notes = cattrs.transform_error(exc, path=cls.__name__)
        if notes:
            return "; ".join(notes[:3])
    return f"does not fit {cls.__name__}"
