"""Resource registration: fixed resources, RFC 6570 level-1 templates, contents.

A resource is an ``async`` function returning its contents: a ``str``
(text), ``bytes`` (sent base64 as a blob), one or a list of
:class:`~trio_mcp.TextResourceContents` / :class:`~trio_mcp.BlobResourceContents`,
or a whole :class:`~trio_mcp.ReadResourceResult`. A template's function
takes the template's variables as parameters (strings, percent-decoded).
"""

from __future__ import annotations

import base64
import re
from typing import Any, Final, final
from urllib.parse import unquote

import attrs

from .._messages import (
    BlobResourceContents,
    ReadResourceResult,
    Resource,
    ResourceContents,
    ResourceTemplate,
    TextResourceContents,
)
from .._signatures._signature import AsyncFunction, Signature

_VARIABLE: Final = re.compile(r"\{([^{}]*)\}")
_NAME: Final = re.compile(r"^[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*$")


@final
@attrs.frozen
class ResourceSpec:
    """A registered fixed resource: its listing and the function that reads it."""

    resource: Resource
    fn: AsyncFunction
    sig: Signature


@final
@attrs.frozen
class TemplateSpec:
    """A registered resource template: its listing, matcher and function."""

    template: ResourceTemplate
    fn: AsyncFunction
    sig: Signature
    pattern: re.Pattern[str]
    variables: tuple[str, ...]

    def match(self, uri: str) -> dict[str, str] | None:
        """The template's variables in ``uri``, or ``None`` if it does not match."""
        found = self.pattern.fullmatch(uri)
        if found is None:
            return None
        values = found.groups()
        return {name: unquote(v) for name, v in zip(self.variables, values, strict=True)}


def compile_template(uri_template: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """The matcher and variable names of an RFC 6570 level-1 URI template.

    A variable matches one or more characters other than ``/ ? #``.

    Raises:
        ValueError: An expression uses an operator, modifier or list
            (levels 2-4), a name repeats, or the template has no variable.
    """
    parts: list[str] = []
    names: list[str] = []
    pos = 0
    for found in _VARIABLE.finditer(uri_template):
        name = found.group(1)
        if not _NAME.match(name):
            raise ValueError(
                f"only RFC 6570 level-1 variables like {{name}} are supported, not {found.group()}"
            )
        if name in names:
            raise ValueError(f"variable {name!r} appears twice in {uri_template!r}")
        parts.append(_literal(uri_template, uri_template[pos : found.start()]))
        parts.append(r"([^/?#]+)")
        names.append(name)
        pos = found.end()
    parts.append(_literal(uri_template, uri_template[pos:]))
    if not names:
        raise ValueError(f"{uri_template!r} has no {{variable}}: register it as a resource")
    return re.compile("".join(parts)), tuple(names)


def _literal(template: str, text: str) -> str:
    if "{" in text or "}" in text:
        raise ValueError(f"unbalanced braces in {template!r}")
    return re.escape(text)


def to_read_result(value: Any, uri: str, mime_type: str | None) -> ReadResourceResult:
    """Turn what a resource function returned into a ``ReadResourceResult``.

    Raises:
        TypeError: The value is none of the accepted kinds.
    """
    if isinstance(value, ReadResourceResult):
        return value
    items = value if isinstance(value, list) else [value]
    contents: list[ResourceContents] = []
    for item in items:
        if isinstance(item, str):
            contents.append(TextResourceContents(uri=uri, text=item, mime_type=mime_type))
        elif isinstance(item, bytes | bytearray | memoryview):
            blob = base64.b64encode(bytes(item)).decode("ascii")
            contents.append(BlobResourceContents(uri=uri, blob=blob, mime_type=mime_type))
        elif isinstance(item, TextResourceContents | BlobResourceContents):
            contents.append(item)
        else:
            raise TypeError(f"a resource function returned {type(item).__name__}")
    return ReadResourceResult(contents=contents)
