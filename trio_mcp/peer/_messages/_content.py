"""Content blocks: text, image, audio, resource links and embedded resources."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import attrs

from ._base import Meta, _extra, _meta
from ._convert import KEEP, converter


@attrs.frozen
class TextContent:
    """Text for or from a model."""

    text: str
    type: Literal["text"] = attrs.field(default="text", metadata={KEEP: True})
    annotations: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ImageContent:
    """A base64-encoded image."""

    data: str
    mime_type: str
    type: Literal["image"] = attrs.field(default="image", metadata={KEEP: True})
    annotations: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class AudioContent:
    """Base64-encoded audio."""

    data: str
    mime_type: str
    type: Literal["audio"] = attrs.field(default="audio", metadata={KEEP: True})
    annotations: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ResourceLink:
    """A link to a resource the server can read."""

    uri: str
    name: str
    type: Literal["resource_link"] = attrs.field(default="resource_link", metadata={KEEP: True})
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class EmbeddedResource:
    """Resource contents embedded in a result (``resource`` is the raw contents)."""

    resource: dict[str, Any]
    type: Literal["resource"] = attrs.field(default="resource", metadata={KEEP: True})
    annotations: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class OtherContent:
    """A content block of a type this library does not model (kept verbatim)."""

    type: str = attrs.field(metadata={KEEP: True})
    extra: dict[str, Any] = _extra()


ContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource | OtherContent
)
_CONTENT_BY_TYPE: Final[dict[str, type[Any]]] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "resource_link": ResourceLink,
    "resource": EmbeddedResource,
}


def _structure_content(value: Any, _: Any) -> Any:
    if not isinstance(value, dict):
        raise TypeError("a content block must be an object")
    kind = value.get("type")
    if not isinstance(kind, str):
        raise TypeError('a content block needs a string "type"')
    cls = _CONTENT_BY_TYPE.get(kind, OtherContent)
    return converter.structure(value, cls)


converter.register_structure_hook(ContentBlock, _structure_content)


