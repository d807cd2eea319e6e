"""Types of the completion utility: ``completion/complete``."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import attrs

from ._base import Meta, _extra, _meta
from ._convert import KEEP, converter

#: The most values one ``completion/complete`` answer may carry.
MAX_COMPLETION_VALUES: Final = 100


@attrs.frozen
class PromptReference:
    """Completion of a prompt's argument (``ref/prompt``)."""

    name: str
    type: Literal["ref/prompt"] = attrs.field(default="ref/prompt", metadata={KEEP: True})
    title: str | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ResourceTemplateReference:
    """Completion of a resource template's variable (``ref/resource``)."""

    uri: str
    type: Literal["ref/resource"] = attrs.field(default="ref/resource", metadata={KEEP: True})
    extra: dict[str, Any] = _extra()


CompletionReference: TypeAlias = PromptReference | ResourceTemplateReference


def _structure_reference(value: Any, _: Any) -> Any:
    if not isinstance(value, dict):
        raise TypeError("a completion reference must be an object")
    kind = value.get("type")
    if kind == "ref/prompt":
        return converter.structure(value, PromptReference)
    if kind == "ref/resource":
        return converter.structure(value, ResourceTemplateReference)
    raise TypeError('a completion reference has type "ref/prompt" or "ref/resource"')


converter.register_structure_hook(CompletionReference, _structure_reference)


@attrs.frozen
class CompletionArgument:
    """The argument being completed and its partial value."""

    name: str
    value: str
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CompletionContext:
    """Arguments already resolved (``context.arguments``)."""

    arguments: dict[str, Any] | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CompleteParams:
    """Parameters of ``completion/complete``."""

    ref: CompletionReference
    argument: CompletionArgument
    context: CompletionContext | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class Completion:
    """Completion values (at most 100), with ``total`` and ``has_more`` when known."""

    values: list[str] = attrs.field(factory=list, metadata={KEEP: True})
    total: int | None = None
    has_more: bool | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CompleteResult:
    """Result of ``completion/complete``."""

    completion: Completion
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()
