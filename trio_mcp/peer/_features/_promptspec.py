"""Prompt registration: arguments from the signature, messages from the return value.

A prompt is an ``async`` function whose parameters are its arguments (MCP
prompt arguments are strings): one without a default is required. What it
returns becomes a ``GetPromptResult``: a ``str`` is one user text message; a
list holds :class:`~trio_mcp.PromptMessage` objects, content blocks (user
messages) or strings; a ``GetPromptResult`` is sent as it is.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, final

import attrs

from .._messages import (
    ContentBlock,
    GetPromptResult,
    OtherContent,
    Prompt,
    PromptArgument,
    PromptMessage,
    TextContent,
)
from .._signatures._signature import AsyncFunction, Signature, read_signature


@final
@attrs.frozen
class PromptSpec:
    """A registered prompt: its listing and the function that renders it."""

    prompt: Prompt
    fn: AsyncFunction
    sig: Signature


def make_prompt_spec(
    fn: AsyncFunction,
    *,
    context_type: type[Any],
    name: str | None,
    title: str | None,
    description: str | None,
    arguments: Mapping[str, str] | None,
    icons: list[dict[str, Any]] | None,
) -> PromptSpec:
    """Build the :class:`PromptSpec` of ``fn`` (see :meth:`trio_mcp.App.prompt`).

    Raises:
        TypeError: ``fn`` is not ``async``.
        ValueError: ``arguments`` describes a parameter ``fn`` does not have.
    """
    sig = read_signature(fn, context_type, "prompt")
    described = dict(arguments or {})
    unknown = set(described) - sig.names
    if unknown:
        raise ValueError(f"no parameter named {sorted(unknown)} in prompt {fn.__name__!r}")
    args = [
        PromptArgument(name=p.name, description=described.get(p.name), required=p.required)
        for p in sig.params
    ]
    prompt = Prompt(
        name=name or fn.__name__,
        title=title,
        description=description if description is not None else inspect.getdoc(fn),
        arguments=args or None,
        icons=icons,
    )
    return PromptSpec(prompt, fn, sig)


def missing_arguments(spec: PromptSpec, given: Mapping[str, Any]) -> list[str]:
    """The required arguments of ``spec`` absent from ``given``."""
    return [p.name for p in spec.sig.params if p.required and p.name not in given]


def _message(item: Any) -> PromptMessage:
    if isinstance(item, PromptMessage):
        return item
    if isinstance(item, str):
        return PromptMessage("user", TextContent(item))
    if isinstance(item, TextContent | OtherContent) or attrs.has(type(item)):
        content: ContentBlock = item
        return PromptMessage("user", content)
    raise TypeError(f"a prompt function returned a {type(item).__name__} message")


def to_prompt_result(value: Any, description: str | None) -> GetPromptResult:
    """Turn what a prompt function returned into a ``GetPromptResult``.

    Raises:
        TypeError: The value is none of the accepted kinds.
    """
    if isinstance(value, GetPromptResult):
        return value
    items = value if isinstance(value, list) else [value]
    return GetPromptResult(messages=[_message(i) for i in items], description=description)
