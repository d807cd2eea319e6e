"""The MCP request headers of Streamable HTTP in 2026-07-28 (SEP-2243), client side.

Every modern POST mirrors its body in headers: ``Mcp-Method`` (the method),
``Mcp-Name`` (``params.name`` of ``tools/call`` and ``prompts/get``,
``params.uri`` of ``resources/read``) and, for ``tools/call``, one
``Mcp-Param-<Name>`` per argument whose property in the tool's
``inputSchema`` carries ``"x-mcp-header": "<Name>"``.

A value that is not plain visible ASCII (or has leading/trailing
whitespace, or looks like the sentinel itself) is sent as
``=?base64?<Base64 of its UTF-8>?=`` (:func:`header_value`).

:func:`tool_header_map` validates a tool's annotations: a tool whose
annotations are invalid (empty or not an RFC 9110 token, duplicated
case-insensitively, on a property that is not a string, integer or
boolean, or reachable other than through ``properties`` chains) must not be
used; :func:`filter_tools` drops such tools from a ``tools/list`` result,
with a warning.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Iterator
from typing import Any, Final

log = logging.getLogger("trio_mcp.transports")

#: The annotation naming a tool argument's header.
X_MCP_HEADER: Final = "x-mcp-header"
#: Prefix of the headers that mirror tool arguments.
PARAM_HEADER_PREFIX: Final = "Mcp-Param-"
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_SENTINEL: Final = re.compile(r"=\?base64\?.*\?=", re.DOTALL)
_PRIMITIVES: Final = frozenset({"string", "integer", "boolean"})
#: Keywords whose value is a map of name -> subschema (not a property chain).
_SCHEMA_MAPS: Final = frozenset({
    "$defs", "definitions", "patternProperties", "dependentSchemas", "dependencies",
})
#: Keywords whose value is data, not a schema.
_DATA_KEYWORDS: Final = frozenset({
    "const", "enum", "default", "examples", "example", X_MCP_HEADER,
})


class InvalidToolHeaders(ValueError):
    """A tool's ``x-mcp-header`` annotations break SEP-2243's rules."""


def header_value(value: str) -> str:
    """``value`` as an HTTP header value: as is, or ``=?base64?...?=`` when unsafe."""
    plain = (
        all(0x20 <= ord(c) <= 0x7E for c in value)
        and value == value.strip(" ")
        and not _SENTINEL.fullmatch(value)
    )
    if plain:
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _param_text(value: Any) -> str | None:
    """An argument's header text: booleans lowercase, integers decimal, strings as is."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else json.dumps(value)
    if isinstance(value, str):
        return value
    return None  # not a primitive: nothing to mirror


def _annotations(
    node: Any, path: tuple[str, ...], on_chain: bool
) -> Iterator[tuple[tuple[str, ...], bool, dict[str, Any]]]:
    """Every schema node holding ``x-mcp-header``: (property path, on a properties chain, node)."""
    if not isinstance(node, dict):
        return
    if X_MCP_HEADER in node:
        yield path, on_chain and bool(path), node
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            continue
        if key == "properties" and isinstance(value, dict):
            for name, sub in value.items():
                yield from _annotations(sub, (*path, str(name)), on_chain)
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            for sub in value.values():
                yield from _annotations(sub, path, False)
        elif isinstance(value, dict):
            yield from _annotations(value, path, False)
        elif isinstance(value, list):
            for sub in value:
                yield from _annotations(sub, path, False)


def _primitive(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind in _PRIMITIVES
    if isinstance(kind, list):
        kinds = {k for k in kind if k != "null"}
        return len(kinds) == 1 and kinds <= _PRIMITIVES
    return False


def tool_header_map(input_schema: Any) -> dict[str, tuple[str, ...]]:
    """A tool's headers: ``Name`` -> the argument's path through nested objects.

    Raises:
        InvalidToolHeaders: An annotation is empty or not an RFC 9110 token,
            is duplicated (case-insensitively), is on a property that is not
            a string, integer or boolean (``number`` included), or sits
            anywhere but on a ``properties`` chain from the root.
    """
    headers: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for path, on_chain, node in _annotations(input_schema, (), True):
        name = node[X_MCP_HEADER]
        where = "/".join(path) or "the root"
        if not isinstance(name, str) or not name:
            raise InvalidToolHeaders(f"{where}: x-mcp-header must be a non-empty string")
        if not _TOKEN.fullmatch(name):
            raise InvalidToolHeaders(f"{where}: x-mcp-header {name!r} is not an HTTP token")
        if name.lower() in seen:
            raise InvalidToolHeaders(f"{where}: x-mcp-header {name!r} is used twice")
        if not on_chain:
            raise InvalidToolHeaders(
                f"{where}: x-mcp-header {name!r} is not on a property reached by properties only"
            )
        if not _primitive(node):
            raise InvalidToolHeaders(
                f"{where}: x-mcp-header {name!r} is on a property that is not a string, "
                "integer or boolean"
            )
        seen.add(name.lower())
        headers[name] = path
    return headers


def param_headers(
    header_map: dict[str, tuple[str, ...]], arguments: Any
) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers for a call's ``arguments`` (absent or null: omitted)."""
    out: dict[str, str] = {}
    for name, path in header_map.items():
        value: Any = arguments
        for step in path:
            value = value.get(step) if isinstance(value, dict) else None
        text = _param_text(value)
        if text is not None:
            out[PARAM_HEADER_PREFIX + name] = header_value(text)
    return out


def filter_tools(result: Any) -> dict[str, dict[str, tuple[str, ...]]]:
    """Drop tools with invalid annotations from a ``tools/list`` result, in place.

    Returns:
        Tool name -> its header map, for the tools kept.
    """
    kept: dict[str, dict[str, tuple[str, ...]]] = {}
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return kept
    tools: list[Any] = []
    for tool in result["tools"]:
        if not isinstance(tool, dict):
            tools.append(tool)
            continue
        try:
            header_map = tool_header_map(tool.get("inputSchema"))
        except InvalidToolHeaders as exc:
            log.warning("tool %r left out: %s", str(tool.get("name"))[:100], exc)
            continue
        tools.append(tool)
        if isinstance(tool.get("name"), str):
            kept[tool["name"]] = header_map
    result["tools"] = tools
    return kept


#: Method -> the param ``Mcp-Name`` mirrors (the tasks extension: the task id).
_NAMED = {
    "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
}


def standard_headers(method: str, params: Any) -> dict[str, str]:
    """``Mcp-Method``, and ``Mcp-Name`` for the methods that name something."""
    out = {"Mcp-Method": header_value(method)}
    key = _NAMED.get(method)
    if key is not None and isinstance(params, dict) and isinstance(params.get(key), str):
        out["Mcp-Name"] = header_value(params[key])
    return out
