"""Types of the resources feature: listing, templates, reading, subscriptions."""

from __future__ import annotations

from typing import Any, TypeAlias

import attrs

from ._base import Meta, _extra, _meta
from ._convert import converter


@attrs.frozen
class Resource:
    """A fixed resource as listed by ``resources/list``.

    ``annotations`` is the wire ``Annotations`` object (``audience``,
    ``priority``, ``lastModified``); ``icons`` a list of wire ``Icon`` objects.
    """

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ResourceTemplate:
    """A parameterized resource (RFC 6570 URI template), ``resources/templates/list``."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ListResourcesResult:
    """Result of ``resources/list``."""

    resources: list[Resource]
    next_cursor: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ListResourceTemplatesResult:
    """Result of ``resources/templates/list``."""

    resource_templates: list[ResourceTemplate]
    next_cursor: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ResourceUriParams:
    """Parameters naming one resource: ``resources/read``, ``resources/subscribe``,
    ``resources/unsubscribe`` and ``notifications/resources/updated``."""

    uri: str
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class TextResourceContents:
    """The text contents of a resource."""

    uri: str
    text: str
    mime_type: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class BlobResourceContents:
    """The binary contents of a resource, base64-encoded in ``blob``."""

    uri: str
    blob: str
    mime_type: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


ResourceContents: TypeAlias = TextResourceContents | BlobResourceContents


def _structure_contents(value: Any, _: Any) -> Any:
    if not isinstance(value, dict):
        raise TypeError("resource contents must be an object")
    if "blob" in value and "text" not in value:
        return converter.structure(value, BlobResourceContents)
    return converter.structure(value, TextResourceContents)


converter.register_structure_hook(ResourceContents, _structure_contents)


@attrs.frozen
class ReadResourceResult:
    """Result of ``resources/read``."""

    contents: list[ResourceContents]
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()

    @property
    def text(self) -> str:
        """The text of every text contents item, joined by newlines (a convenience)."""
        return "\n".join(c.text for c in self.contents if isinstance(c, TextResourceContents))
